package envd

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb"
	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb/filesystempbconnect"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
)

func TestAccessToken(t *testing.T) {
	f := newFixture(t, nil)
	anonymous := f.client(false, "")
	wrong := f.client(false, "not-the-token")
	right := f.client(false, testToken)

	if status, _, hdr := do(t, anonymous, http.MethodGet, f.srv.URL+"/health", "", nil, nil); status != http.StatusNoContent || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("health without a token: %d", status)
	}
	for _, c := range []*http.Client{anonymous, wrong} {
		for _, path := range []string{"/envs", "/metrics", "/files?path=x"} {
			status, body, _ := do(t, c, http.MethodGet, f.srv.URL+path, "", nil, nil)
			if status != http.StatusUnauthorized {
				t.Fatalf("GET %s with a bad token: %d", path, status)
			}
			wantErrorBody(t, body, http.StatusUnauthorized)
		}
	}
	for _, path := range []string{"/envs", "/metrics"} {
		if status, body, _ := do(t, right, http.MethodGet, f.srv.URL+path, "", nil, nil); status != http.StatusOK || !strings.HasPrefix(string(body), "{") {
			t.Fatalf("GET %s with the token: %d %s", path, status, body)
		}
	}

	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			for _, tok := range []string{"", "not-the-token"} {
				pc := processpbconnect.NewProcessClient(f.client(w.h2c, tok), f.srv.URL, w.opts...)
				_, err := pc.List(testContext(t), connect.NewRequest(&processpb.ListRequest{}))
				wantCode(t, err, connect.CodeUnauthenticated)
				fc := filesystempbconnect.NewFilesystemClient(f.client(w.h2c, tok), f.srv.URL, w.opts...)
				_, err = fc.Stat(testContext(t), connect.NewRequest(&filesystempb.StatRequest{}))
				wantCode(t, err, connect.CodeUnauthenticated)
			}
			if _, err := f.process(w).List(testContext(t), connect.NewRequest(&processpb.ListRequest{})); err != nil {
				t.Fatalf("List with the token: %v", err)
			}
		})
	}

	t.Run("no token configured", func(t *testing.T) {
		open := newFixture(t, func(c *Config) { c.AccessToken = "" })
		if status, _, _ := do(t, open.client(false, ""), http.MethodGet, open.srv.URL+"/envs", "", nil, nil); status != http.StatusOK {
			t.Fatalf("envs on an unsecured guest: %d", status)
		}
	})
}

func TestUsers(t *testing.T) {
	f := newFixture(t, nil)
	c := f.client(false, testToken)
	for user, want := range map[string]int{"user": http.StatusNotFound, "root": http.StatusNotFound, "nobody": http.StatusUnauthorized} {
		status, _, _ := do(t, c, http.MethodGet, f.filesURL("missing", url.Values{"username": {user}}), "", nil, nil)
		if status != want {
			t.Errorf("username=%s: %d, want %d", user, status, want)
		}
	}
	pc := f.process(wires[0])
	for user, ok := range map[string]bool{"user": true, "root": true, "nobody": false} {
		req := connect.NewRequest(&processpb.StartRequest{Process: bashCommand("printf %s $USER")})
		req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
		s, err := pc.Start(testContext(t), req)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			s.Receive()
			wantCode(t, s.Err(), connect.CodeUnauthenticated)
			s.Close()
			continue
		}
		o := &outcome{pid: readStart(t, s)}
		drain(t, s, o)
		s.Close()
		if o.stdout.String() != user {
			t.Errorf("USER for %s = %q", user, o.stdout.String())
		}
	}
}

func TestSignedFileURLs(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	f := newFixture(t, func(c *Config) { c.Clock = clk })
	anonymous := f.client(false, "")
	future := clk.Now().Add(time.Hour).Unix()
	past := clk.Now().Add(-time.Minute).Unix()

	signed := func(path, op, user string, exp int64, sig string) string {
		q := url.Values{"signature": {sig}}
		if user != "" {
			q.Set("username", user)
		}
		if exp != 0 {
			q.Set("signature_expiration", strconv.FormatInt(exp, 10))
		}
		return f.filesURL(path, q)
	}
	upload := func(u string) int {
		body, ct := multipartBody(t, [][2]string{{"f", "signed content"}})
		status, _, _ := do(t, anonymous, http.MethodPost, u, ct, body, nil)
		return status
	}
	download := func(u string) int {
		status, _, _ := do(t, anonymous, http.MethodGet, u, "", nil, nil)
		return status
	}

	if got := upload(signed("s.txt", "write", "", 0, sign("s.txt", "write", "", testToken, 0))); got != http.StatusOK {
		t.Fatalf("signed upload: %d", got)
	}
	if got := download(signed("s.txt", "read", "", 0, sign("s.txt", "read", "", testToken, 0))); got != http.StatusOK {
		t.Fatalf("signed download: %d", got)
	}
	expiring := signed("s.txt", "read", "user", future, sign("s.txt", "read", "user", testToken, future))
	if got := download(expiring); got != http.StatusOK {
		t.Fatalf("signed download with user and expiration: %d", got)
	}
	// The same URL, once the guest's clock passes its expiration.
	clk.SetTime(time.Unix(future+1, 0))
	if got := download(expiring); got != http.StatusUnauthorized {
		t.Fatalf("signed download after its expiration: %d, want 401", got)
	}
	clk.SetTime(time.Unix(future-3600, 0))

	refused := map[string]string{
		"expired":             signed("s.txt", "read", "", past, sign("s.txt", "read", "", testToken, past)),
		"other path":          signed("other.txt", "read", "", 0, sign("s.txt", "read", "", testToken, 0)),
		"write sig for read":  signed("s.txt", "read", "", 0, sign("s.txt", "write", "", testToken, 0)),
		"other user":          signed("s.txt", "read", "root", 0, sign("s.txt", "read", "user", testToken, 0)),
		"wrong key":           signed("s.txt", "read", "", 0, sign("s.txt", "read", "", "guessed", 0)),
		"extended expiration": signed("s.txt", "read", "", future+3600, sign("s.txt", "read", "", testToken, future)),
		"no signature":        f.filesURL("s.txt", nil),
	}
	for name, u := range refused {
		if got := download(u); got != http.StatusUnauthorized {
			t.Errorf("%s: download answered %d, want 401", name, got)
		}
	}
	if got := upload(signed("s.txt", "write", "", 0, sign("s.txt", "read", "", testToken, 0))); got != http.StatusUnauthorized {
		t.Errorf("read signature used to write: %d, want 401", got)
	}

	// A wrong token next to a good signature is still refused.
	u := signed("s.txt", "read", "", 0, sign("s.txt", "read", "", testToken, 0))
	if status, _, _ := do(t, f.client(false, "wrong"), http.MethodGet, u, "", nil, nil); status != http.StatusUnauthorized {
		t.Errorf("wrong token with a valid signature: %d, want 401", status)
	}
}

func TestPathEscapesAreRefused(t *testing.T) {
	f := newFixture(t, nil)
	c := f.client(false, testToken)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A guest command could plant these; relative and absolute flavours.
	rel, err := filepath.Rel(f.root, outside)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, filepath.Join(f.root, "rel-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.root, "abs-link")); err != nil {
		t.Fatal(err)
	}

	for _, p := range []string{"../secret", "a/../../secret", filepath.Join(outside, "secret"), "/etc/passwd", "/home/user/../../etc/passwd", "/tmp/secret"} {
		status, body, _ := do(t, c, http.MethodGet, f.filesURL(p, nil), "", nil, nil)
		if status != http.StatusBadRequest {
			t.Errorf("download %q: %d, want 400", p, status)
		}
		wantErrorBody(t, body, status)
		mp, ct := multipartBody(t, [][2]string{{"x", "pwned"}})
		if status, _, _ := do(t, c, http.MethodPost, f.filesURL(p, nil), ct, mp, nil); status != http.StatusBadRequest {
			t.Errorf("upload %q: %d, want 400", p, status)
		}
	}
	for _, p := range []string{"rel-link/secret", "abs-link/secret"} {
		status, body, _ := do(t, c, http.MethodGet, f.filesURL(p, nil), "", nil, nil)
		if status != http.StatusForbidden || strings.Contains(string(body), "host secret") {
			t.Errorf("download through %q: %d %s, want 403", p, status, body)
		}
		mp, ct := multipartBody(t, [][2]string{{"x", "pwned"}})
		if status, _, _ := do(t, c, http.MethodPost, f.filesURL(p+"-new", nil), ct, mp, nil); status != http.StatusForbidden {
			t.Errorf("upload through %q: %d, want 403", p, status)
		}
	}
	// Multipart file names are paths too.
	mp, ct := multipartBody(t, [][2]string{{"../escaped", "pwned"}})
	if status, _, _ := do(t, c, http.MethodPost, f.filesURL("", nil), ct, mp, nil); status != http.StatusBadRequest {
		t.Errorf("multipart file name escaping: %d, want 400", status)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Fatalf("the outside directory was written to: %v", entries)
	}

	fs := f.filesystem(wires[0])
	ctx := testContext(t)
	_, err = fs.ListDir(ctx, connect.NewRequest(&filesystempb.ListDirRequest{Path: ".."}))
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = fs.ListDir(ctx, connect.NewRequest(&filesystempb.ListDirRequest{Path: "rel-link"}))
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = fs.Stat(ctx, connect.NewRequest(&filesystempb.StatRequest{Path: "rel-link/secret"}))
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = fs.Move(ctx, connect.NewRequest(&filesystempb.MoveRequest{Source: "rel-link", Destination: "/tmp/moved"}))
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = fs.MakeDir(ctx, connect.NewRequest(&filesystempb.MakeDirRequest{Path: "abs-link/newdir"}))
	wantCode(t, err, connect.CodePermissionDenied)
	// Removing a link removes the link, never what it points at.
	if _, err := fs.Remove(ctx, connect.NewRequest(&filesystempb.RemoveRequest{Path: "abs-link"})); err != nil {
		t.Fatalf("Remove link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Fatalf("removing the link touched its target: %v", err)
	}

	pc := f.process(wires[0])
	cfg := bashCommand("pwd")
	cfg.Cwd = new("/")
	s, err := pc.Start(ctx, connect.NewRequest(&processpb.StartRequest{Process: cfg}))
	if err == nil {
		s.Receive()
		err = s.Err()
		s.Close()
	}
	wantCode(t, err, connect.CodeInvalidArgument)
}

func TestProtocols(t *testing.T) {
	f := newFixture(t, nil)
	for _, h2c := range []bool{false, true} {
		resp, err := f.client(h2c, "").Get(f.srv.URL + "/health")
		if err != nil {
			t.Fatalf("h2c=%v: %v", h2c, err)
		}
		resp.Body.Close()
		if want := map[bool]int{false: 1, true: 2}[h2c]; resp.ProtoMajor != want {
			t.Errorf("h2c=%v: served over HTTP/%d", h2c, resp.ProtoMajor)
		}
	}

	// HTTP1Only behaves like envd 0.8.0: prior-knowledge HTTP/2 fails.
	h1 := newFixture(t, func(c *Config) { c.HTTP1Only = true })
	if resp, err := h1.client(true, "").Get(h1.srv.URL + "/health"); err == nil {
		resp.Body.Close()
		t.Fatalf("h2c request to an HTTP/1.1-only guest answered %s", resp.Status)
	}
	resp, err := h1.client(false, "").Get(h1.srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("HTTP/1.1 health: %s", resp.Status)
	}
}
