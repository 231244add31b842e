package prometheus

import (
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

// Server is a running Prometheus.
type Server struct {
	// URL is the base of its HTTP API (http://127.0.0.1:<port>).
	URL  string
	proc *testbin.Process
}

// Config is what the server scrapes and evaluates. Every job is scraped,
// and every rule evaluated, once a second.
type Config struct {
	// Jobs are static targets.
	Jobs []Job
	// ScrapeConfigs is more of the scrape_configs list, as YAML list
	// items indented by two spaces (service discovery jobs).
	ScrapeConfigs string
	// RuleFiles are paths of Prometheus rule files.
	RuleFiles []string
}

// Job is one static target: its job name and metrics URL (http or https).
// Bearer, when set, is sent as the scrape's Authorization (sandboxd's root
// token, a Kubernetes user's token); CAFile, when set, verifies an https
// target's certificate, and Insecure skips that (a test server whose
// certificate names a Service, not the loopback address).
type Job struct {
	Name, MetricsURL, Bearer, CAFile string
	Insecure                         bool
}

// configTemplate is the server's configuration around the jobs and rules.
const configTemplate = `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
%s
scrape_configs:
%s%s`

// Start runs Prometheus over cfg, with its storage and configuration in
// dir, and returns once its API answers; the server stops when the test
// ends. It binds a port of its own choosing (127.0.0.1:0), found in /proc
// rather than picked by the test, so no port is handed on after a close.
func Start(t testing.TB, dir string, cfg Config) *Server {
	t.Helper()
	binary, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not installed: the build's root has Debian's prometheus package (tools/build/provision.sh); under go test install it (apt-get install prometheus): %v", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var rules, jobs strings.Builder
	for _, r := range cfg.RuleFiles {
		fmt.Fprintf(&rules, "  - %q\n", r)
	}
	for _, j := range cfg.Jobs {
		u, err := url.Parse(j.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&jobs, "  - job_name: %q\n    scheme: %s\n    metrics_path: %q\n    static_configs:\n      - targets: [%q]\n", j.Name, u.Scheme, u.Path, u.Host)
		if j.CAFile != "" || j.Insecure {
			fmt.Fprintf(&jobs, "    tls_config:\n      insecure_skip_verify: %t\n", j.Insecure)
			if j.CAFile != "" {
				fmt.Fprintf(&jobs, "      ca_file: %q\n", j.CAFile)
			}
		}
		if j.Bearer != "" {
			tokenFile := filepath.Join(dir, j.Name+".token")
			if err := os.WriteFile(tokenFile, []byte(j.Bearer), 0o600); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&jobs, "    authorization:\n      credentials_file: %q\n", tokenFile)
		}
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, configTemplate, rules.String(), jobs.String(), cfg.ScrapeConfigs), 0o600); err != nil {
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
	s := &Server{URL: "http://" + addr, proc: p}
	poll.UntilNil(t, "prometheus to be ready", func() error {
		resp, err := http.Get(s.URL + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready answered %d", resp.StatusCode)
		}
		return nil
	})
	return s
}

// LogTail is the end of the server's log.
func (s *Server) LogTail(lines int) string { return s.proc.LogTail(lines) }
