package main

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/tools/scale/stats"

	"github.com/cocoonstack/sandbox-operator/tools/scale/fill"
	"github.com/cocoonstack/sandbox-operator/tools/scale/procstat"
	"github.com/cocoonstack/sandbox-operator/tools/scale/proxybench"
)

// Results is what a run writes to results.json. Durations are float
// seconds (fields ending in Seconds), sizes bytes; a phase that was not
// selected with --only is absent.
type Results struct {
	// Tool names the program and the revision it was built from, when the
	// build recorded one.
	Tool            string    `json:"tool"`
	Revision        string    `json:"revision,omitempty"`
	StartedAt       time.Time `json:"startedAt"`
	FinishedAt      time.Time `json:"finishedAt"`
	DurationSeconds float64   `json:"durationSeconds"`
	Machine         Machine   `json:"machine"`
	Config          Config    `json:"config"`
	Setup           *Setup    `json:"setup,omitempty"`

	List  *ListResults  `json:"list,omitempty"`
	Watch *WatchResults `json:"watch,omitempty"`
	Burst *BurstResults `json:"burst,omitempty"`
	// Fill is one measurement per --fill-nodes size.
	Fill  []fill.Result      `json:"fill,omitempty"`
	Proxy *proxybench.Result `json:"proxy,omitempty"`

	// Errors are the failures that ended or cut short the run; a complete
	// run has none.
	Errors []string `json:"errors,omitempty"`
}

// Machine describes the host the run measured.
type Machine struct {
	CPUModel    string `json:"cpuModel"`
	Cores       int    `json:"cores"`
	MemoryBytes uint64 `json:"memoryBytes"`
	Kernel      string `json:"kernel"`
	GoVersion   string `json:"goVersion"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	// ClockTicks is the kernel's USER_HZ, the unit of the CPU times read
	// from /proc (their resolution is 1/ClockTicks seconds).
	ClockTicks int64 `json:"clockTicks"`
}

// Config is the run's configuration, as the flags set it.
type Config struct {
	Phases                   []string `json:"phases"`
	Nodes                    int      `json:"nodes"`
	Levels                   []int    `json:"levels"`
	Runs                     int      `json:"runs"`
	PageSize                 int      `json:"pageSize"`
	MaxEntriesPerInventory   int      `json:"maxEntriesPerInventory"`
	Burst                    int      `json:"burst"`
	WarmPerPool              int      `json:"warmPerPool"`
	Watchers                 []int    `json:"watchers"`
	WatchEvents              int      `json:"watchEvents"`
	WatchIntervalSeconds     float64  `json:"watchIntervalSeconds"`
	IdleWindowSeconds        float64  `json:"idleWindowSeconds"`
	PublishIntervalSeconds   float64  `json:"publishIntervalSeconds"`
	InventoryStaleSeconds    float64  `json:"inventoryStaleAfterSeconds"`
	KubernetesVersion        string   `json:"kubernetesVersion,omitempty"`
	SandboxAPIServerBinary   string   `json:"sandboxAPIServerBinary,omitempty"`
	KubeAPIServerBinary      string   `json:"kubeAPIServerBinary,omitempty"`
	KubectlBinary            string   `json:"kubectlBinary,omitempty"`
	PeakRSSResetSupported    bool     `json:"peakRSSResetSupported"`
	KubeAPIServerPIDObserved bool     `json:"kubeAPIServerPIDObserved"`
}

// Setup is how long bringing the environment up took.
type Setup struct {
	BinariesSeconds float64 `json:"binariesSeconds"`
	ClusterSeconds  float64 `json:"clusterSeconds"`
	TotalSeconds    float64 `json:"totalSeconds"`
	// ServerRSSBytes is the sandbox-apiserver's resident set once ready,
	// with only the simulated fleet's inventory loaded.
	ServerRSSBytes uint64 `json:"serverRSSBytes"`
}

// Distribution summarizes a set of samples in seconds. Percentiles are
// nearest-rank: the smallest sample at or above the given fraction of the
// samples, so every reported value was observed.
type Distribution struct {
	Count int     `json:"count"`
	Min   float64 `json:"min"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

func median(samples []float64) float64 {
	s := slices.Clone(samples)
	slices.Sort(s)
	return stats.Percentile(s, 50)
}

// summarize returns the distribution of samples; samples is not modified.
func summarize(samples []float64) Distribution {
	if len(samples) == 0 {
		return Distribution{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return Distribution{
		Count: len(s),
		Min:   s[0],
		Mean:  sum / float64(len(s)),
		P50:   stats.Percentile(s, 50),
		P95:   stats.Percentile(s, 95),
		P99:   stats.Percentile(s, 99),
		Max:   s[len(s)-1],
	}
}

// machineInfo reads the host's description; what cannot be read stays
// empty.
func machineInfo() Machine {
	m := Machine{
		Cores:      runtime.NumCPU(),
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		ClockTicks: procstat.ClockTicks(),
	}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if m.CPUModel == "" {
		// arm64 kernels name no model; the implementer is what there is.
		m.CPUModel = procField("/proc/cpuinfo", "CPU implementer")
	}
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		if v, err := strconv.ParseUint(strings.Fields(kb)[0], 10, 64); err == nil {
			m.MemoryBytes = v * 1024
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// procField returns the value of the first "key: value" (or "key<TAB>:
// value") line of a /proc file whose key is key.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// buildRevision is the VCS revision the binary was built from, when the
// Go build stamped one (go build in a checkout does; go run does not).
func buildRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}

// seconds converts a duration to float seconds.
func seconds(d time.Duration) float64 { return d.Seconds() }
