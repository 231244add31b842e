package build_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// gate is a Runner whose builds block until released, so a test controls
// what runs when.
type gate struct {
	mu      sync.Mutex
	started []string
	release map[string]chan error
}

func newGate() *gate { return &gate{release: map[string]chan error{}} }

func (g *gate) ch(name string) chan error {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.release[name]
	if c == nil {
		c = make(chan error, 1)
		g.release[name] = c
	}
	return c
}

func (g *gate) run(ctx context.Context, b *build.Build) error {
	g.mu.Lock()
	g.started = append(g.started, b.Name)
	g.mu.Unlock()
	b.Log("1", build.LevelInfo, "started "+b.Name)
	select {
	case err := <-g.ch(b.Name):
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitStarted waits until n builds have entered the runner.
func (g *gate) waitStarted(t *testing.T, n int) {
	t.Helper()
	poll.UntilNil(t, fmt.Sprintf("%d builds to enter the runner", n), func() error {
		if started := g.startedNames(); len(started) < n {
			return fmt.Errorf("builds started: %v", started)
		}
		return nil
	})
}

func (g *gate) startedNames() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.started...)
}

func register(t *testing.T, m *build.Manager, name string) *build.Build {
	t.Helper()
	b, err := m.Register(build.Spec{Namespace: "ns", Name: name, TemplateID: build.TemplateID("ns", name)})
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	return b
}

func registerIn(t *testing.T, m *build.Manager, namespace, name string) *build.Build {
	t.Helper()
	b, err := m.Register(build.Spec{Namespace: namespace, Name: name, TemplateID: build.TemplateID(namespace, name)})
	if err != nil {
		t.Fatalf("register %s/%s: %v", namespace, name, err)
	}
	return b
}

func waitStatus(t *testing.T, b *build.Build, want build.Status) {
	t.Helper()
	poll.UntilNil(t, fmt.Sprintf("build %s to be %s", b.Name, want), func() error {
		if got := b.Status(); got != want {
			return fmt.Errorf("build %s is %s", b.Name, got)
		}
		return nil
	})
}

// The third concurrent start answers ErrQueued, waits, and runs once a
// slot frees; the order of starts is kept.
func TestParallelBoundQueues(t *testing.T) {
	g := newGate()
	m := build.NewManager(build.Config{Parallel: 2}, g.run)
	defer m.Close()
	// Two namespaces: one alone would hold at most one of the two slots.
	a, b, c := register(t, m, "a"), registerIn(t, m, "other", "b"), register(t, m, "c")
	for _, x := range []*build.Build{a, b} {
		if err := m.Start(x, "def"); err != nil {
			t.Fatalf("start %s: %v", x.Name, err)
		}
	}
	if err := m.Start(c, "def"); !errors.Is(err, build.ErrQueued) {
		t.Fatalf("third start: %v, want ErrQueued", err)
	}
	if err := m.Start(c, "def"); !errors.Is(err, build.ErrQueued) {
		t.Fatalf("repeated start of a queued build: %v, want ErrQueued", err)
	}
	waitStatus(t, a, build.Building)
	waitStatus(t, b, build.Building)
	if c.Status() != build.Waiting {
		t.Fatalf("queued build is %s, want waiting", c.Status())
	}
	// A build is Building before its runner is entered: wait until both
	// runners hold their slots, so the recorded order means something.
	g.waitStarted(t, 2)
	g.ch("a") <- nil
	waitStatus(t, a, build.Ready)
	waitStatus(t, c, build.Building)
	if err := m.Start(a, "other"); err != nil || a.Definition() != "def" || a.Status() != build.Ready {
		t.Fatalf("a repeated start: %v, definition %v, status %s; want nil and nothing changed", err, a.Definition(), a.Status())
	}
	g.ch("b") <- nil
	g.ch("c") <- nil
	waitStatus(t, c, build.Ready)
	// a and b run at once; c only after one of them finished.
	if got := g.startedNames(); len(got) != 3 || got[2] != "c" {
		t.Fatalf("run order %v, want c last", got)
	}
}

func TestOneBuildPerTemplate(t *testing.T) {
	g := newGate()
	m := build.NewManager(build.Config{}, g.run)
	defer m.Close()
	first := register(t, m, "a")
	if _, err := m.Register(build.Spec{Namespace: "ns", Name: "a", TemplateID: first.TemplateID}); !errors.Is(err, build.ErrBusy) {
		t.Fatalf("second build of a template in progress: %v, want ErrBusy", err)
	}
	// Another namespace's template of the same name is another template.
	if _, err := m.Register(build.Spec{Namespace: "other", Name: "a", TemplateID: build.TemplateID("other", "a")}); err != nil {
		t.Fatalf("same name in another namespace: %v", err)
	}
	if err := m.Start(first, "def"); err != nil {
		t.Fatal(err)
	}
	g.ch("a") <- nil
	waitStatus(t, first, build.Ready)
	if _, err := m.Register(build.Spec{Namespace: "ns", Name: "a", TemplateID: first.TemplateID}); err != nil {
		t.Fatalf("rebuild after the first finished: %v", err)
	}
}

// The log keeps at most LogLines lines and counts the rest; a failure's
// reason carries the failing step's last lines even past the bound.
func TestLogBoundAndFailureReason(t *testing.T) {
	run := func(_ context.Context, b *build.Build) error {
		for i := range 50 {
			b.Log("2", build.LevelInfo, fmt.Sprintf("line %d", i))
		}
		b.Log("3", build.LevelWarn, "boom")
		return &build.Failure{Step: "3", Message: "command exited with code 7"}
	}
	m := build.NewManager(build.Config{LogLines: 10}, run)
	defer m.Close()
	b := register(t, m, "a")
	if err := m.Start(b, "def"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, b, build.Error)
	v := b.View(0, 0)
	if len(v.Logs) != 10 || v.Dropped != 41 {
		t.Fatalf("kept %d lines, dropped %d; want 10 and 41", len(v.Logs), v.Dropped)
	}
	if v.Reason == nil || v.Reason.Step != "3" || v.Reason.Message != "command exited with code 7" {
		t.Fatalf("reason %+v", v.Reason)
	}
	if len(v.Reason.Logs) != 1 || v.Reason.Logs[0].Message != "boom" {
		t.Fatalf("reason logs %+v, want the failing step's line", v.Reason.Logs)
	}
	if page := b.View(8, 5); len(page.Logs) != 2 || page.Logs[0].Message != "line 8" {
		t.Fatalf("page from offset 8: %+v", page.Logs)
	}
}

func TestTimeoutFailsTheBuild(t *testing.T) {
	g := newGate()
	m := build.NewManager(build.Config{Timeout: 50 * time.Millisecond}, g.run)
	defer m.Close()
	b := register(t, m, "slow")
	if err := m.Start(b, "def"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, b, build.Error)
	if r := b.View(0, 0).Reason; r == nil || !strings.Contains(r.Message, "did not finish within 50ms") {
		t.Fatalf("reason %+v", r)
	}
}

func TestCloseFailsQueuedBuilds(t *testing.T) {
	g := newGate()
	m := build.NewManager(build.Config{Parallel: 1}, g.run)
	running, queued := register(t, m, "a"), register(t, m, "b")
	if err := m.Start(running, "def"); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(queued, "def"); !errors.Is(err, build.ErrQueued) {
		t.Fatal(err)
	}
	waitStatus(t, running, build.Building)
	m.Close()
	if running.Status() != build.Error || queued.Status() != build.Error {
		t.Fatalf("after Close: running %s, queued %s; want both error", running.Status(), queued.Status())
	}
	if len(g.startedNames()) != 1 {
		t.Fatalf("the queued build ran: %v", g.startedNames())
	}
}

func TestNamesAndIDs(t *testing.T) {
	id := build.TemplateID("ns", "my-template")
	if len(id) != 20 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz234567") != "" {
		t.Fatalf("template id %q is not 20 lowercase letters and digits", id)
	}
	if id == build.TemplateID("other", "my-template") || id != build.TemplateID("ns", "my-template") {
		t.Fatal("template ids must be stable per namespace and differ across namespaces")
	}
	for _, tag := range []string{build.DefaultTag, "v1.2"} {
		ns, name, got, ok := build.ParsePublished(build.PublishedName("ns", "my-template", tag))
		if !ok || ns != "ns" || name != "my-template" || got != tag {
			t.Fatalf("round trip of tag %q: %q %q %q %v", tag, ns, name, got, ok)
		}
	}
	if build.PublishedName("ns", "t", build.DefaultTag) != "e2b/ns/t" {
		t.Fatal("the default tag must keep the bare published name, which earlier builds used")
	}
	if base, tag := build.SplitRef("t:v1"); base != "t" || tag != "v1" {
		t.Fatalf("SplitRef(t:v1) = %q %q", base, tag)
	}
	if base, tag := build.SplitRef("t"); base != "t" || tag != build.DefaultTag {
		t.Fatalf("SplitRef(t) = %q %q", base, tag)
	}
	if build.CheckPublished("ns", strings.Repeat("a", 50), "v1") != nil {
		t.Fatal("a published name of 60 characters must be taken")
	}
	if build.CheckPublished("a-long-namespace", strings.Repeat("a", 50), "v1") == nil {
		t.Fatal("a published name over sandboxd's 63 characters must be refused")
	}
	for _, bad := range []string{"ubuntu:24.04", "e2b/", "e2b/ns", "e2b//x", "e2b/ns/UPPER", "e2b/ns/a/b", "e2b/ns/t:default", "e2b/ns/t:BAD", "e2b/ns/t:"} {
		if _, _, _, ok := build.ParsePublished(bad); ok {
			t.Errorf("ParsePublished(%q) accepted a name the surface never publishes", bad)
		}
	}
	for _, bad := range []string{"", "-x", "A", "a b", "a/b", strings.Repeat("a", 51), "a..b"} {
		if build.ValidName(bad) == nil {
			t.Errorf("ValidName(%q) accepted", bad)
		}
	}
	if build.PublishedBuildID("sha256:a") == build.PublishedBuildID("sha256:b") {
		t.Fatal("published build ids must follow the digest")
	}
}
