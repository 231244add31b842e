// Command sidebyside measures this system and the Pod path users would pick
// instead (kubernetes-sigs/agent-sandbox's controller, built from the
// module version in go.mod: a Pod per sandbox, a SandboxClaim adopting a
// warm one) through the same workload, on the same real node cluster
// (tests/cluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, a kubelet on containerd, kube-proxy), one after the
// other: the two cannot share a cluster, since both serve
// sandboxes.agents.x-k8s.io. Each path gets a fresh cluster.
//
// The workload, the same on both: a SandboxTemplate of the build's pause
// image and a SandboxWarmPool of --pool; --sequential claims one at a time;
// bursts (--bursts) with the pool full before each and its refill timed
// after; --lists lists of every sandbox; a delete of the last burst. For
// each step: latency percentiles, the kube-apiserver's writes and etcd's
// puts per sandbox, and the CPU every process spent.
//
//	tools/bazel run //tools/sidebyside -- --out=$PWD/docs/results/sidebyside
//
// It writes DIR/results.json and DIR/report.md with its plots; --render
// re-renders the report from an earlier results.json. It is a benchmark
// run by hand, not a test: //tests/e2e/podpath keeps the Pod path's setup
// from rotting. It must run as root (it makes network and mount
// namespaces for the node), and stops everything it started on exit.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/podpath"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// config is the command line.
type config struct {
	out        string
	render     bool
	pool       int
	sequential int
	bursts     []int
	lists      int
	paths      []string
}

// binaries are what the run starts besides the cluster's own programs.
type binaries struct {
	controller, server, pauseTar string
}

// Results are a run: when, where, how, and each path's phases.
type Results struct {
	Date    string         `json:"date"`
	Machine string         `json:"machine"`
	Config  map[string]any `json:"config"`
	Paths   []*PathResults `json:"paths"`
}

func main() { os.Exit(cluster.RunIsolated(run)) }

func run() int {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		return 2
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	if cfg.render {
		res, err := readResults(filepath.Join(cfg.out, "results.json"))
		if err == nil {
			err = writeReport(cfg.out, res)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "sidebyside:", err)
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := measure(ctx, cfg, logf); err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		return 1
	}
	return 0
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("sidebyside", flag.ContinueOnError)
	var cfg config
	var bursts, paths string
	fs.StringVar(&cfg.out, "out", "", "the directory for results.json, report.md and its plots (required)")
	fs.BoolVar(&cfg.render, "render", false, "re-render the report from --out's results.json without running")
	fs.IntVar(&cfg.pool, "pool", 100, "the SandboxWarmPool's replicas; at least the largest burst")
	fs.IntVar(&cfg.sequential, "sequential", 20, "claims made one at a time")
	fs.StringVar(&bursts, "bursts", "10,50,100", "burst sizes, comma-separated, each at most --pool")
	fs.IntVar(&cfg.lists, "lists", 10, "lists of every sandbox")
	fs.StringVar(&paths, "paths", "pod,operator", "the paths to run, in order: pod (the upstream controller), operator (this system)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if cfg.out == "" {
		return cfg, errors.New("--out is required")
	}
	if !filepath.IsAbs(cfg.out) {
		// bazel run starts in the runfiles: a relative path would land there.
		return cfg, fmt.Errorf("--out %q must be absolute", cfg.out)
	}
	for _, b := range strings.Split(bursts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(b))
		if err != nil || n <= 0 || n > cfg.pool {
			return cfg, fmt.Errorf("--bursts: %q is not a size from 1 to --pool (%d)", b, cfg.pool)
		}
		cfg.bursts = append(cfg.bursts, n)
	}
	for _, p := range strings.Split(paths, ",") {
		if p != "pod" && p != "operator" {
			return cfg, fmt.Errorf("--paths: unknown path %q (pod, operator)", p)
		}
		cfg.paths = append(cfg.paths, p)
	}
	if cfg.pool < 1 || cfg.sequential < 1 || cfg.lists < 1 {
		return cfg, errors.New("--pool, --sequential and --lists must be at least 1")
	}
	return cfg, nil
}

// locate finds the programs in the runfiles (bazel run sets them).
func locate() (binaries, error) {
	var b binaries
	for env, dst := range map[string]*string{
		"AGENT_SANDBOX_CONTROLLER": &b.controller,
		"SANDBOX_APISERVER":        &b.server,
		"PAUSE_IMAGE":              &b.pauseTar,
	} {
		p, err := testbin.Runfile(env)
		if err != nil {
			return b, err
		}
		if p == "" {
			return b, fmt.Errorf("%s is not set: run it with tools/bazel run //tools/sidebyside, which builds what it starts", env)
		}
		*dst = p
	}
	return b, nil
}

func measure(ctx context.Context, cfg config, logf func(string, ...any)) error {
	b, err := locate()
	if err != nil {
		return err
	}
	res := &Results{
		Date:    time.Now().UTC().Format("2006-01-02"),
		Machine: machine(),
		Config: map[string]any{
			"pool": cfg.pool, "sequential": cfg.sequential, "bursts": cfg.bursts, "lists": cfg.lists,
			"operatorNodes": operatorNodes,
		},
	}
	for _, which := range cfg.paths {
		pr, err := runPath(ctx, which, cfg, b, logf)
		if err != nil {
			return fmt.Errorf("%s path: %w", which, err)
		}
		res.Paths = append(res.Paths, pr)
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.out, "results.json"), raw, 0o644); err != nil {
		return err
	}
	return writeReport(cfg.out, res)
}

// runPath brings up a fresh node cluster, the path and its pool, runs the
// workload and tears it all down.
func runPath(ctx context.Context, which string, cfg config, b binaries, logf func(string, ...any)) (_ *PathResults, err error) {
	dir, err := os.MkdirTemp("", "sidebyside-"+which+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Minute)
	defer cancel()
	image := cluster.NodeImage{Tar: b.pauseTar, Name: "ghcr.io/cocoonstack/pause"}
	if poolImage, err = cluster.ImageRef(image); err != nil {
		return nil, err
	}
	logf("%s: starting a node cluster", which)
	n, err := cluster.StartNodeCluster(ctx, filepath.Join(dir, "cluster"), cluster.NodeOptions{SandboxImage: image})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, n.Stop()) }()
	var p path
	switch which {
	case "pod":
		p, err = startPodPath(ctx, n, b, dir)
	case "operator":
		p, err = startOperatorPath(ctx, n, b, dir)
	}
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, p.close()) }()
	logf("%s: filling a pool of %d", p.name(), cfg.pool)
	if err := podpath.Pool(ctx, n, namespace, poolName, poolImage, cfg.pool); err != nil {
		return nil, err
	}
	t, err := startTracker(ctx, n.Dynamic().Resource(p.requests()).Namespace(namespace))
	if err != nil {
		return nil, err
	}
	defer t.stop()
	w := &workload{n: n, p: p, cfg: cfg, tracker: t, log: logf}
	return w.run(ctx)
}

// machine names the machine the run measured.
func machine() string {
	host, _ := os.Hostname()
	model := "unknown CPU"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s: %d CPUs (%s), %s/%s", host, runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH)
}

func readResults(path string) (*Results, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, pr := range r.Paths {
		for i := range pr.Phases {
			pr.Phases[i].summarize()
		}
	}
	return &r, nil
}
