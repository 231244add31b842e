// Command scale is the scale harness: it runs the project's real binaries
// (sandbox-apiserver behind a real kube-apiserver and etcd, with a
// simulated sandboxd fleet publishing NodeInventory objects), drives them
// through kubectl, client-go and the e2b surface, measures, and writes
// the measurements to DIR/results.json.
//
// Phases (--only picks some; they run in this order):
//
//   - list: list every sandbox in all namespaces through the
//     kube-apiserver at each --levels inventory size, with kubectl (paged
//     and unpaged) and client-go (unpaged and paged).
//   - watch: the delay from a NodeInventory write to --watchers
//     concurrent sandbox watchers receiving the ADDED event.
//   - burst: --burst concurrent creates through the kube-apiserver, then
//     through the e2b surface: ack latencies, time until all are Running,
//     and the kube-apiserver and etcd writes they cost.
//   - fill: the warm-pool fill constant, from one SandboxWarmPool patch
//     to every node holding its share, at each --fill-nodes fleet size
//     (tools/scale/fill).
//   - proxy: what sandbox-envd-proxy adds to a node's guest-port relay,
//     in latency and throughput (tools/scale/proxybench).
//
// It writes DIR/results.json and DIR/report.md with its plots; --render
// re-renders the report from an earlier results.json without running.
//
// It is a benchmark run by hand (go run ./tools/scale, or
// tools/bazel run //tools/scale -- --out=$PWD/scale-report), not a test.
// Everything it starts is stopped on exit, on an error and on SIGINT.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/apiserverenv"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tools/scale/procstat"
	"github.com/cocoonstack/sandbox-operator/tools/scale/proxybench"
)

// phases in the order they run.
var allPhases = []string{"list", "watch", "burst", "fill", "proxy"}

func main() {
	// The proxy phase times its requests from a second process of this
	// binary (tools/scale/proxybench, client.go).
	proxybench.RunClientIfChild()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// flags are the command line.
type flags struct {
	out           string
	nodes         int
	levels        []int
	runs          int
	pageSize      int
	burst         int
	watchers      []int
	watchEvents   int
	watchInterval time.Duration
	idleWindow    time.Duration
	only          []string
	keep          bool
	fillNodes     []int
	fillReplicas  int
	render        string
}

func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	levels, watchers, only, fillNodes := "1000,10000,50000", "1,100", strings.Join(allPhases, ","), "20,1000"
	fs.StringVar(&f.out, "out", "./scale-report", "directory to write results.json (and the servers' logs) to")
	fs.IntVar(&f.nodes, "nodes", 20, "simulated sandboxd nodes in the fleet, and the least number of synthetic nodes a list level spreads its sandboxes over")
	fs.StringVar(&levels, "levels", levels, "comma-separated sandbox counts the list phase measures at")
	fs.IntVar(&f.runs, "runs", 3, "measured runs per list method and level (after one warm-up); the median is reported")
	fs.IntVar(&f.pageSize, "page-size", 500, "limit of the paged client-go list (kubectl pages by 500 by default)")
	fs.IntVar(&f.burst, "burst", 300, "concurrent creates in each burst")
	fs.StringVar(&watchers, "watchers", watchers, "comma-separated numbers of concurrent watchers the watch phase measures with")
	fs.IntVar(&f.watchEvents, "watch-events", 50, "NodeInventory writes per watcher level")
	fs.DurationVar(&f.watchInterval, "watch-interval", 100*time.Millisecond, "spacing of the watch phase's writes")
	fs.DurationVar(&f.idleWindow, "idle-window", 10*time.Second, "idle window measured before the bursts, to subtract the background writes")
	fs.StringVar(&only, "only", only, "comma-separated phases to run: "+strings.Join(allPhases, ", "))
	fs.StringVar(&fillNodes, "fill-nodes", fillNodes, "comma-separated fleet sizes the fill phase measures at")
	fs.IntVar(&f.fillReplicas, "fill-replicas", 50000, "SandboxWarmPool replicas the fill phase scales to")
	fs.StringVar(&f.render, "render", "", "render DIR/report.md from this results.json and exit, running nothing")
	fs.BoolVar(&f.keep, "keep", false, "after the phases, keep the environment running until SIGINT and leave its working directory (logs, kubeconfigs) on disk")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if f.levels, err = intList("--levels", levels); err != nil {
		return nil, err
	}
	if f.watchers, err = intList("--watchers", watchers); err != nil {
		return nil, err
	}
	if f.fillNodes, err = intList("--fill-nodes", fillNodes); err != nil {
		return nil, err
	}
	for _, p := range strings.Split(only, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(allPhases, p) {
			return nil, fmt.Errorf("--only: unknown phase %q (want some of %s)", p, strings.Join(allPhases, ","))
		}
		if !slices.Contains(f.only, p) {
			f.only = append(f.only, p)
		}
	}
	// Run in the fixed order whatever order --only named them in.
	slices.SortFunc(f.only, func(a, b string) int { return slices.Index(allPhases, a) - slices.Index(allPhases, b) })
	switch {
	case len(f.only) == 0:
		return nil, errors.New("--only names no phase")
	case f.out == "":
		return nil, errors.New("--out must not be empty")
	case f.nodes < 1:
		return nil, fmt.Errorf("--nodes must be at least 1, got %d", f.nodes)
	case f.runs < 1:
		return nil, fmt.Errorf("--runs must be at least 1, got %d", f.runs)
	case f.pageSize < 1:
		return nil, fmt.Errorf("--page-size must be at least 1, got %d", f.pageSize)
	case f.burst < 1:
		return nil, fmt.Errorf("--burst must be at least 1, got %d", f.burst)
	case f.watchEvents < 1:
		return nil, fmt.Errorf("--watch-events must be at least 1, got %d", f.watchEvents)
	case f.watchInterval < 0:
		return nil, fmt.Errorf("--watch-interval must not be negative, got %v", f.watchInterval)
	case f.fillReplicas < 1:
		return nil, fmt.Errorf("--fill-replicas must be at least 1, got %d", f.fillReplicas)
	case f.idleWindow < time.Second:
		return nil, fmt.Errorf("--idle-window must be at least 1s, got %v", f.idleWindow)
	}
	return f, nil
}

// intList parses "1,2,3" into positive integers.
func intList(flagName, s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive integer", flagName, p)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s is empty", flagName)
	}
	return out, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "scale: %v\n", err)
		return 2
	}
	if runtime.GOOS != "linux" {
		fmt.Fprintln(stderr, "scale: runs on Linux only (it reads /proc and binds loopback ClusterIPs)")
		return 2
	}
	// Under bazel run the binaries' runfiles locations need a root; the
	// relative --out means the user's directory, not the runfiles tree.
	if err := resolveRunfiles(apiserverenv.BinaryEnv, cluster.APIServerEnv, cluster.KubectlEnv, proxybench.ProxyBinaryEnv); err != nil {
		fmt.Fprintf(stderr, "scale: %v\n", err)
		return 2
	}
	if wd := os.Getenv("BUILD_WORKING_DIRECTORY"); wd != "" && !filepath.IsAbs(f.out) {
		f.out = filepath.Join(wd, f.out)
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		fmt.Fprintf(stderr, "scale: --out: %v\n", err)
		return 1
	}
	if f.render != "" {
		if err := renderFrom(f.render, f.out); err != nil {
			fmt.Fprintf(stderr, "scale: --render: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(f.out, reportName))
		return 0
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// The first signal starts an orderly teardown; a second one kills
		// this process at once (its children die with it: they run with
		// a parent-death signal).
		<-ctx.Done()
		stop()
	}()
	log := func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	res := runPhases(ctx, f, log)
	path := filepath.Join(f.out, "results.json")
	if err := writeJSON(path, res); err != nil {
		res.Errors = append(res.Errors, err.Error())
	} else {
		log("wrote %s", path)
	}
	if err := writeReport(res, f.out); err != nil {
		res.Errors = append(res.Errors, err.Error())
	} else {
		log("wrote %s", filepath.Join(f.out, reportName))
	}
	printSummary(stdout, res)
	if len(res.Errors) > 0 {
		for _, e := range res.Errors {
			fmt.Fprintf(stderr, "scale: FAILED: %s\n", e)
		}
		return 1
	}
	return 0
}

// runPhases brings the environment up, runs the selected phases and tears
// everything down again; failures are in the result's Errors.
func runPhases(ctx context.Context, f *flags, log func(string, ...any)) *Results {
	began := time.Now()
	res := &Results{
		Tool:      "github.com/cocoonstack/sandbox-operator/tools/scale",
		Revision:  buildRevision(),
		StartedAt: began.UTC(),
		Machine:   machineInfo(),
		Config: Config{
			Phases:                 f.only,
			Nodes:                  f.nodes,
			Levels:                 f.levels,
			Runs:                   f.runs,
			PageSize:               f.pageSize,
			MaxEntriesPerInventory: maxEntriesPerInventory,
			Burst:                  f.burst,
			WarmPerPool:            (f.burst+f.nodes-1)/f.nodes + 5,
			Watchers:               f.watchers,
			WatchEvents:            f.watchEvents,
			WatchIntervalSeconds:   f.watchInterval.Seconds(),
			IdleWindowSeconds:      f.idleWindow.Seconds(),
			PublishIntervalSeconds: publishInterval.Seconds(),
			InventoryStaleSeconds:  staleAfter.Seconds(),
		},
	}
	fail := func(err error) { res.Errors = append(res.Errors, err.Error()) }
	defer func() {
		res.FinishedAt = time.Now().UTC()
		res.DurationSeconds = res.FinishedAt.Sub(res.StartedAt).Seconds()
	}()

	log("locating (or building) sandbox-apiserver, kube-apiserver and kubectl; a first build takes minutes")
	t0 := time.Now()
	bins, err := locateBinaries(slices.Contains(f.only, "list"))
	if err != nil {
		fail(err)
		return res
	}
	res.Config.SandboxAPIServerBinary, res.Config.KubeAPIServerBinary, res.Config.KubectlBinary = bins.server, bins.kubeAPIServer, bins.kubectl
	binSeconds := time.Since(t0).Seconds()
	if ctx.Err() != nil {
		fail(context.Cause(ctx))
		return res
	}

	log("starting etcd, kube-apiserver, %d simulated nodes and sandbox-apiserver", f.nodes)
	e, err := startEnv(ctx, envOptions{nodes: f.nodes, warm: res.Config.WarmPerPool, binaries: bins})
	if err != nil {
		fail(fmt.Errorf("start the environment: %w", err))
		return res
	}
	defer func() {
		if err := e.saveLogs(filepath.Join(f.out, "logs")); err != nil {
			log("saving logs: %v", err)
		}
		var closeErr error
		if f.keep {
			closeErr = e.CloseKeepDir()
			log("kept %s", e.dir)
		} else {
			closeErr = e.Close()
		}
		if closeErr != nil {
			fail(fmt.Errorf("tear down: %w", closeErr))
		}
	}()
	setup := &Setup{BinariesSeconds: binSeconds, ClusterSeconds: e.cluster.StartupDuration().Seconds(), TotalSeconds: e.startup.Seconds() + binSeconds}
	if u, err := e.serverUsage(); err == nil {
		setup.ServerRSSBytes = u.RSSBytes
	}
	res.Setup = setup
	res.Config.PeakRSSResetSupported = procstat.ResetPeakRSS(e.server.Pid()) == nil
	res.Config.KubeAPIServerPIDObserved = e.kubeAPIServerPID != 0
	if v, err := e.cluster.Clientset().Discovery().ServerVersion(); err == nil {
		res.Config.KubernetesVersion = v.GitVersion
	}
	log("environment up in %.1fs (server %s, e2b surface %s)", e.startup.Seconds(), e.server.LogPath(), e.e2bURL)

	for _, phase := range f.only {
		if ctx.Err() != nil {
			fail(fmt.Errorf("interrupted before %s", phase))
			break
		}
		log("phase %s", phase)
		var err error
		switch phase {
		case "list":
			res.List, err = runListPhase(ctx, e, res.Config, bins.kubectl, log)
		case "watch":
			res.Watch, err = runWatchPhase(ctx, e, res.Config, log)
		case "burst":
			res.Burst, err = runBurstPhase(ctx, e, res.Config, log)
		case "fill":
			res.Fill, err = runFillPhase(ctx, e, f.fillNodes, f.fillReplicas, log)
		case "proxy":
			res.Proxy, err = runProxyPhase(ctx, e, log)
		}
		if err != nil {
			fail(fmt.Errorf("phase %s: %w", phase, err))
			if aliveErr := e.checkAlive(); aliveErr != nil {
				fail(fmt.Errorf("%w\n%s", aliveErr, e.logTail()))
				break
			}
		}
	}
	if f.keep && ctx.Err() == nil {
		log("--keep: the environment stays up until SIGINT; kubeconfig %s (through the byte counter: %s), e2b %s (key in %s)",
			e.cluster.Kubeconfig(), e.countedKubeconfig, e.e2bURL, filepath.Join(e.dir, "e2b-api-keys"))
		<-ctx.Done()
	}
	return res
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// printSummary prints the headline numbers.
func printSummary(w io.Writer, r *Results) {
	fmt.Fprintf(w, "\nscale: %s, %d cores, %.1f GiB, kernel %s, %s; %s\n",
		r.Machine.CPUModel, r.Machine.Cores, float64(r.Machine.MemoryBytes)/(1<<30), r.Machine.Kernel, r.Machine.GoVersion, r.Config.KubernetesVersion)
	if r.Setup != nil {
		fmt.Fprintf(w, "setup: %.1fs (cluster %.1fs); sandbox-apiserver idle RSS %d MiB\n", r.Setup.TotalSeconds, r.Setup.ClusterSeconds, r.Setup.ServerRSSBytes>>20)
	}
	if r.List != nil {
		fmt.Fprintln(w, "\nlist (median)          sandboxes   wall(s)   bytes-down  pages  server-cpu(s)  rss(MiB)  peak(MiB)")
		for _, lv := range r.List.Levels {
			for _, m := range lv.Methods {
				s := m.Median
				fmt.Fprintf(w, "  %-22s %9d  %8.3f  %11d  %5d  %13.2f  %8d  %9d\n",
					m.Method, lv.Sandboxes, s.WallSeconds, s.BytesDown, s.Pages, s.ServerCPUSeconds, s.ServerRSSBytes>>20, s.ServerPeakRSSBytes>>20)
			}
		}
	}
	if r.Watch != nil {
		fmt.Fprintln(w, "\nwatch      watchers  samples   p50(ms)   p95(ms)   p99(ms)   max(ms)  missed")
		for _, lv := range r.Watch.Levels {
			fmt.Fprintf(w, "  %15d  %7d  %8.1f  %8.1f  %8.1f  %8.1f  %6d\n",
				lv.Watchers, lv.Latency.Count, lv.Latency.P50*1e3, lv.Latency.P95*1e3, lv.Latency.P99*1e3, lv.Latency.Max*1e3, lv.Missed)
		}
	}
	if r.Burst != nil {
		fmt.Fprintf(w, "\nburst of %d (idle: %.0f API writes, %.0f etcd puts in %.1fs)\n", r.Burst.Size, r.Burst.Idle.APIWrites, r.Burst.Idle.EtcdPuts, r.Burst.Idle.Seconds)
		for _, b := range []*BurstRun{r.Burst.Kube, r.Burst.E2B} {
			if b == nil {
				continue
			}
			fmt.Fprintf(w, "  %-4s created %d failed %d; ack p50 %.0fms p99 %.0fms max %.0fms; all Running %.2fs; net API writes/claim %.2f, etcd puts/claim %.2f\n",
				b.Surface, b.Created, b.Failed, b.Ack.P50*1e3, b.Ack.P99*1e3, b.Ack.Max*1e3, b.AllRunningSeconds,
				b.Writes.NetPerClaim.APIWrites, b.Writes.NetPerClaim.EtcdPuts)
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "\nERROR: %s\n", firstLine(e))
	}
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
