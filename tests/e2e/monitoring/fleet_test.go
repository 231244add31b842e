package monitoring_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const (
	// imageBase is the pool behind the alias "base" on every node.
	imageBase = "e2b-base:latest"
	// warmPerNode is each node's warm VMs of the base image per lane.
	warmPerNode = 2
	domain      = "sandbox.monitoring.test"
	// meshRefresh is how often sandbox-e2b reads its nodes: a node that
	// stops answering is silent within about that.
	meshRefresh = 300 * time.Millisecond
	stopGrace   = 30 * time.Second
)

// simNode is one sandboxd-sim process serving one node at an address the
// test owns: the test keeps a copy of the node's listening socket, so
// the node can be killed and started again at the same address without
// the port ever being free in between.
type simNode struct {
	t      *testing.T
	binary string
	dir    string
	name   string
	args   []string
	socket *os.File // the test's copy of the node's listening socket
	addr   string
	proc   *testbin.Process
}

// startSimNode binds a loopback port and runs one sandboxd-sim node on it.
func startSimNode(t *testing.T, binary, dir, name string, args ...string) *simNode {
	t.Helper()
	ln, addr := harness.Listen(t)
	socket, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = socket.Close() })
	_, port, _ := net.SplitHostPort(addr)
	n := &simNode{t: t, binary: binary, dir: dir, name: name, socket: socket, addr: addr,
		args: append([]string{"--nodes=1", "--listen-host=127.0.0.1", "--base-port=" + port, "--name-prefix=" + name + "-"}, args...)}
	n.start(ln)
	return n
}

// start runs the process on ln, a listener of the node's socket.
func (n *simNode) start(ln *net.TCPListener) {
	n.t.Helper()
	p, err := testbin.StartProcess("sandboxd-sim-"+n.name, n.binary, filepath.Join(n.dir, fmt.Sprintf("sandboxd-sim-%s-%d.log", n.name, time.Now().UnixNano())), n.args, nil, ln)
	if err != nil {
		n.t.Fatal(err)
	}
	n.proc = p
	n.t.Cleanup(func() {
		if n.t.Failed() {
			n.t.Logf("%s", p.LogTail(40))
		}
		if p.ExitErr() == nil {
			if err := p.Stop(stopGrace); err != nil {
				n.t.Errorf("stop %s: %v", n.name, err)
			}
		}
	})
}

// kill ends the node's process as a crash would. The test's copy of the
// socket keeps the port bound: connections to it now wait unanswered, as
// to a node that hangs.
func (n *simNode) kill() {
	n.t.Helper()
	if err := n.proc.Kill(); err != nil {
		n.t.Fatal(err)
	}
	<-n.proc.Done()
}

// restart starts the node again at its address, on the socket kept.
func (n *simNode) restart() {
	n.t.Helper()
	ln, err := net.FileListener(n.socket)
	if err != nil {
		n.t.Fatal(err)
	}
	n.start(ln.(*net.TCPListener))
}

// e2bClient drives the e2b REST API and the data plane over plain HTTP
// with one API key.
type e2bClient struct {
	api, dataPlane, key string
}

// call sends a request with a JSON body (nil for none) and returns the
// status and body.
func (c *e2bClient) call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.api+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-API-KEY", c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// must is call that fails the test unless the answer is want, decoding
// the body into v when v is not nil.
func (c *e2bClient) must(t *testing.T, ctx context.Context, method, path string, body any, want int, v any) {
	t.Helper()
	status, out, err := c.call(ctx, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if status != want {
		t.Fatalf("%s %s answered %d, want %d: %s", method, path, status, want, out)
	}
	if v != nil {
		if err := json.Unmarshal(out, v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, out)
		}
	}
}

// sandboxRef is a created sandbox: its id and envd access token.
type sandboxRef struct {
	ID          string `json:"sandboxID"`
	AccessToken string `json:"envdAccessToken"`
}

// envdHealth asks a sandbox's envd for /health through the data plane,
// with the e2b SDK's routing headers.
func (c *e2bClient) envdHealth(ctx context.Context, sb sandboxRef) (int, error) {
	return c.envdPort(ctx, sb, 49983)
}

// envdPort sends GET /health to a guest port of a sandbox through the data
// plane, with the e2b SDK's routing headers and the access token.
func (c *e2bClient) envdPort(ctx context.Context, sb sandboxRef, port int) (int, error) {
	id := sb.ID
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.dataPlane+"/health", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("E2b-Sandbox-Id", id)
	req.Header.Set("E2b-Sandbox-Port", strconv.Itoa(port))
	req.Header.Set("X-Access-Token", sb.AccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// waitReady waits until the template build reaches "ready".
func (c *e2bClient) waitBuild(t *testing.T, ctx context.Context, templateID, buildID string) {
	t.Helper()
	poll.Until(t, "the template build to be ready", func() bool {
		var st struct {
			Status string `json:"status"`
		}
		c.must(t, ctx, http.MethodGet, "/templates/"+templateID+"/builds/"+buildID+"/status", nil, http.StatusOK, &st)
		if st.Status == "error" {
			t.Fatalf("the template build failed")
		}
		return st.Status == "ready"
	})
}
