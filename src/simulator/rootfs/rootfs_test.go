package rootfs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
)

// tree makes a directory that looks like a provisioned tree (marker
// included unless complete is false) and returns it.
func tree(t *testing.T, complete bool) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc", "sandbox-operator"), 0o755); err != nil {
		t.Fatal(err)
	}
	if complete {
		if err := os.WriteFile(filepath.Join(dir, rootfs.Marker), []byte("template=base\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// isolate points every variable Base reads at nothing, so the developer's
// own cache never leaks into a test.
func isolate(t *testing.T) {
	t.Helper()
	t.Setenv(rootfs.EnvVar, "")
	t.Setenv("SANDBOX_OPERATOR_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", t.TempDir())
}

// wantActionable checks that err exists and tells the reader what to run.
func wantActionable(t *testing.T, err error, mentions ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("Base succeeded, want an error")
	}
	for _, m := range append([]string{rootfs.Script}, mentions...) {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not mention %q", err, m)
		}
	}
}

func TestBaseHonoursEnvVar(t *testing.T) {
	isolate(t)
	want := tree(t, true)
	t.Setenv(rootfs.EnvVar, want)
	got, err := rootfs.Base()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Base() = %q, want %q", got, want)
	}
}

func TestBaseResolvesLinks(t *testing.T) {
	// The script's stable name is a link to a versioned tree; a sandbox must
	// get the tree itself, so a later re-provisioning cannot swap it.
	isolate(t)
	target := tree(t, true)
	link := filepath.Join(t.TempDir(), "base")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv(rootfs.EnvVar, link)
	got, err := rootfs.Base()
	if err != nil {
		t.Fatal(err)
	}
	if got != target {
		t.Errorf("Base() = %q, want the link's target %q", got, target)
	}
}

func TestBaseDefaultPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		// cache is the cache root the scripts would use, relative to HOME
		// when relToHome.
		cache     string
		relToHome bool
	}{
		{name: "SANDBOX_OPERATOR_CACHE", env: map[string]string{"SANDBOX_OPERATOR_CACHE": "@/custom"}, cache: "@/custom"},
		{name: "XDG_CACHE_HOME", env: map[string]string{"XDG_CACHE_HOME": "@/xdg"}, cache: "@/xdg/sandbox-operator"},
		{name: "HOME", cache: "@/home/.cache/sandbox-operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			base := t.TempDir()
			at := func(s string) string { return strings.Replace(s, "@", base, 1) }
			t.Setenv("HOME", at("@/home"))
			for k, v := range tc.env {
				t.Setenv(k, at(v))
			}
			cache := at(tc.cache)
			link := filepath.Join(cache, "rootfs", "base")

			if p, err := rootfs.DefaultPath(); err != nil || p != link {
				t.Fatalf("DefaultPath() = %q, %v; want %q", p, err, link)
			}
			_, err := rootfs.Base()
			wantActionable(t, err, link, "does not exist")

			target := tree(t, true)
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			got, err := rootfs.Base()
			if err != nil {
				t.Fatal(err)
			}
			if got != target {
				t.Errorf("Base() = %q, want %q", got, target)
			}
		})
	}
}

func TestBaseMissing(t *testing.T) {
	isolate(t)
	missing := filepath.Join(t.TempDir(), "nope")
	t.Setenv(rootfs.EnvVar, missing)
	_, err := rootfs.Base()
	wantActionable(t, err, missing, rootfs.EnvVar, "does not exist")
}

func TestBaseIncomplete(t *testing.T) {
	// A tree without the marker (an interrupted copy, or a directory named
	// by mistake) is refused rather than booted half-made.
	isolate(t)
	dir := tree(t, false)
	t.Setenv(rootfs.EnvVar, dir)
	_, err := rootfs.Base()
	wantActionable(t, err, dir, "incomplete", rootfs.Marker)
}

func TestBaseNotADirectory(t *testing.T) {
	isolate(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(rootfs.EnvVar, file)
	_, err := rootfs.Base()
	wantActionable(t, err, file, "not a directory")
}

func TestBaseNoHome(t *testing.T) {
	isolate(t)
	t.Setenv("HOME", "")
	_, err := rootfs.Base()
	wantActionable(t, err, rootfs.EnvVar, "HOME")
}

// TestBaseProvisioned checks the real tree when the build provides one
// (tools/bazel passes SANDBOX_OPERATOR_BASE_ROOTFS to tests): complete, with
// the user and the tools the template promises.
func TestBaseProvisioned(t *testing.T) {
	if os.Getenv(rootfs.EnvVar) == "" {
		t.Skip(rootfs.EnvVar + " is not set; tools/bazel sets it to the provisioned tree")
	}
	dir, err := rootfs.Base()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"bin/bash", "usr/bin/python3", "usr/bin/curl", "usr/bin/git", "usr/bin/ps", "bin/ip", "etc/hosts", "etc/resolv.conf", "etc/hostname"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the base tree lacks %s: %v", f, err)
		}
	}
	passwd, err := os.ReadFile(filepath.Join(dir, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(passwd), "\nuser:x:1000:1000::/home/user:/bin/bash\n") {
		t.Errorf("etc/passwd has no user 1000 with home /home/user and shell /bin/bash:\n%s", passwd)
	}
	if fi, err := os.Stat(filepath.Join(dir, "home", "user")); err != nil || !fi.IsDir() {
		t.Errorf("home/user is not a directory: %v", err)
	}
}
