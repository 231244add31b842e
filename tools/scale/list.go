package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/cocoonstack/sandbox-operator/tests/apiserverenv"
	"github.com/cocoonstack/sandbox-operator/tools/scale/procstat"
)

// listNamespace holds the list phase's synthetic sandboxes.
const listNamespace = "scale-list"

// ListResults is the list phase: listing every sandbox in all namespaces
// through the kube-apiserver, at each inventory size.
type ListResults struct {
	// PageSize is the limit of the paged client-go list (kubectl's
	// default --chunk-size is the same 500).
	PageSize int          `json:"pageSize"`
	Levels   []ListLevel  `json:"levels"`
	Notes    []string     `json:"notes,omitempty"`
	Methods  []MethodInfo `json:"methods"`
}

// MethodInfo describes one way of listing.
type MethodInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// ListLevel is one inventory size.
type ListLevel struct {
	Sandboxes      int `json:"sandboxes"`
	SyntheticNodes int `json:"syntheticNodes"`
	// PublishSeconds is how long applying the synthetic inventory took,
	// ListedSeconds until the server listed all of it (from the start of
	// publishing).
	PublishSeconds float64 `json:"publishSeconds"`
	ListedSeconds  float64 `json:"listedSeconds"`
	// ServerRSSBytes is the sandbox-apiserver's resident set with the
	// inventory loaded, before any measured list.
	ServerRSSBytes uint64         `json:"serverRSSBytes"`
	Methods        []ListMeasured `json:"methods"`
}

// ListMeasured is one method at one level: every measured run (after one
// unmeasured warm-up) and the per-field median of the runs.
type ListMeasured struct {
	Method string       `json:"method"`
	Median ListSample   `json:"median"`
	Runs   []ListSample `json:"runs"`
}

// ListSample is one list.
type ListSample struct {
	WallSeconds float64 `json:"wallSeconds"`
	// BytesDown is what the kube-apiserver sent the client, on the wire:
	// TLS records and HTTP/2 framing included, and gzip-compressed when
	// the server compresses (the generic apiserver gzips responses over
	// 128 KiB for clients that accept it, as client-go and kubectl do).
	// BytesUp is what the client sent.
	BytesDown int64 `json:"bytesDown"`
	BytesUp   int64 `json:"bytesUp"`
	// ServerCPUSeconds is the CPU time the sandbox-apiserver used during
	// the list, KubeAPIServerCPUSeconds the kube-apiserver's (0 when its
	// pid was not found). Both have a resolution of 1/USER_HZ (10 ms).
	ServerCPUSeconds        float64 `json:"serverCPUSeconds"`
	KubeAPIServerCPUSeconds float64 `json:"kubeAPIServerCPUSeconds"`
	// ServerRSSBytes is the sandbox-apiserver's resident set right after
	// the list; ServerPeakRSSBytes its peak during the list (since start
	// when the peak cannot be reset, see config.peakRSSResetSupported).
	ServerRSSBytes     uint64 `json:"serverRSSBytes"`
	ServerPeakRSSBytes uint64 `json:"serverPeakRSSBytes"`
	// Items is the sandboxes listed (kubectl: the table rows).
	Items int `json:"items"`
	// Pages is the list requests the client made (kubectl's are counted
	// in its warm-up run, from its -v=6 request log).
	Pages int `json:"pages,omitempty"`
	// FirstPageSeconds and FirstPageBytesDown are the first page alone
	// (paged client-go list).
	FirstPageSeconds   float64 `json:"firstPageSeconds,omitempty"`
	FirstPageBytesDown int64   `json:"firstPageBytesDown,omitempty"`
	// ClientCPUSeconds is kubectl's own CPU time.
	ClientCPUSeconds float64 `json:"clientCPUSeconds,omitempty"`
}

// listMethod is one way of listing every sandbox; run fills what it
// knows of the sample (items, pages, first page, client CPU).
type listMethod struct {
	info MethodInfo
	run  func(ctx context.Context, s *ListSample, mark func() (time.Duration, int64), warmup bool) error
}

// listPhase runs the list measurements.
type listPhase struct {
	e        *Env
	kubectl  string
	cacheDir string
	counted  dynamic.NamespaceableResourceInterface
	// countedRaw is a REST client through the byte counter, for the CBOR
	// list (the dynamic client speaks JSON only).
	countedRaw rest.Interface
	pageSize   int
	runs       int
	nodes      int
	log        func(format string, args ...any)
}

func runListPhase(ctx context.Context, e *Env, cfg Config, kubectl string, log func(string, ...any)) (*ListResults, error) {
	counted, err := dynamic.NewForConfig(e.countedConfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(e.countedConfig)
	if err != nil {
		return nil, err
	}
	p := &listPhase{
		e: e, kubectl: kubectl, cacheDir: filepath.Join(e.dir, "kubectl-cache"),
		counted: counted.Resource(apiserverenv.SandboxGVR), countedRaw: cs.Discovery().RESTClient(), pageSize: cfg.PageSize,
		runs: cfg.Runs, nodes: cfg.Nodes, log: log,
	}
	methods := p.methods()
	res := &ListResults{PageSize: p.pageSize}
	for _, m := range methods {
		res.Methods = append(res.Methods, m.info)
	}
	if !cfg.PeakRSSResetSupported {
		res.Notes = append(res.Notes, "the kernel refused to reset VmHWM: serverPeakRSSBytes is the peak since the server started")
	}
	for _, n := range cfg.Levels {
		level, err := p.level(ctx, n, methods)
		if level != nil {
			res.Levels = append(res.Levels, *level)
		}
		if err != nil {
			return res, fmt.Errorf("list at %d sandboxes: %w", n, err)
		}
	}
	return res, nil
}

func (p *listPhase) methods() []listMethod {
	return []listMethod{
		{
			info: MethodInfo{"kubectl-paged", fmt.Sprintf("kubectl get sandboxes -A (default flags: server-side table, pages of %d)", 500)},
			run: func(ctx context.Context, s *ListSample, _ func() (time.Duration, int64), warmup bool) error {
				return p.runKubectl(ctx, s, warmup)
			},
		},
		{
			info: MethodInfo{"kubectl-unpaged", "kubectl get sandboxes -A --chunk-size=0 (server-side table, one request)"},
			run: func(ctx context.Context, s *ListSample, _ func() (time.Duration, int64), warmup bool) error {
				return p.runKubectl(ctx, s, warmup, "--chunk-size=0")
			},
		},
		{
			info: MethodInfo{"client-go-unpaged", "client-go dynamic List in all namespaces, no limit (JSON into unstructured)"},
			run: func(ctx context.Context, s *ListSample, _ func() (time.Duration, int64), _ bool) error {
				list, err := p.counted.List(ctx, metav1.ListOptions{})
				if err != nil {
					return err
				}
				s.Items, s.Pages = len(list.Items), 1
				return nil
			},
		},
		{
			info: MethodInfo{"client-go-unpaged-cbor", "the same list asked for as application/cbor (sandbox-apiserver runs with --feature-gates=CBORServingAndStorage=true) and decoded into typed Sandboxes"},
			run: func(ctx context.Context, s *ListSample, _ func() (time.Duration, int64), _ bool) error {
				body, err := p.countedRaw.Get().AbsPath("/apis", apiserverenv.Group, apiserverenv.Version, "sandboxes").
					SetHeader("Accept", "application/cbor").DoRaw(ctx)
				if err != nil {
					return err
				}
				var list agentsv1beta1.SandboxList
				if _, _, err := cborSerializer.Decode(body, nil, &list); err != nil {
					return fmt.Errorf("decode the CBOR list: %w", err)
				}
				s.Items, s.Pages = len(list.Items), 1
				return nil
			},
		},
		{
			info: MethodInfo{"client-go-paged", fmt.Sprintf("client-go dynamic List in all namespaces with limit=%d, following continue until done", p.pageSize)},
			run: func(ctx context.Context, s *ListSample, mark func() (time.Duration, int64), _ bool) error {
				opts := metav1.ListOptions{Limit: int64(p.pageSize)}
				for {
					list, err := p.counted.List(ctx, opts)
					if err != nil {
						return err
					}
					s.Pages++
					s.Items += len(list.Items)
					if s.Pages == 1 {
						d, down := mark()
						s.FirstPageSeconds, s.FirstPageBytesDown = d.Seconds(), down
					}
					if list.GetContinue() == "" {
						return nil
					}
					opts.Continue = list.GetContinue()
				}
			},
		},
	}
}

// level publishes n synthetic sandboxes, measures every method and
// removes them again.
func (p *listPhase) level(ctx context.Context, n int, methods []listMethod) (_ *ListLevel, err error) {
	e := p.e
	nodes := max(p.nodes, (n+maxEntriesPerInventory-1)/maxEntriesPerInventory)
	lv := &ListLevel{Sandboxes: n, SyntheticNodes: nodes}
	p.log("list: publishing %d synthetic sandboxes on %d nodes", n, nodes)
	began := time.Now()
	inv, err := publishSynthetic(ctx, e.direct, listNamespace, "scale-list-node", n, nodes)
	defer func() {
		if inv == nil {
			return
		}
		// Always remove the inventory, even when the level failed, so the
		// next phase starts clean; a context that already ended gets a
		// fresh one.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		delErr := inv.delete(dctx)
		if delErr == nil && ctx.Err() == nil {
			delErr = e.waitListed(dctx, listNamespace, 0, time.Second, 5*time.Minute)
		}
		if delErr != nil && err == nil {
			err = fmt.Errorf("remove synthetic inventory: %w", delErr)
		}
	}()
	if err != nil {
		return lv, err
	}
	lv.PublishSeconds = time.Since(began).Seconds()
	if err := e.waitListed(ctx, listNamespace, n, time.Second, 10*time.Minute); err != nil {
		return lv, err
	}
	lv.ListedSeconds = time.Since(began).Seconds()
	if u, err := e.serverUsage(); err == nil {
		lv.ServerRSSBytes = u.RSSBytes
	}
	p.log("list: %d sandboxes listed after %.1fs", n, lv.ListedSeconds)

	for _, m := range methods {
		if strings.HasPrefix(m.info.Name, "kubectl") && p.kubectl == "" {
			continue
		}
		lm := ListMeasured{Method: m.info.Name}
		// One warm-up (TLS, discovery and kubectl's discovery cache,
		// connection pools, the server's own first-use costs). kubectl's
		// warm-up also counts its list requests (its pages).
		warm, err := p.measure(ctx, m, true)
		if err != nil {
			return lv, fmt.Errorf("%s (warm-up): %w", m.info.Name, err)
		}
		for range p.runs {
			s, err := p.measure(ctx, m, false)
			if err != nil {
				return lv, fmt.Errorf("%s: %w", m.info.Name, err)
			}
			if s.Pages == 0 {
				s.Pages = warm.Pages
			}
			if s.Items < n {
				return lv, fmt.Errorf("%s listed %d sandboxes, want at least %d", m.info.Name, s.Items, n)
			}
			lm.Runs = append(lm.Runs, s)
		}
		lm.Median = medianListSample(lm.Runs)
		p.log("list: %6d %-18s %7.3fs %10d bytes down, server %.2fs CPU, rss %d MiB (peak %d MiB), %d pages",
			n, m.info.Name, lm.Median.WallSeconds, lm.Median.BytesDown, lm.Median.ServerCPUSeconds,
			lm.Median.ServerRSSBytes>>20, lm.Median.ServerPeakRSSBytes>>20, lm.Median.Pages)
		lv.Methods = append(lv.Methods, lm)
	}
	return lv, nil
}

// measure runs m once with the byte counter, the server's CPU and its peak
// resident set reset around it.
func (p *listPhase) measure(ctx context.Context, m listMethod, warmup bool) (ListSample, error) {
	e := p.e
	runtime.GC()
	if err := e.checkAlive(); err != nil {
		return ListSample{}, err
	}
	_ = procstat.ResetPeakRSS(e.server.Pid())
	before, err := e.serverUsage()
	if err != nil {
		return ListSample{}, err
	}
	kubeBefore := e.kubeAPIServerCPU()
	e.counter.Reset()
	var s ListSample
	start := time.Now()
	mark := func() (time.Duration, int64) {
		_, down := e.counter.Read()
		return time.Since(start), down
	}
	if err := m.run(ctx, &s, mark, warmup); err != nil {
		return s, err
	}
	s.WallSeconds = time.Since(start).Seconds()
	s.BytesUp, s.BytesDown = e.counter.Read()
	after, err := e.serverUsage()
	if err != nil {
		return s, err
	}
	s.ServerCPUSeconds = procstat.CPUDelta(before, after)
	s.KubeAPIServerCPUSeconds = math.Round((e.kubeAPIServerCPU()-kubeBefore)*1000) / 1000
	s.ServerRSSBytes, s.ServerPeakRSSBytes = after.RSSBytes, after.PeakRSSBytes
	return s, nil
}

// runKubectl runs kubectl get sandboxes -A through the counting proxy and
// counts the table's rows. With countPages (the warm-up) it also logs its
// requests (-v=6) and counts the list requests, its pages; measured runs
// keep the default verbosity.
func (p *listPhase) runKubectl(ctx context.Context, s *ListSample, countPages bool, extra ...string) error {
	args := []string{"--kubeconfig=" + p.e.countedKubeconfig, "--cache-dir=" + p.cacheDir}
	if countPages {
		args = append(args, "-v=6")
	}
	args = append(append(args, "get", "sandboxes", "-A"), extra...)
	cmd := exec.CommandContext(ctx, p.kubectl, args...)
	rows := &lineCounter{}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = rows, &stderr
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args[2:], " "), err, lastLines(stderr.String(), 20))
	}
	s.Items = max(rows.lines-1, 0) // the header
	if countPages {
		// client-go at -v=6 logs every answer as
		//   "Response" verb="GET" url="https://.../sandboxes?limit=500" status="200 OK" ...
		for line := range strings.Lines(stderr.String()) {
			if strings.Contains(line, `"Response"`) && strings.Contains(line, `verb="GET"`) &&
				strings.Contains(line, "/apis/"+apiserverenv.Group+"/"+apiserverenv.Version+"/sandboxes") {
				s.Pages++
			}
		}
	}
	if st := cmd.ProcessState; st != nil {
		s.ClientCPUSeconds = (st.UserTime() + st.SystemTime()).Seconds()
	}
	return nil
}

// lineCounter is an io.Writer that counts newlines and keeps nothing.
type lineCounter struct{ lines int }

func (l *lineCounter) Write(b []byte) (int, error) {
	l.lines += bytes.Count(b, []byte{'\n'})
	return len(b), nil
}

var _ io.Writer = (*lineCounter)(nil)

// medianListSample is the median of each field over runs.
func medianListSample(runs []ListSample) ListSample {
	f := func(get func(ListSample) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		return median(v)
	}
	return ListSample{
		WallSeconds:             f(func(s ListSample) float64 { return s.WallSeconds }),
		BytesDown:               int64(f(func(s ListSample) float64 { return float64(s.BytesDown) })),
		BytesUp:                 int64(f(func(s ListSample) float64 { return float64(s.BytesUp) })),
		ServerCPUSeconds:        f(func(s ListSample) float64 { return s.ServerCPUSeconds }),
		KubeAPIServerCPUSeconds: f(func(s ListSample) float64 { return s.KubeAPIServerCPUSeconds }),
		ServerRSSBytes:          uint64(f(func(s ListSample) float64 { return float64(s.ServerRSSBytes) })),
		ServerPeakRSSBytes:      uint64(f(func(s ListSample) float64 { return float64(s.ServerPeakRSSBytes) })),
		Items:                   int(f(func(s ListSample) float64 { return float64(s.Items) })),
		Pages:                   int(f(func(s ListSample) float64 { return float64(s.Pages) })),
		FirstPageSeconds:        f(func(s ListSample) float64 { return s.FirstPageSeconds }),
		FirstPageBytesDown:      int64(f(func(s ListSample) float64 { return float64(s.FirstPageBytesDown) })),
		ClientCPUSeconds:        f(func(s ListSample) float64 { return s.ClientCPUSeconds }),
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// cborSerializer decodes the CBOR list.
var cborSerializer = func() kruntime.Serializer {
	scheme := kruntime.NewScheme()
	if err := agentsv1beta1.AddToScheme(scheme); err != nil {
		panic(fmt.Sprintf("agents.x-k8s.io scheme: %v", err))
	}
	return cbor.NewSerializer(scheme, scheme)
}()
