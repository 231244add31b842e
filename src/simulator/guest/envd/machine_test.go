package envd

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
)

func TestResolveOnMachine(t *testing.T) {
	h := &home{dir: "/", user: "user", machine: true}
	for _, tc := range []struct{ user, in, rel string }{
		{"user", "", "home/user"},
		{"user", "~", "home/user"},
		{"user", "~/a/b.txt", "home/user/a/b.txt"},
		{"user", "a/./b.txt", "home/user/a/b.txt"},
		{"user", "..", "home"},
		{"user", "../../../..", "."},
		{"root", "", "root"},
		{"root", "x", "root/x"},
		{"user", "/", "."},
		{"user", "/etc/passwd", "etc/passwd"},
		{"user", "/tmp//a/../b", "tmp/b"},
		{"user", "/../..", "."},
	} {
		p, err := h.resolve(tc.user, tc.in)
		if err != nil || p.rel != tc.rel || p.guest() != "/"+strings.TrimPrefix(tc.rel, ".") {
			t.Errorf("resolve(%s, %q) = rel %q guest %q, %v; want rel %q", tc.user, tc.in, p.rel, p.guest(), err, tc.rel)
		}
	}
	if _, err := h.resolve("user", "a\x00b"); err == nil {
		t.Error("a NUL byte was accepted")
	}
}

// machineFixture serves a guest that owns a "machine" whose root is a
// temporary directory holding /home/user and an absolute symlink, as a
// sandbox's root would.
func machineFixture(t *testing.T, accounts map[string]Account) *fixture {
	t.Helper()
	f := newFixture(t, func(c *Config) {
		c.Machine = &Machine{Accounts: accounts, Path: "/usr/bin:/bin"}
	})
	// Another uid must be able to reach the home through the test's own
	// 0700 temporary directories.
	for _, dir := range []string{f.root, filepath.Dir(f.root)} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{"home/user", "root"} {
		if err := os.MkdirAll(filepath.Join(f.root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.root, "etc-release"), []byte("machine"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Absolute, so os.Root would refuse it; on a machine the guest owns it
	// resolves as the system resolves it (here against the host's "/",
	// since this test has no namespaces).
	if err := os.Symlink(filepath.Join(f.root, "etc-release"), filepath.Join(f.root, "release-link")); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestMachinePathsAndCommands(t *testing.T) {
	f := machineFixture(t, nil)
	c := f.client(false, testToken)

	status, body, _ := do(t, c, http.MethodGet, f.filesURL("/release-link", nil), "", nil, nil)
	if status != http.StatusOK || string(body) != "machine" {
		t.Fatalf("download through an absolute symlink: %d %q", status, body)
	}
	mp, ct := multipartBody(t, [][2]string{{"rel.txt", "relative"}})
	status, body, _ = do(t, c, http.MethodPost, f.filesURL("", nil), ct, mp, nil)
	if status != http.StatusOK || decodeUploaded(t, body)[0].Path != "/home/user/rel.txt" {
		t.Fatalf("relative upload: %d %s", status, body)
	}
	if b, err := os.ReadFile(filepath.Join(f.root, "home", "user", "rel.txt")); string(b) != "relative" {
		t.Fatalf("relative upload landed elsewhere: %q %v", b, err)
	}
	res, err := f.filesystem(wires[0]).ListDir(testContext(t), connect.NewRequest(&filesystempb.ListDirRequest{Path: "/"}))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range res.Msg.GetEntries() {
		paths = append(paths, e.GetPath())
	}
	if strings.Join(paths, ",") != "/etc-release,/home,/release-link,/root" {
		t.Fatalf("ListDir / = %v", paths)
	}

	// Not a login shell, which would reset PATH from /etc/profile.
	sh := &processpb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", `printf '%s|%s|%s' "$PWD" "$HOME" "$PATH"`}}
	o := run(t, f.process(wires[0]), &processpb.StartRequest{Process: sh})
	if want := filepath.Join(f.root, "home", "user") + "|/home/user|/usr/bin:/bin"; o.stdout.String() != want {
		t.Fatalf("command environment %q, want %q", o.stdout.String(), want)
	}
}

func TestMachineAccounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching to another uid needs root")
	}
	const uid, gid = 4321, 4322
	f := machineFixture(t, map[string]Account{"user": {UID: uid, GID: gid, Groups: []uint32{4323}}})
	if err := os.Chown(filepath.Join(f.root, "home", "user"), uid, gid); err != nil {
		t.Fatal(err)
	}
	c := f.client(false, testToken)
	mp, ct := multipartBody(t, [][2]string{{"new/dir/f.txt", "mine"}})
	if status, body, _ := do(t, c, http.MethodPost, f.filesURL("", nil), ct, mp, nil); status != http.StatusOK {
		t.Fatalf("upload: %d %s", status, body)
	}
	for _, rel := range []string{"new", "new/dir", "new/dir/f.txt"} {
		st, err := os.Lstat(filepath.Join(f.root, "home", "user", rel))
		if err != nil {
			t.Fatal(err)
		}
		if s := st.Sys().(*syscall.Stat_t); s.Uid != uid || s.Gid != gid {
			t.Errorf("%s owned by %d:%d, want %d:%d", rel, s.Uid, s.Gid, uid, gid)
		}
	}
	if _, err := f.filesystem(wires[0]).MakeDir(testContext(t), connect.NewRequest(&filesystempb.MakeDirRequest{Path: "made/here"})); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(filepath.Join(f.root, "home", "user", "made")); st == nil || st.Sys().(*syscall.Stat_t).Uid != uid {
		t.Errorf("MakeDir's parent is not the user's")
	}

	p := f.process(wires[0])
	if o := run(t, p, &processpb.StartRequest{Process: bashCommand(`id -u; id -g; id -G; echo more >> new/dir/f.txt`)}); o.stdout.String() != "4321\n4322\n4322 4323\n" || o.end.GetExitCode() != 0 {
		t.Fatalf("as user: %q %q exit %d", o.stdout.String(), o.stderr.String(), o.end.GetExitCode())
	}
	// Root has no account: it keeps the guest's ids.
	req := connect.NewRequest(&processpb.StartRequest{Process: bashCommand(`id -u; printf %s "$HOME"`)})
	req.Header().Set("Authorization", "Basic cm9vdDo=") // root:
	s, err := p.Start(testContext(t), req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := &outcome{pid: readStart(t, s)}
	drain(t, s, o)
	if o.stdout.String() != "0\n/root" {
		t.Fatalf("as root: %q %q", o.stdout.String(), o.stderr.String())
	}
}
