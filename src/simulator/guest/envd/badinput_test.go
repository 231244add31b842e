package envd

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
)

// badPaths are paths no file could have: the client's mistake, never the
// guest's fault.
// They name entries under the home and under "d", which exist (see
// withDir), so that no "not found" on the way hides the answer.
var badPaths = map[string]string{
	"NUL":         "d/a\x00b",
	"100KB name":  strings.Repeat("x", 100_000),
	"100KB path":  strings.Repeat("d/", 50_000),
	"long name":   "d/" + strings.Repeat("n", 300),
	"NUL in home": "/home/user/\x00",
}

// withDir is a fixture whose home holds the directory "d".
func withDir(t *testing.T) *fixture {
	f := newFixture(t, nil)
	if err := os.Mkdir(filepath.Join(f.root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestStatOfAnImpossiblePathIsInvalidArgument is the probe exactly: a
// Connect JSON POST /filesystem.Filesystem/Stat, answered 400 with code
// invalid_argument (it was 500 internal), and the message does not echo
// the 100 KB path back.
func TestStatOfAnImpossiblePathIsInvalidArgument(t *testing.T) {
	f := withDir(t)
	c := f.client(false, testToken)
	for name, p := range badPaths {
		body := `{"path":` + jsonString(p) + `}`
		status, resp, _ := do(t, c, http.MethodPost, f.srv.URL+"/filesystem.Filesystem/Stat", "application/json", strings.NewReader(body), nil)
		if status != http.StatusBadRequest || !strings.Contains(string(resp), `"invalid_argument"`) {
			t.Errorf("%s: Stat answered %d %.200s, want 400 invalid_argument", name, status, resp)
		}
		if len(resp) > 2000 {
			t.Errorf("%s: the error echoes %d bytes", name, len(resp))
		}
	}
}

// jsonString is p as a JSON string, NUL escaped.
func jsonString(p string) string {
	return `"` + strings.ReplaceAll(p, "\x00", `\u0000`) + `"`
}

// TestEveryRPCRefusesImpossiblePaths: each RPC that takes a path answers
// invalid_argument, on every wire.
func TestEveryRPCRefusesImpossiblePaths(t *testing.T) {
	f := withDir(t)
	for _, w := range wires {
		fs, pc := f.filesystem(w), f.process(w)
		for name, p := range badPaths {
			t.Run(w.name+"/"+name, func(t *testing.T) {
				ctx := testContext(t)
				_, err := fs.Stat(ctx, connect.NewRequest(&filesystempb.StatRequest{Path: p}))
				wantCode(t, err, connect.CodeInvalidArgument)
				_, err = fs.MakeDir(ctx, connect.NewRequest(&filesystempb.MakeDirRequest{Path: p}))
				wantCode(t, err, connect.CodeInvalidArgument)
				_, err = fs.Move(ctx, connect.NewRequest(&filesystempb.MoveRequest{Source: "x", Destination: p}))
				wantCode(t, err, connect.CodeInvalidArgument)
				_, err = fs.ListDir(ctx, connect.NewRequest(&filesystempb.ListDirRequest{Path: p}))
				wantCode(t, err, connect.CodeInvalidArgument)
				_, err = fs.Remove(ctx, connect.NewRequest(&filesystempb.RemoveRequest{Path: p}))
				wantCode(t, err, connect.CodeInvalidArgument)
				ws, err := fs.WatchDir(ctx, connect.NewRequest(&filesystempb.WatchDirRequest{Path: p}))
				if err == nil {
					for ws.Receive() {
					}
					err = ws.Err()
				}
				wantCode(t, err, connect.CodeInvalidArgument)
				ps, err := pc.Start(ctx, connect.NewRequest(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/bin/true", Cwd: &p}}))
				if err == nil {
					for ps.Receive() {
					}
					err = ps.Err()
				}
				wantCode(t, err, connect.CodeInvalidArgument)
			})
		}
	}
	// A command or environment with a NUL cannot be run either.
	pc := f.process(wires[0])
	for _, cfg := range []*processpb.ProcessConfig{
		{Cmd: "/bin/tr\x00ue"},
		{Cmd: "/bin/true", Args: []string{"a\x00b"}},
		{Cmd: "/bin/true", Envs: map[string]string{"A": "b\x00c"}},
	} {
		ps, err := pc.Start(testContext(t), connect.NewRequest(&processpb.StartRequest{Process: cfg}))
		if err == nil {
			for ps.Receive() {
			}
			err = ps.Err()
		}
		wantCode(t, err, connect.CodeInvalidArgument)
	}
}

// TestFilesRefuseImpossiblePathsAndShortBodies: GET and POST /files with
// such a path are 400, and so is an upload whose body ends short of its
// Content-Length.
func TestFilesRefuseImpossiblePathsAndShortBodies(t *testing.T) {
	f := withDir(t)
	c := f.client(false, testToken)
	for name, p := range badPaths {
		if status, body, _ := do(t, c, http.MethodGet, f.filesURL(p, nil), "", nil, nil); status != http.StatusBadRequest {
			t.Errorf("%s: download answered %d %.200s", name, status, body)
		}
		status, body, _ := do(t, c, http.MethodPost, f.filesURL(p, nil), "application/octet-stream", strings.NewReader("x"), nil)
		if status != http.StatusBadRequest {
			t.Errorf("%s: raw upload answered %d %.200s", name, status, body)
		}
		mp, ct := multipartBody(t, [][2]string{{p, "x"}})
		status, body, _ = do(t, c, http.MethodPost, f.filesURL("", nil), ct, mp, nil)
		if status != http.StatusBadRequest {
			t.Errorf("%s: multipart upload answered %d %.200s", name, status, body)
		}
	}

	// Content-Length 1000, three bytes, then the client closes its side.
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = io.WriteString(conn, "POST /files?path="+url.QueryEscape("short.bin")+" HTTP/1.1\r\nHost: x\r\nX-Access-Token: "+testToken+
		"\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\nabc")
	_ = conn.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(conn)
	if !strings.HasPrefix(string(got), "HTTP/1.1 400 ") {
		t.Fatalf("short upload body answered %q, want 400", got)
	}
}
