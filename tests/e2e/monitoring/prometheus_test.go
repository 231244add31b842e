package monitoring_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// prometheus is a real Prometheus server (Debian's package, which the
// build's root installs) scraping the targets a test gives it every
// second and evaluating rule files as often.
type prometheus struct {
	url  string
	proc *testbin.Process
}

// promConfig is the scrape configuration: one job per target, each a
// metrics URL.
const promConfig = `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
%s
scrape_configs:
%s`

// scrapeJob is one static target: its job name and metrics URL (http or
// https). bearer, when set, is sent as the scrape's Authorization
// (sandboxd's root token, a Kubernetes user's token); caFile, when set,
// verifies an https target's certificate, and insecure skips that (a test
// server whose certificate names a Service, not the loopback address).
type scrapeJob struct {
	name, metricsURL, bearer, caFile string
	insecure                         bool
}

// startPrometheus runs Prometheus over jobs and rules (rule file paths),
// with its storage in dir, and returns once its API answers. Prometheus
// binds a port of its own choosing (127.0.0.1:0), found in /proc rather
// than picked by the test, so no port is ever handed on after a close.
func startPrometheus(t *testing.T, dir string, jobs []scrapeJob, rules []string) *prometheus {
	t.Helper()
	binary, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not installed: the build's root has Debian's prometheus package (tools/build/provision.sh); under go test install it (apt-get install prometheus): %v", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var ruleLines, jobLines strings.Builder
	for _, r := range rules {
		fmt.Fprintf(&ruleLines, "  - %q\n", r)
	}
	for _, j := range jobs {
		u, err := url.Parse(j.metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&jobLines, "  - job_name: %q\n    scheme: %s\n    metrics_path: %q\n    static_configs:\n      - targets: [%q]\n", j.name, u.Scheme, u.Path, u.Host)
		if j.caFile != "" || j.insecure {
			fmt.Fprintf(&jobLines, "    tls_config:\n      insecure_skip_verify: %t\n", j.insecure)
			if j.caFile != "" {
				fmt.Fprintf(&jobLines, "      ca_file: %q\n", j.caFile)
			}
		}
		if j.bearer != "" {
			tokenFile := filepath.Join(dir, j.name+".token")
			if err := os.WriteFile(tokenFile, []byte(j.bearer), 0o600); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&jobLines, "    authorization:\n      credentials_file: %q\n", tokenFile)
		}
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, promConfig, ruleLines.String(), jobLines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := testbin.StartProcess("prometheus", binary, filepath.Join(dir, "prometheus.log"), []string{
		"--config.file=" + config,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:0",
		"--log.level=info",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", p.LogTail(40))
		}
		if err := p.Stop(30 * time.Second); err != nil {
			t.Errorf("stop prometheus: %v", err)
		}
	})
	var addr string
	poll.UntilNil(t, "prometheus to listen", func() error {
		if err := p.ExitErr(); err != nil {
			return fmt.Errorf("prometheus exited: %w\n%s", err, p.LogTail(20))
		}
		ports, err := listeningPorts(p.Pid())
		if err != nil || len(ports) == 0 {
			return fmt.Errorf("no listening socket yet (%v)", err)
		}
		addr = "127.0.0.1:" + strconv.Itoa(ports[0])
		return nil
	})
	prom := &prometheus{url: "http://" + addr, proc: p}
	poll.UntilNil(t, "prometheus to be ready", func() error {
		resp, err := http.Get(prom.url + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready answered %d", resp.StatusCode)
		}
		return nil
	})
	return prom
}

// listeningPorts reads the TCP ports the process pid listens on from
// /proc: the socket inodes among its descriptors, matched against the
// kernel's table of IPv4 sockets in the LISTEN state.
func listeningPorts(pid int) ([]int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ports []int
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
			continue
		}
		_, portHex, ok := strings.Cut(fields[1], ":")
		if !ok {
			continue
		}
		port, err := strconv.ParseUint(portHex, 16, 16)
		if err == nil {
			ports = append(ports, int(port))
		}
	}
	return ports, sc.Err()
}

// queryResult is an instant query's answer: its vector's samples.
type queryResult struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant PromQL query and returns its samples (a vector or
// a scalar as one sample); an error for a query Prometheus refuses.
func (p *prometheus) query(ctx context.Context, expr string) ([]queryResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, body.Error)
	}
	switch body.Data.ResultType {
	case "vector":
		var out []queryResult
		err := json.Unmarshal(body.Data.Result, &out)
		return out, err
	case "scalar":
		var v [2]any
		err := json.Unmarshal(body.Data.Result, &v)
		return []queryResult{{Value: v}}, err
	default:
		return nil, fmt.Errorf("query %q: a %s result", expr, body.Data.ResultType)
	}
}

// firing reports whether the alert named name fires now.
func (p *prometheus) firing(ctx context.Context, name string) (bool, error) {
	res, err := p.query(ctx, fmt.Sprintf(`ALERTS{alertname=%q,alertstate="firing"}`, name))
	return len(res) > 0, err
}

// expect checks that expr's result is one sample of value want.
func (p *prometheus) expect(ctx context.Context, expr string, want float64) error {
	res, err := p.query(ctx, expr)
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return fmt.Errorf("%s: %d samples, want 1", expr, len(res))
	}
	got, err := strconv.ParseFloat(fmt.Sprint(res[0].Value[1]), 64)
	if err != nil {
		return fmt.Errorf("%s: %w", expr, err)
	}
	if got != want {
		return fmt.Errorf("%s = %v, want %v", expr, got, want)
	}
	return nil
}

// expectFiring checks that the alert named name fires (want) or not.
func (p *prometheus) expectFiring(ctx context.Context, name string, want bool) error {
	on, err := p.firing(ctx, name)
	if err != nil {
		return err
	}
	if on != want {
		return fmt.Errorf("%s firing = %v, want %v", name, on, want)
	}
	return nil
}

// waitScraping waits until Prometheus has scraped its targets, want of
// them, successfully.
func (p *prometheus) waitScraping(t *testing.T, ctx context.Context, want int) {
	t.Helper()
	poll.UntilNil(t, "prometheus to scrape every target", func() error {
		res, err := p.query(ctx, "up")
		if err != nil {
			return err
		}
		if len(res) != want {
			return fmt.Errorf("%d of %d targets scraped", len(res), want)
		}
		for _, r := range res {
			if fmt.Sprint(r.Value[1]) != "1" {
				return fmt.Errorf("target %s is down", r.Metric["job"])
			}
		}
		return nil
	})
}
