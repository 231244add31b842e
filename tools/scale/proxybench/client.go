package proxybench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// The client runs in a process of its own, the benchmark's binary started
// again with ClientEnv set. A real client never shares a process with the
// node it reaches; one that did (as the first version of this benchmark)
// gets the direct relay without a single wake-up across processes, while
// every request through the proxy pays four. On a small VM those wake-ups
// cost more than the proxy's own work, so the comparison measured the
// process layout, not the proxy.

// ClientEnv, set to "1" in a process's environment, makes RunClientIfChild
// run the benchmark's client instead of returning.
const ClientEnv = "SCALE_PROXYBENCH_CLIENT"

// The paths the client times small requests on, in clientPlan order.
const (
	pathDirect = iota
	pathProxied
	pathReusedRelay
	pathFloor
	numPaths
)

// clientPlan is what the client process is told to do, on its stdin.
type clientPlan struct {
	Requests       int           `json:"requests"`
	WarmupRequests int           `json:"warmup_requests"`
	BulkBytes      int64         `json:"bulk_bytes"`
	BulkRepeats    int           `json:"bulk_repeats"`
	BulkTimeout    time.Duration `json:"bulk_timeout"`

	// NodeAddr, SandboxID and ClaimToken open a relay to the guest
	// (the direct paths).
	NodeAddr   string `json:"node_addr"`
	SandboxID  string `json:"sandbox_id"`
	ClaimToken string `json:"claim_token"`
	// ProxyAddr is sandbox-envd-proxy's listener; ProxyHost and
	// AccessToken are what an e2b client sends it.
	ProxyAddr   string `json:"proxy_addr"`
	ProxyHost   string `json:"proxy_host"`
	AccessToken string `json:"access_token"`
	// FloorAddr serves the guest's own handler straight from the
	// benchmark's process, on a kept connection.
	FloorAddr string `json:"floor_addr"`
}

// clientReport is what the client measured, on its stdout.
type clientReport struct {
	Small  [numPaths][]time.Duration `json:"small"`
	Reused [numPaths]int             `json:"reused"`
	// Download and Upload are indexed by pathDirect and pathProxied.
	Download [2][]time.Duration `json:"download"`
	Upload   [2][]time.Duration `json:"upload"`
}

// RunClientIfChild runs the benchmark's client and exits when ClientEnv
// is set, and returns at once otherwise. A binary that calls Run must call
// it first thing in main (or TestMain).
func RunClientIfChild() {
	if os.Getenv(ClientEnv) != "1" {
		return
	}
	if err := runClient(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "proxybench client: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runClient(in io.Reader, out io.Writer) error {
	var plan clientPlan
	if err := json.NewDecoder(io.LimitReader(in, 1<<20)).Decode(&plan); err != nil {
		return fmt.Errorf("reading the plan: %w", err)
	}
	paths, err := plan.targets()
	if err != nil {
		return err
	}
	defer func() {
		for _, t := range paths {
			t.transport.CloseIdleConnections()
		}
	}()
	rep, err := measureClient(context.Background(), plan, paths)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(rep)
}

// targets builds the client's paths, in pathDirect… order.
func (plan clientPlan) targets() ([numPaths]*target, error) {
	var paths [numPaths]*target
	relay, err := sandboxd.New(plan.NodeAddr, sandboxd.WithToken(plan.ClaimToken))
	if err != nil {
		return paths, fmt.Errorf("sandboxd client: %w", err)
	}
	dialRelay := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return relay.DialPort(ctx, plan.SandboxID, guestPort)
	}
	paths[pathDirect] = newTarget("http://guest", "guest", "",
		&http.Transport{Proxy: nil, DialContext: dialRelay, DisableKeepAlives: true, DisableCompression: true})
	paths[pathProxied] = newTarget("http://"+plan.ProxyAddr, plan.ProxyHost, plan.AccessToken,
		&http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, DisableCompression: true})
	paths[pathReusedRelay] = newTarget("http://guest", "guest", "",
		&http.Transport{Proxy: nil, DialContext: dialRelay, MaxIdleConnsPerHost: 1, DisableCompression: true})
	paths[pathFloor] = newTarget("http://"+plan.FloorAddr, "guest", "",
		&http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, DisableCompression: true})
	return paths, nil
}

// measureClient times the small requests, interleaved across the paths,
// then the bulk transfers of the direct and proxied paths.
func measureClient(ctx context.Context, plan clientPlan, paths [numPaths]*target) (clientReport, error) {
	var rep clientReport
	for range plan.WarmupRequests {
		for _, t := range paths {
			if _, err := t.small(ctx); err != nil {
				return rep, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	// Interleaved, rotating which path goes first, so a burst of load from
	// elsewhere on the machine hits every path alike.
	for i := range plan.Requests {
		for k := range numPaths {
			j := (i + k) % numPaths
			s, err := paths[j].small(ctx)
			if err != nil {
				return rep, fmt.Errorf("small request %d: %w", i, err)
			}
			rep.Small[j] = append(rep.Small[j], s.took)
			if s.reused {
				rep.Reused[j]++
			}
		}
	}
	for _, dir := range []struct {
		name string
		run  func(*target, context.Context, int64) (time.Duration, error)
		into *[2][]time.Duration
	}{
		{"download", (*target).download, &rep.Download},
		{"upload", (*target).upload, &rep.Upload},
	} {
		for i := range plan.BulkRepeats {
			order := []int{pathDirect, pathProxied}
			if i%2 == 1 { // alternate which path goes first
				order = []int{pathProxied, pathDirect}
			}
			for _, j := range order {
				bulkCtx, cancel := context.WithTimeout(ctx, plan.BulkTimeout)
				d, err := dir.run(paths[j], bulkCtx, plan.BulkBytes)
				cancel()
				if err != nil {
					return rep, fmt.Errorf("bulk %s %d: %w", dir.name, i, err)
				}
				dir.into[j] = append(dir.into[j], d)
			}
		}
	}
	return rep, nil
}

// runClientProcess starts this binary again as the client, hands it plan
// and returns its report. The child dies with this process.
func runClientProcess(ctx context.Context, plan clientPlan, stderr io.Writer) (clientReport, error) {
	var rep clientReport
	self, err := os.Executable()
	if err != nil {
		return rep, fmt.Errorf("locating this binary to start the client: %w", err)
	}
	in, err := json.Marshal(plan)
	if err != nil {
		return rep, fmt.Errorf("encoding the client's plan: %w", err)
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), ClientEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return rep, fmt.Errorf("the client process: %w", err)
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return rep, fmt.Errorf("reading the client's report: %w", err)
	}
	for j, samples := range rep.Small {
		if len(samples) != plan.Requests {
			return rep, fmt.Errorf("the client's report has %d samples of path %d, want %d", len(samples), j, plan.Requests)
		}
	}
	return rep, nil
}
