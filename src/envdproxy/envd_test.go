package envdproxy_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
)

// sdkTransport adds what the e2b JS SDK adds to every envd request when
// E2B_SANDBOX_URL points every sandbox at one host: the routing headers
// with the id in the spelling the compat API publishes, the access token,
// and the user as Basic auth.
type sdkTransport struct {
	base      http.RoundTripper
	sandboxID string
	token     string
}

func (s sdkTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", strings.Replace(s.sandboxID, "sb_", "sb-", 1))
	r.Header.Set("E2b-Sandbox-Port", strconv.Itoa(envdproxy.EnvdPort))
	r.Header.Set("X-Access-Token", s.token)
	r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("user:")))
	return s.base.RoundTrip(r)
}

func (e *env) sdkClient(id, token string) *http.Client {
	return &http.Client{Transport: sdkTransport{base: e.hc.Transport, sandboxID: id, token: token}}
}

// fileSignature is the SDK's signed-URL scheme (see docs/envd-guest.md):
// "v1_" + unpadded base64 SHA-256 of "path:operation:user:token".
func fileSignature(path, op, user, token string) string {
	sum := sha256.Sum256([]byte(path + ":" + op + ":" + user + ":" + token))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// TestSDKDataPlane walks what the SDK's commands.run, files.write,
// files.read and downloadUrl/uploadUrl do, through the proxy to the envd
// guest.
func TestSDKDataPlane(t *testing.T) {
	e := newEnv(t, envOptions{})
	cl := e.claim(1, true)
	tok := accessToken(cl.Token)
	hc := e.sdkClient(cl.ID, tok)

	// commands.run: a Connect server stream (JSON, as the SDK sends it).
	pc := processpbconnect.NewProcessClient(hc, e.url, connect.WithProtoJSON())
	out, exit := runCommand(t, pc, "echo hello; echo err >&2")
	if out != "hello\n" || exit != 0 {
		t.Fatalf("commands.run: stdout %q exit %d", out, exit)
	}

	// files.write: multipart POST /files.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	w, _ := mw.CreateFormFile("file", "/home/user/note.txt")
	_, _ = io.WriteString(w, "written through the proxy")
	_ = mw.Close()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, e.url+"/files?path="+url.QueryEscape("/home/user/note.txt"), &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if status, body := send(t, hc, req); status != 200 {
		t.Fatalf("files.write: %d %s", status, body)
	}

	// files.read: GET /files.
	req, _ = http.NewRequestWithContext(ctxT(t), http.MethodGet, e.url+"/files?path="+url.QueryEscape("/home/user/note.txt"), nil)
	if status, body := send(t, hc, req); status != 200 || string(body) != "written through the proxy" {
		t.Fatalf("files.read: %d %q", status, body)
	}

	// downloadUrl: fetched by a plain client on the derived host, no
	// header at all. The SDK leaves username out for envd >= 0.4.0.
	envdHost := host(envdproxy.EnvdPort, cl.ID)
	dl := "/files?path=" + url.QueryEscape("/home/user/note.txt") + "&signature=" + url.QueryEscape(fileSignature("/home/user/note.txt", "read", "", tok))
	status, body, _ := e.do(http.MethodGet, envdHost, dl, nil)
	if status != 200 || string(body) != "written through the proxy" {
		t.Fatalf("signed download: %d %q", status, body)
	}
	// A signature for another path is envd's 401, passed through.
	bad := "/files?path=" + url.QueryEscape("/home/user/note.txt") + "&signature=" + url.QueryEscape(fileSignature("/home/user/other", "read", "", tok))
	if status, body, _ := e.do(http.MethodGet, envdHost, bad, nil); status != 401 {
		t.Fatalf("bad signature: %d %s", status, body)
	}

	// uploadUrl: a signed POST with a raw body.
	up := "/files?path=" + url.QueryEscape("/home/user/up.bin") + "&signature=" + url.QueryEscape(fileSignature("/home/user/up.bin", "write", "", tok))
	status, body, _ = e.do(http.MethodPost, envdHost, up, strings.NewReader("raw upload"), withHeader("Content-Type", "application/octet-stream"))
	if status != 200 {
		t.Fatalf("signed upload: %d %s", status, body)
	}
	req, _ = http.NewRequestWithContext(ctxT(t), http.MethodGet, e.url+"/files?path="+url.QueryEscape("/home/user/up.bin"), nil)
	if status, body := send(t, hc, req); status != 200 || string(body) != "raw upload" {
		t.Fatalf("read back the signed upload: %d %q", status, body)
	}

	// A signed URL for a sandbox the inventory does not list yet.
	late := e.claim(0, false)
	ltok := accessToken(late.Token)
	lhc := e.sdkClient(late.ID, ltok)
	req, _ = http.NewRequestWithContext(ctxT(t), http.MethodPost, e.url+"/files?path=x.txt", strings.NewReader("late"))
	req.Header.Set("Content-Type", "application/octet-stream")
	if status, body := send(t, lhc, req); status != 200 {
		t.Fatalf("write to an unlisted sandbox: %d %s", status, body)
	}
	dl = "/files?path=x.txt&signature=" + url.QueryEscape(fileSignature("x.txt", "read", "", ltok))
	if status, body, _ := e.do(http.MethodGet, host(envdproxy.EnvdPort, late.ID), dl, nil); status != 200 || string(body) != "late" {
		t.Fatalf("signed download from an unlisted sandbox: %d %q", status, body)
	}
}

// TestServerStreamIsNotBuffered reads a process's first output while the
// process is still running: a proxy that buffered the stream would hold
// it until the process ended, far past the test's deadline.
func TestServerStreamIsNotBuffered(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	cl := e.claim(0, true)
	pc := processpbconnect.NewProcessClient(e.sdkClient(cl.ID, accessToken(cl.Token)), e.url, connect.WithProtoJSON())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pc.Start(ctx, connect.NewRequest(&processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "echo first; sleep 300"}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var pid uint32
	for s.Receive() {
		ev := s.Msg().GetEvent()
		if ev.GetStart() != nil {
			pid = ev.GetStart().GetPid()
		}
		if d := ev.GetData(); d != nil && string(d.GetStdout()) == "first\n" {
			break
		}
		if ev.GetEnd() != nil {
			t.Fatal("process ended before its first output arrived")
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	_, _ = pc.SendSignal(ctxT(t), connect.NewRequest(&processpb.SendSignalRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}},
		Signal:  processpb.Signal_SIGNAL_SIGKILL,
	}))
}

func runCommand(t *testing.T, pc processpbconnect.ProcessClient, cmd string) (string, int32) {
	t.Helper()
	s, err := pc.Start(ctxT(t), connect.NewRequest(&processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", cmd}},
	}))
	if err != nil {
		t.Fatalf("start %q: %v", cmd, err)
	}
	defer s.Close()
	var stdout bytes.Buffer
	exit := int32(-2)
	for s.Receive() {
		ev := s.Msg().GetEvent()
		switch {
		case ev.GetData() != nil:
			stdout.Write(ev.GetData().GetStdout())
		case ev.GetEnd() != nil:
			exit = ev.GetEnd().GetExitCode()
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream of %q: %v", cmd, err)
	}
	return stdout.String(), exit
}

func send(t *testing.T, hc *http.Client, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}
