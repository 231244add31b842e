package envd

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
)

func TestResolveGuestPaths(t *testing.T) {
	h := &home{dir: "/srv/scratch/sb_1", user: "user"}
	for _, tc := range []struct {
		user, in  string
		rel, path string // path is the guest form reported back; "" means refused
	}{
		{"user", "", ".", "/home/user"},
		{"user", "~", ".", "/home/user"},
		{"user", "~/a/b.txt", "a/b.txt", "/home/user/a/b.txt"},
		{"user", "a/./b.txt", "a/b.txt", "/home/user/a/b.txt"},
		{"user", "/home/user", ".", "/home/user"},
		{"user", "/home/user/a//b.txt", "a/b.txt", "/home/user/a/b.txt"},
		{"user", "/home/user/x/../y", "y", "/home/user/y"},
		{"root", "", ".", "/root"},
		{"root", "a.txt", "a.txt", "/root/a.txt"},
		{"root", "/home/user/a.txt", "a.txt", "/home/user/a.txt"},
		{"user", "/root/a.txt", "a.txt", "/root/a.txt"},
		// The scratch directory's host path, as a command prints it.
		{"user", "/srv/scratch/sb_1/a.txt", "a.txt", "/home/user/a.txt"},
		{"root", "/srv/scratch/sb_1", ".", "/root"},

		{"user", "..", "", ""},
		{"user", "a/../../b", "", ""},
		{"user", "~/../b", "", ""},
		{"user", "/home/user/../other", "", ""},
		{"user", "/home/userx/a", "", ""},
		{"user", "/home", "", ""},
		{"user", "/tmp/a", "", ""},
		{"user", "/etc/passwd", "", ""},
		{"user", "/srv/scratch/sb_10/a", "", ""},
		{"user", "/srv/scratch/sb_1/../sb_2", "", ""},
	} {
		p, err := h.resolve(tc.user, tc.in)
		if tc.path == "" {
			if err != errOutsideHome {
				t.Errorf("resolve(%s, %q) = %+v, %v; want errOutsideHome", tc.user, tc.in, p, err)
			}
			continue
		}
		if err != nil || p.rel != tc.rel || p.guest() != tc.path {
			t.Errorf("resolve(%s, %q) = rel %q guest %q, %v; want rel %q guest %q", tc.user, tc.in, p.rel, p.guest(), err, tc.rel, tc.path)
		}
	}
}

func TestConfiguredUserHome(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.User = "ubuntu" })
	if f.guest.Home() != "/home/ubuntu" {
		t.Fatalf("Home() = %q", f.guest.Home())
	}
	fs := f.filesystem(wires[0])
	res, err := fs.MakeDir(testContext(t), connect.NewRequest(&filesystempb.MakeDirRequest{Path: "/home/ubuntu/d"}))
	if err != nil || res.Msg.GetEntry().GetPath() != "/home/ubuntu/d" {
		t.Fatalf("MakeDir /home/ubuntu/d: %v %v", res, err)
	}
	_, err = fs.MakeDir(testContext(t), connect.NewRequest(&filesystempb.MakeDirRequest{Path: "/home/user/d"}))
	wantCode(t, err, connect.CodeInvalidArgument)

	for _, bad := range []string{"a/b", "..", "x:y"} {
		if _, err := NewHandler(Config{Root: t.TempDir(), User: bad}); err == nil {
			t.Errorf("user %q was accepted", bad)
		}
	}
}

func TestRootSeesTheHomeAsRoot(t *testing.T) {
	f := newFixture(t, nil)
	c := f.client(false, testToken)
	body, ct := multipartBody(t, [][2]string{{"x", "from root"}})
	status, resp, _ := do(t, c, http.MethodPost, f.filesURL("r.txt", url.Values{"username": {"root"}}), ct, body, nil)
	if status != http.StatusOK || decodeUploaded(t, resp)[0].Path != "/root/r.txt" {
		t.Fatalf("upload as root: %d %s", status, resp)
	}
	// One home under two names.
	status, content, _ := do(t, c, http.MethodGet, f.filesURL("/home/user/r.txt", nil), "", nil, nil)
	if status != http.StatusOK || string(content) != "from root" {
		t.Fatalf("download as user: %d %q", status, content)
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, "r.txt")); string(b) != "from root" {
		t.Fatalf("scratch file holds %q", b)
	}

	req := connect.NewRequest(&filesystempb.ListDirRequest{Path: ""})
	req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("root:")))
	res, err := f.filesystem(wires[0]).ListDir(testContext(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if es := res.Msg.GetEntries(); len(es) != 1 || es[0].GetPath() != "/root/r.txt" {
		t.Fatalf("ListDir as root = %v", es)
	}
}

func TestCommandsRunInTheHome(t *testing.T) {
	f := newFixture(t, nil)
	if err := os.Mkdir(filepath.Join(f.root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := f.process(wires[0])
	pwd := bashCommand(`printf '%s|%s' "$PWD" "$HOME"`)
	if o := run(t, c, &processpb.StartRequest{Process: pwd}); o.stdout.String() != f.root+"|"+f.root {
		t.Errorf("default cwd: %q, want the scratch directory", o.stdout.String())
	}
	for _, cwd := range []string{"/home/user/sub", "~/sub", "sub"} {
		cfg := bashCommand(`printf %s "$PWD"`)
		cfg.Cwd = new(cwd)
		if o := run(t, c, &processpb.StartRequest{Process: cfg}); o.stdout.String() != filepath.Join(f.root, "sub") {
			t.Errorf("cwd %q ran in %q", cwd, o.stdout.String())
		}
	}
	for _, cwd := range []string{"/tmp", "/home/user/../..", "/home/user/missing"} {
		cfg := bashCommand("true")
		cfg.Cwd = new(cwd)
		s, err := c.Start(testContext(t), connect.NewRequest(&processpb.StartRequest{Process: cfg}))
		if err == nil {
			s.Receive()
			err = s.Err()
			s.Close()
		}
		wantCode(t, err, connect.CodeInvalidArgument)
	}
}

func TestErrorsNameGuestPathsOnly(t *testing.T) {
	f := newFixture(t, nil)
	status, body, _ := do(t, f.client(false, testToken), http.MethodGet, f.filesURL("nope.txt", nil), "", nil, nil)
	if status != http.StatusNotFound || !strings.Contains(string(body), "/home/user/nope.txt") || strings.Contains(string(body), f.root) {
		t.Errorf("missing download: %d %s", status, body)
	}
	fs := f.filesystem(wires[0])
	ctx := testContext(t)
	_, errStat := fs.Stat(ctx, connect.NewRequest(&filesystempb.StatRequest{Path: "missing/deeper"}))
	_, errList := fs.ListDir(ctx, connect.NewRequest(&filesystempb.ListDirRequest{Path: "/tmp"}))
	_, errMk := fs.MakeDir(ctx, connect.NewRequest(&filesystempb.MakeDirRequest{Path: ""}))
	for _, err := range []error{errStat, errList, errMk} {
		if err == nil || strings.Contains(err.Error(), f.root) {
			t.Errorf("error %v is missing or names the host directory", err)
		}
	}
}
