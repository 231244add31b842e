package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// blockingRunner runs each build until its name's channel says how it
// ends.
type blockingRunner map[string]chan error

func (r blockingRunner) run(ctx context.Context, b *build.Build) error {
	select {
	case err := <-r[b.Name]:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func startBuild(t *testing.T, m *build.Manager, name string) *build.Build {
	t.Helper()
	b, err := m.Register(build.Spec{Namespace: "team", Name: name, TemplateID: build.TemplateID("team", name)})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(b, "definition"); err != nil && !errors.Is(err, build.ErrQueued) {
		t.Fatal(err)
	}
	return b
}

// gaugesAre waits until the queue and running gauges read queued and
// running: a build's slot frees just after its end is told.
func gaugesAre(t *testing.T, reg prometheus.Gatherer, queued, running int) {
	t.Helper()
	want := fmt.Sprintf(`
# HELP sandbox_operator_build_queue_length Started template builds waiting for a build slot in this process.
# TYPE sandbox_operator_build_queue_length gauge
sandbox_operator_build_queue_length %d
# HELP sandbox_operator_builds_running Template builds running in this process.
# TYPE sandbox_operator_builds_running gauge
sandbox_operator_builds_running %d
`, queued, running)
	poll.UntilNil(t, fmt.Sprintf("%d builds queued and %d running", queued, running), func() error {
		return testutil.GatherAndCompare(reg, strings.NewReader(want), "sandbox_operator_build_queue_length", "sandbox_operator_builds_running")
	})
}

// TestBuildsCountedByOutcome drives a real build manager with one slot
// through a build that succeeds, one that fails and one canceled while
// queued: each is counted and timed under its outcome, and the queue and
// running gauges follow the slot.
func TestBuildsCountedByOutcome(t *testing.T) {
	reg := metrics.NewRegistry()
	builds := metrics.NewBuilds(reg)
	runner := blockingRunner{"ok": make(chan error, 1), "failing": make(chan error, 1), "dropped": make(chan error, 1)}
	m := build.NewManager(build.Config{Parallel: 1, Observer: builds}, runner.run)
	defer m.Close()

	startBuild(t, m, "ok")
	startBuild(t, m, "failing")
	dropped := startBuild(t, m, "dropped")
	gaugesAre(t, reg, 2, 1)
	<-m.Cancel("team", dropped.TemplateID)
	gaugesAre(t, reg, 1, 1)
	runner["ok"] <- nil
	gaugesAre(t, reg, 0, 1)
	runner["failing"] <- &build.Failure{Step: "1", Message: "command exited with code 2"}
	gaugesAre(t, reg, 0, 0)

	want := `
# HELP sandbox_operator_builds_total Template builds that were started (handed their definition) and ended, by outcome: ready, error (a step failed, the timeout passed, or the server stopped), canceled (the template was deleted).
# TYPE sandbox_operator_builds_total counter
sandbox_operator_builds_total{outcome="canceled"} 1
sandbox_operator_builds_total{outcome="error"} 1
sandbox_operator_builds_total{outcome="ready"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sandbox_operator_builds_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "sandbox_operator_build_duration_seconds"); err != nil || n != 3 {
		t.Fatalf("build durations: %d series (%v), want one per outcome: 3", n, err)
	}
}

// TestBuildSeriesStayFlat: however many builds of however many templates
// end, the series are the three outcomes' and "other" for an outcome the
// metrics do not know; no label carries a build's or template's id.
func TestBuildSeriesStayFlat(t *testing.T) {
	reg := metrics.NewRegistry()
	builds := metrics.NewBuilds(reg)
	before, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		builds.ObserveBuild(build.Outcomes[i%len(build.Outcomes)], time.Duration(i)*time.Second)
		builds.ObserveSlots(i, i%4)
	}
	builds.ObserveBuild(build.Outcome("exploded"), time.Second)
	after, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	// The unknown outcome adds "other"'s counter and histogram; the
	// known outcomes were series from the start.
	if after != before+2 {
		t.Fatalf("series went from %d to %d over 1000 builds, want %d", before, after, before+2)
	}
	want := `
# HELP sandbox_operator_builds_total Template builds that were started (handed their definition) and ended, by outcome: ready, error (a step failed, the timeout passed, or the server stopped), canceled (the template was deleted).
# TYPE sandbox_operator_builds_total counter
sandbox_operator_builds_total{outcome="canceled"} 333
sandbox_operator_builds_total{outcome="error"} 333
sandbox_operator_builds_total{outcome="other"} 1
sandbox_operator_builds_total{outcome="ready"} 334
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sandbox_operator_builds_total"); err != nil {
		t.Fatal(err)
	}
	gaugesAre(t, reg, 999, 3)
}
