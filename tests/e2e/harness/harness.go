// Package harness holds what the end-to-end suites' Go harnesses share:
// secrets written as Secret mounts would hold them, loopback listeners
// handed to child servers, and waiting for a child server to answer.
package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// pollEvery is how often WaitHealthy asks.
const pollEvery = 100 * time.Millisecond

// RandomHex is 32 random hex digits: a token, a secret or a key.
func RandomHex(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// WriteFile writes content to dir/name, readable by its owner only, and
// returns the path.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Listen binds a loopback port for a child server and returns the
// listener and its host:port. Put the address in the server's flag and the
// listener in StartProcess's listeners: the bound socket itself is handed
// over (testbin.StartProcess), so the port is never free for another
// process to take between choosing it and the server serving it. A
// listener never handed over is closed when the test ends.
func Listen(t testing.TB) (*net.TCPListener, string) {
	t.Helper()
	ln, err := testbin.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln, ln.Addr().String()
}

// WaitHealthy polls url until it answers 2xx, failing the test when ctx
// ends first or p exits, with the end of p's log.
func WaitHealthy(t testing.TB, ctx context.Context, p *testbin.Process, url string) {
	t.Helper()
	last := "no answer yet"
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		if err := p.ExitErr(); err != nil {
			return false, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode/100 == 2, nil
	})
	if err != nil {
		t.Fatalf("%s: %v\n%s", fmt.Sprintf("%s (%s)", url, last), err, p.LogTail(60))
	}
}
