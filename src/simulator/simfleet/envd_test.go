package simfleet_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb"
	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb/filesystempbconnect"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/envd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

var envdSecret = []byte("fleet-envd-secret")

// accessToken derives the envd access token independently of the guest:
// hex(HMAC-SHA256(secret, claim token)).
func accessToken(claimToken string) string {
	mac := hmac.New(sha256.New, envdSecret)
	mac.Write([]byte(claimToken))
	return hex.EncodeToString(mac.Sum(nil))
}

// envdVia is an HTTP client for one sandbox's envd that reaches it only
// through the node's guest-port relay: every new connection is a fresh
// relay dial authorized by the claim token. token, when set, is sent as
// X-Access-Token on every request.
type envdVia struct {
	hc    *http.Client
	token string
}

func newEnvdVia(t *testing.T, c *sandboxd.Client, cl *sandboxd.Claim, token string) *envdVia {
	t.Helper()
	sc := c.As(cl.Token)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return sc.DialPort(ctx, cl.ID, sandboxd.EnvdPort)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &envdVia{hc: &http.Client{Transport: tokenTransport{base: tr, token: token}}, token: token}
}

type tokenTransport struct {
	base  http.RoundTripper
	token string
	// header carries the token; default X-Access-Token.
	header string
}

func (tt tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tt.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set(cmp.Or(tt.header, "X-Access-Token"), tt.token)
	}
	return tt.base.RoundTrip(r)
}

// The host part is never resolved: the transport dials the relay.
const envdBase = "http://envd.sandbox"

func (e *envdVia) process() processpbconnect.ProcessClient {
	return processpbconnect.NewProcessClient(e.hc, envdBase, connect.WithProtoJSON())
}

func (e *envdVia) filesystem() filesystempbconnect.FilesystemClient {
	return filesystempbconnect.NewFilesystemClient(e.hc, envdBase, connect.WithProtoJSON())
}

func (e *envdVia) do(t *testing.T, method, path string, q url.Values, contentType string, body io.Reader) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, envdBase+path+"?"+q.Encode(), body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// upload writes content to the guest path dest as the SDK does: a
// multipart form whose file part names the destination.
func (e *envdVia) upload(t *testing.T, dest, content string) (int, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	w, err := mw.CreateFormFile("file", dest)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(w, content)
	_ = mw.Close()
	return e.do(t, http.MethodPost, "/files", url.Values{"path": {dest}}, mw.FormDataContentType(), &buf)
}

// runCommand runs cmd through bash and returns its stdout, exit code and
// pid.
func runCommand(t *testing.T, pc processpbconnect.ProcessClient, cmd string) (string, int32, uint32, error) {
	t.Helper()
	s, err := pc.Start(ctxT(t), connect.NewRequest(&processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", cmd}},
	}))
	if err != nil {
		return "", 0, 0, err
	}
	defer s.Close()
	var stdout bytes.Buffer
	var pid uint32
	exit := int32(-2)
	for s.Receive() {
		ev := s.Msg().GetEvent()
		switch {
		case ev.GetStart() != nil:
			pid = ev.GetStart().GetPid()
		case ev.GetData() != nil:
			stdout.Write(ev.GetData().GetStdout())
		case ev.GetEnd() != nil:
			exit = ev.GetEnd().GetExitCode()
		}
	}
	return stdout.String(), exit, pid, s.Err()
}

func startEnvdFleet(t *testing.T, envd *simfleet.EnvdConfig) (*sandboxd.Client, *sandboxd.Claim) {
	t.Helper()
	f := startFleet(t, simfleet.Config{Envd: envd, EchoPorts: []int{}})
	root := clientFor(t, f.Node(0), rootToken)
	cl, err := root.Claim(ctxT(t), sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "default/envd"})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return root, cl
}

func TestEnvdThroughTheRelay(t *testing.T) {
	root, cl := startEnvdFleet(t, &simfleet.EnvdConfig{Secret: envdSecret})
	ctx := ctxT(t)
	e := newEnvdVia(t, root, cl, accessToken(cl.Token))

	out, exit, _, err := runCommand(t, e.process(), "echo hello")
	if err != nil || out != "hello\n" || exit != 0 {
		t.Fatalf("echo hello: stdout %q exit %d err %v", out, exit, err)
	}

	status, body := e.upload(t, "/home/user/hello.txt", "hello file")
	var written []struct{ Path, Name, Type string }
	if status != http.StatusOK || json.Unmarshal(body, &written) != nil || len(written) != 1 || written[0].Path != "/home/user/hello.txt" {
		t.Fatalf("upload: %d %s", status, body)
	}
	status, body = e.do(t, http.MethodGet, "/files", url.Values{"path": {"hello.txt"}}, "", nil)
	if status != http.StatusOK || string(body) != "hello file" {
		t.Fatalf("download: %d %q", status, body)
	}
	list, err := e.filesystem().ListDir(ctx, connect.NewRequest(&filesystempb.ListDirRequest{Path: "/home/user"}))
	if err != nil {
		t.Fatalf("ListDir: %v", err)
	}
	if es := list.Msg.GetEntries(); len(es) != 1 || es[0].GetPath() != "/home/user/hello.txt" || es[0].GetSize() != int64(len("hello file")) {
		t.Fatalf("ListDir = %v", es)
	}
	// A command sees the uploaded file in its working directory.
	if out, _, _, err := runCommand(t, e.process(), "cat hello.txt"); err != nil || out != "hello file" {
		t.Fatalf("cat hello.txt: %q %v", out, err)
	}

	for name, tok := range map[string]string{"wrong": accessToken("some other claim"), "none": "", "claim token itself": cl.Token} {
		bad := newEnvdVia(t, root, cl, tok)
		if status, _ := bad.do(t, http.MethodGet, "/files", url.Values{"path": {"hello.txt"}}, "", nil); status != http.StatusUnauthorized {
			t.Errorf("%s access token: GET /files answered %d, want 401", name, status)
		}
		_, _, _, err := runCommand(t, bad.process(), "echo hello")
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("%s access token: Start answered %v, want unauthenticated", name, err)
		}
	}
}

func TestEnvdForkGetsItsOwnGuestAndReleaseKillsProcesses(t *testing.T) {
	root, parent := startEnvdFleet(t, &simfleet.EnvdConfig{Secret: envdSecret})
	ctx := ctxT(t)
	pe := newEnvdVia(t, root, parent, accessToken(parent.Token))
	if status, body := pe.upload(t, "disk.txt", "parent disk"); status != http.StatusOK {
		t.Fatalf("upload: %d %s", status, body)
	}

	children, err := root.Fork(ctx, parent.ID, sandboxd.ForkRequest{Token: parent.Token, Count: 1})
	if err != nil || len(children) != 1 {
		t.Fatalf("fork: %v %v", children, err)
	}
	child := &children[0]
	ce := newEnvdVia(t, root, child, accessToken(child.Token))
	// The child's disk is a copy of the parent's, served by its own guest.
	if status, body := ce.do(t, http.MethodGet, "/files", url.Values{"path": {"/home/user/disk.txt"}}, "", nil); status != http.StatusOK || string(body) != "parent disk" {
		t.Fatalf("child download: %d %q", status, body)
	}
	if status, body := ce.upload(t, "disk.txt", "child disk"); status != http.StatusOK {
		t.Fatalf("child upload: %d %s", status, body)
	}
	if _, body := pe.do(t, http.MethodGet, "/files", url.Values{"path": {"disk.txt"}}, "", nil); string(body) != "parent disk" {
		t.Fatalf("the child's write reached the parent: %q", body)
	}
	// Each guest takes only its own sandbox's token.
	crossed := newEnvdVia(t, root, child, accessToken(parent.Token))
	if status, _ := crossed.do(t, http.MethodGet, "/envs", nil, "", nil); status != http.StatusUnauthorized {
		t.Fatalf("the parent's access token on the child's guest: %d, want 401", status)
	}

	// A background process outlives its command but not the sandbox.
	out, exit, _, err := runCommand(t, ce.process(), "sleep 300 >/dev/null 2>&1 & echo $!")
	if err != nil || exit != 0 {
		t.Fatalf("start sleep: %q %d %v", out, exit, err)
	}
	sleeper, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || sleeper <= 0 {
		t.Fatalf("sleep pid %q", out)
	}
	if gone(sleeper) {
		t.Fatalf("sleep %d is not running", sleeper)
	}
	if err := root.Release(ctx, child.ID); err != nil {
		t.Fatalf("release child: %v", err)
	}
	poll.Until(t, fmt.Sprintf("sleep %d to end with the release of its sandbox", sleeper), func() bool { return gone(sleeper) })
	// The parent's guest is untouched.
	if out, _, _, err := runCommand(t, pe.process(), "echo still here"); err != nil || out != "still here\n" {
		t.Fatalf("parent after the child's release: %q %v", out, err)
	}
}

// gone reports whether pid has exited: no such process, or a zombie
// waiting for a parent (init) to reap it.
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

func TestEnvdWithoutSecretIsOpen(t *testing.T) {
	root, cl := startEnvdFleet(t, &simfleet.EnvdConfig{})
	e := newEnvdVia(t, root, cl, "")
	if out, exit, _, err := runCommand(t, e.process(), "echo open"); err != nil || out != "open\n" || exit != 0 {
		t.Fatalf("echo open: %q %d %v", out, exit, err)
	}
}

func TestEnvdAndEnvdHandlerAreExclusive(t *testing.T) {
	_, err := simfleet.Start(context.Background(), simfleet.Config{
		Envd:        &simfleet.EnvdConfig{},
		EnvdHandler: simfleet.EnvdHandler(simfleet.EnvdConfig{}),
	})
	if err == nil {
		t.Fatal("a fleet with both Envd and EnvdHandler started")
	}
}

func TestEnvdHandlerBuildsOneGuestPerSandbox(t *testing.T) {
	build := simfleet.EnvdHandler(simfleet.EnvdConfig{Secret: envdSecret, Version: "0.9.1", User: "ubuntu"})
	h, err := build(node.SandboxInfo{ID: "sb_a", Token: "claim-a", ScratchDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	g, ok := h.(*envd.Guest)
	if !ok {
		t.Fatalf("handler is %T, want *envd.Guest", h)
	}
	t.Cleanup(func() { _ = g.Close() })
	if g.Version() != "0.9.1" || g.Home() != "/home/ubuntu" {
		t.Fatalf("guest version %q home %q", g.Version(), g.Home())
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	for tok, want := range map[string]int{accessToken("claim-a"): http.StatusOK, accessToken("claim-b"): http.StatusUnauthorized} {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, srv.URL+"/envs", nil)
		req.Header.Set("X-Access-Token", tok)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /envs: %d, want %d", resp.StatusCode, want)
		}
	}
	if _, err := build(node.SandboxInfo{ID: "sb_b", Token: "claim-b", ScratchDir: "/nonexistent/scratch"}); err == nil {
		t.Fatal("a guest was built on a missing scratch directory")
	}
}
