package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cocoonstack/sandbox-operator/tools/scale/report"
)

// writeReport renders DIR/report.md and its plots from a run.
func writeReport(dir string, r *Results) error {
	var p report.Page
	p.Heading(1, "This system beside the Pod path, on one real node")
	p.Para(fmt.Sprintf("Measured %s on %s by `tools/bazel run //tools/sidebyside` (%s). "+
		"Each path ran alone on a fresh single-node cluster: etcd, kube-apiserver, kube-controller-manager, "+
		"kube-scheduler, a kubelet on containerd and kube-proxy. Both fill the same SandboxTemplate (the build's "+
		"pause image) and SandboxWarmPool; the Pod path's sandbox is a Pod the kubelet runs, this system's a "+
		"claim on a simulated sandboxd node (a real node boots a microVM there).", r.Date, r.Machine, describeConfig(r.Config)))
	if len(r.Paths) == 0 {
		return fmt.Errorf("no path in the results")
	}

	names := phaseNames(r)
	p.Heading(2, "Latency")
	p.Para("From the create (a SandboxClaim on the Pod path, a Sandbox here) to its Ready condition; for a delete, " +
		"to the object gone; for a list, the call. Milliseconds.")
	header := []string{"step"}
	for _, pr := range r.Paths {
		header = append(header, pr.Path+" p50", "p90", "p99", "create answered p50")
	}
	if len(r.Paths) == 2 {
		header = append(header, "p50 ratio")
	}
	var rows [][]string
	for _, name := range names {
		row := []string{name}
		var p50s []float64
		for _, pr := range r.Paths {
			ph, ok := phaseOf(pr, name)
			if !ok {
				row = append(row, "—", "—", "—", "—")
				p50s = append(p50s, 0)
				continue
			}
			ack := "—"
			if len(ph.AckSeconds) > 0 {
				ack = ms(ph.AckP50)
			}
			row = append(row, ms(ph.P50), ms(ph.P90), ms(ph.P99), ack)
			p50s = append(p50s, ph.P50)
		}
		if len(r.Paths) == 2 {
			row = append(row, ratio(p50s[0], p50s[1]))
		}
		rows = append(rows, row)
	}
	p.Table(header, rows)
	p.AddChart("latency-p50.svg", "p50 latency by step", barChart("p50 latency by step", "ms", r, names, func(ph Phase) float64 { return 1000 * ph.P50 }))

	p.Heading(2, "Writes and CPU per sandbox")
	p.Para("The kube-apiserver's write requests and etcd's puts (its own `etcd_mvcc_put_total`) during each step, " +
		"and the CPU the path's own control plane spent, each divided by the sandboxes (or lists) the step made.")
	header = []string{"step"}
	for _, pr := range r.Paths {
		header = append(header, pr.Path+" API writes", "etcd puts", "control-plane CPU ms")
	}
	rows = nil
	for _, name := range names {
		row := []string{name}
		for _, pr := range r.Paths {
			ph, ok := phaseOf(pr, name)
			if !ok {
				row = append(row, "—", "—", "—")
				continue
			}
			row = append(row, fmt.Sprintf("%.1f", ph.APIWritesPer), fmt.Sprintf("%.1f", ph.EtcdPutsPer), fmt.Sprintf("%.2f", 1000*controlPlaneCPU(pr, ph)/float64(max(ph.Count, 1))))
		}
		rows = append(rows, row)
	}
	p.Table(header, rows)
	p.AddChart("etcd-puts.svg", "etcd puts per sandbox by step", barChart("etcd puts per sandbox", "puts", r, names, func(ph Phase) float64 { return ph.EtcdPutsPer }))

	p.Heading(2, "Writes by resource")
	p.Para("The kube-apiserver's write requests during each step, by resource: what each path writes a sandbox with.")
	for _, pr := range r.Paths {
		p.Heading(3, pr.Path)
		keyedTable(&p, pr, "%.0f", func(ph Phase) map[string]float64 { return ph.Writes.APIWritesByResource })
	}

	p.Heading(2, "CPU by process")
	p.Para("Seconds each process spent during each step, read from /proc at the kernel's clock tick (10 ms), so short steps round; etcd runs inside the harness and is not listed.")
	for _, pr := range r.Paths {
		p.Heading(3, pr.Path)
		keyedTable(&p, pr, "%.2f", func(ph Phase) map[string]float64 { return ph.CPUSeconds })
	}

	p.Heading(2, "Pool refill")
	p.Para("After each burst, the time from its last Ready until the pool was full again, seconds.")
	header = []string{"burst"}
	for _, pr := range r.Paths {
		header = append(header, pr.Path)
	}
	rows = nil
	var sizes []int
	for _, pr := range r.Paths {
		for s := range pr.Refills {
			if !slices.Contains(sizes, s) {
				sizes = append(sizes, s)
			}
		}
	}
	slices.Sort(sizes)
	for _, s := range sizes {
		row := []string{fmt.Sprint(s)}
		for _, pr := range r.Paths {
			if v, ok := pr.Refills[s]; ok {
				row = append(row, fmt.Sprintf("%.1f", v))
			} else {
				row = append(row, "—")
			}
		}
		rows = append(rows, row)
	}
	p.Table(header, rows)

	targetsSection(&p, r)
	return p.WriteDir(dir, "report.md")
}

// keyedTable is a table of a path's steps by the keys of one map of
// each step (resources, processes), in key order.
func keyedTable(p *report.Page, pr *PathResults, format string, values func(Phase) map[string]float64) {
	var keys []string
	for _, ph := range pr.Phases {
		for k := range values(ph) {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	var rows [][]string
	for _, ph := range pr.Phases {
		row := []string{ph.Name}
		for _, k := range keys {
			row = append(row, fmt.Sprintf(format, values(ph)[k]))
		}
		rows = append(rows, row)
	}
	p.Table(append([]string{"step"}, keys...), rows)
}

// controlPlaneCPU is what the path's own controller (the upstream
// controller, or sandbox-apiserver) spent in a phase, seconds.
func controlPlaneCPU(pr *PathResults, ph Phase) float64 {
	for _, k := range []string{"agent-sandbox-controller", "sandbox-apiserver"} {
		if v, ok := ph.CPUSeconds[k]; ok {
			return v
		}
	}
	return 0
}

// phaseNames are every path's step names, in the first path's order.
func phaseNames(r *Results) []string {
	var out []string
	for _, pr := range r.Paths {
		for _, ph := range pr.Phases {
			if !slices.Contains(out, ph.Name) {
				out = append(out, ph.Name)
			}
		}
	}
	return out
}

func phaseOf(pr *PathResults, name string) (Phase, bool) {
	for _, ph := range pr.Phases {
		if ph.Name == name {
			return ph, true
		}
	}
	return Phase{}, false
}

func barChart(title, unit string, r *Results, names []string, value func(Phase) float64) report.BarChart {
	c := report.BarChart{Title: title, YLabel: unit, Categories: names}
	for _, pr := range r.Paths {
		s := report.BarSeries{Name: pr.Path}
		for _, name := range names {
			ph, _ := phaseOf(pr, name)
			s.Values = append(s.Values, value(ph))
		}
		c.Series = append(c.Series, s)
	}
	return c
}

func ms(s float64) string { return fmt.Sprintf("%.1f", 1000*s) }

// ratio is how many times the first is of the second ("41×").
func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "—"
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", a/b), ".0") + "×"
}

// describeConfig is the run's settings in words.
func describeConfig(c map[string]any) string {
	return fmt.Sprintf("a pool of %v, %v claims one at a time, bursts of %v, %v lists; %v simulated nodes on this system's side",
		c["pool"], c["sequential"], c["bursts"], c["lists"], c["operatorNodes"])
}
