package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cocoonstack/sandbox-operator/tools/scale/report"
)

// Issue 31's targets for this system against the Pod path, per create
// step: its p50 to Ready at least this many times faster, and at least
// this many times fewer etcd puts per sandbox.
const (
	targetLatencyRatio = 20.0
	targetEtcdRatio    = 50.0
)

// targetRow is one create step checked against the targets, with what
// bounds this system's side, from the same run's measurements.
type targetRow struct {
	step                    string
	latencyRatio, etcdRatio float64
	// ackShare is this system's create answer as a share of its p50 to
	// Ready: how much of the latency is the create call itself.
	ackShare float64
	// writesPer are this system's API writes per sandbox by resource.
	writesPer map[string]float64
}

// targetRows checks every step with create answers; pod and ours are
// the two paths' results.
func targetRows(pod, ours *PathResults) []targetRow {
	var rows []targetRow
	for _, o := range ours.Phases {
		p, ok := phaseOf(pod, o.Name)
		if !ok || len(o.AckSeconds) == 0 || o.P50 <= 0 || o.Count == 0 {
			continue
		}
		row := targetRow{step: o.Name, latencyRatio: p.P50 / o.P50, ackShare: o.AckP50 / o.P50, writesPer: map[string]float64{}}
		if o.EtcdPutsPer > 0 {
			row.etcdRatio = p.EtcdPutsPer / o.EtcdPutsPer
		}
		for res, n := range o.Writes.APIWritesByResource {
			row.writesPer[res] = n / float64(o.Count)
		}
		rows = append(rows, row)
	}
	return rows
}

// verdict is "met" or "missed" for a ratio against its target; a ratio of
// 0 (nothing to divide by) meets it, since this side wrote nothing.
func verdict(got, target float64, zeroMeets bool) string {
	if got >= target || (zeroMeets && got == 0) {
		return "met"
	}
	return "missed"
}

// targetsSection writes the targets table, or nothing unless the run has
// the Pod path and this system, in that order.
func targetsSection(p *report.Page, r *Results) {
	if len(r.Paths) != 2 {
		return
	}
	rows := targetRows(r.Paths[0], r.Paths[1])
	if len(rows) == 0 {
		return
	}
	p.Heading(2, "Targets")
	p.Para(fmt.Sprintf("Issue 31's targets for every create step: this system's p50 to Ready at least %.0f× the Pod path's, and at least %.0f× fewer etcd puts per sandbox. "+
		"The last two columns are what bounds this system's side, from the same run: the share of its latency that is the create call's own answer, and its API writes per sandbox by resource "+
		"(configmaps are the cross-replica name holds; nodeinventories and leases are the nodes' publishes and the leader's renewals, which come at a fixed rate whatever is created).",
		targetLatencyRatio, targetEtcdRatio))
	var table [][]string
	for _, t := range rows {
		etcd := "—"
		if t.etcdRatio > 0 {
			etcd = fmt.Sprintf("%.1f×", t.etcdRatio)
		}
		table = append(table, []string{t.step,
			fmt.Sprintf("%.1f× (%s)", t.latencyRatio, verdict(t.latencyRatio, targetLatencyRatio, false)),
			fmt.Sprintf("%s (%s)", etcd, verdict(t.etcdRatio, targetEtcdRatio, true)),
			fmt.Sprintf("%.0f %%", 100*t.ackShare),
			writesByResource(t.writesPer)})
	}
	p.Table([]string{"step", "p50 ratio", "etcd puts ratio", "this system: create answer / p50", "this system: API writes per sandbox"}, table)
}

// writesByResource is "configmaps 1.35, leases 0.70" in resource order.
func writesByResource(m map[string]float64) string {
	var parts []string
	for _, res := range slices.Sorted(maps.Keys(m)) {
		if m[res] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", res, m[res]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
