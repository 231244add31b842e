//go:build linux

package isolate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// hostUID is the host uid a process of the sandbox runs as (its real uid,
// from /proc/<pid>/status on the host).
func hostUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			uid, _ := strconv.Atoi(f[1])
			return uid
		}
	}
	t.Fatalf("no Uid line for pid %d", pid)
	return 0
}

// TestEachSandboxIsItsOwnUserNamespace: run as root, two sandboxes map
// their ids to distinct host ranges (root inside is neither the host's
// root nor the other sandbox's), yet files keep their ordinary owners:
// the root filesystem shows root and user inside, and what the sandbox's
// user writes is stored as that user's uid, so a saved layer starts
// another sandbox (another range) unchanged.
func TestEachSandboxIsItsOwnUserNamespace(t *testing.T) {
	requireRoot(t)
	rt := newRuntime(t, true)
	a := start(t, rt, "nsa", nil)
	b := start(t, rt, "nsb", nil)
	mustOut(t, a, request{Op: "tag"})
	mustOut(t, b, request{Op: "tag"})

	ua, ub := hostUID(t, a.PID()), hostUID(t, b.PID())
	if ua == 0 || ub == 0 || ua == ub {
		t.Fatalf("root inside is host uid %d in one sandbox and %d in the other; want two distinct, non-root ids", ua, ub)
	}
	if d := ua - ub; d > -65536 && d < 65536 {
		t.Errorf("the two sandboxes' id ranges overlap: roots at %d and %d", ua, ub)
	}
	maps := mustOut(t, a, request{Op: "read", Path: "/proc/self/uid_map"})
	if f := strings.Fields(maps); len(f) != 3 || f[0] != "0" || f[1] != strconv.Itoa(ua) || f[2] != "65536" {
		t.Errorf("uid_map inside = %q; want 0 %d 65536", maps, ua)
	}

	// Inside: the root filesystem's owners, and the user's own files.
	out := mustOut(t, a, request{Op: "id"})
	if !strings.HasPrefix(out, "uid=1000 gid=1000 cwd=/home/user") {
		t.Fatalf("a command as the sandbox's user: %q", out)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(a.LayerDir(), "home", "user", "from-user.txt"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 1000 || st.Gid != 1000 {
		t.Errorf("the user's file is stored as %d:%d on disk; want 1000:1000", st.Uid, st.Gid)
	}
	mustOut(t, a, request{Op: "write", Path: "/etc/from-root", Data: "root"})
	if err := syscall.Stat(filepath.Join(a.LayerDir(), "etc", "from-root"), &st); err != nil || st.Uid != 0 {
		t.Errorf("root's file is stored as uid %d (%v); want 0", st.Uid, err)
	}

	// A layer saved from a goes on in a sandbox of another range.
	saved := filepath.Join(t.TempDir(), "saved")
	if err := a.SaveLayer(saved); err != nil {
		t.Fatal(err)
	}
	c := start(t, rt, "nsc", func(s *isolate.Spec) { s.From = saved })
	if got := mustOut(t, c, request{Op: "helper", Data: "stat", Path: "/home/user/from-user.txt"}); got != "1000:1000" {
		t.Errorf("the saved file inside the next sandbox is owned by %q; want 1000:1000", got)
	}
}

func init() {
	limitHelpers["stat"] = func(path string) {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%d:%d\n", st.Uid, st.Gid)
	}
}

// TestOOMScores: the program (and what it starts) is the likelier OOM
// victim than the init, and setting the scores touched no process outside
// the sandbox.
func TestOOMScores(t *testing.T) {
	requireRoot(t)
	before := hostOOMScores(t)
	sb := rootSandbox(t, "oom", nil)
	pids := cgroupPIDs(t, sb)
	scores := map[string]string{}
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", pid, "oom_score_adj"))
		if err != nil {
			t.Fatal(err)
		}
		scores[pid] = strings.TrimSpace(string(b))
	}
	initPID := strconv.Itoa(sb.PID())
	if s := scores[initPID]; s != "0" && s != "-1000" {
		t.Errorf("the init's OOM score is %s; want 0 or -1000", s)
	}
	for pid, s := range scores {
		if pid != initPID && s != "500" {
			t.Errorf("sandbox process %s has OOM score %s; want 500", pid, s)
		}
	}
	for pid, s := range hostOOMScores(t) {
		if old, ok := before[pid]; ok && old != s {
			t.Errorf("host process %s's OOM score changed from %s to %s", pid, old, s)
		}
	}
}

func hostOOMScores(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "oom_score_adj")); err == nil {
			out[e.Name()] = strings.TrimSpace(string(b))
		}
	}
	return out
}
