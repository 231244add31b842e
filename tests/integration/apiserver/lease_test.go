package apiserver_test

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// deadlineSlack is how far a granted deadline may trail the request it
// answers: the server rounds the lease up to whole seconds, the node adds
// it to its own clock a moment later, and the annotation has whole-second
// precision. Generous for a loaded machine; what it guards is a lease that
// ignores the request (minutes off).
const deadlineSlack = 15 * time.Second

// TestLease checks the lease rules end to end: spec.shutdownTime wins and
// is rounded up, the ttl-seconds annotation is honoured, neither gives the
// node's default, and a request that cannot be honoured is refused before
// any node spends a VM.
func TestLease(t *testing.T) {
	e := sharedEnv(t)
	ctx := testContext(t)
	const ns = "lease"

	t.Run("ShutdownTime", func(t *testing.T) {
		// metav1.Time travels with whole seconds, so the request is this.
		want := time.Now().Add(10 * time.Minute).Truncate(time.Second)
		sb := e.mustCreate(ctx, t, newSandbox(ns, "until", withTemplate(templateBase), withShutdownTime(want)))
		got := deadlineOf(t, sb)
		if got.Before(want) || got.Sub(want) > deadlineSlack {
			t.Errorf("deadline %v for shutdownTime %v: want at or just after it (rounded up)", got, want)
		}
		if sb.Spec.ShutdownTime == nil || !sb.Spec.ShutdownTime.Time.Equal(got) {
			t.Errorf("spec.shutdownTime in the answer %v, want the granted deadline %v", sb.Spec.ShutdownTime, got)
		}
	})

	t.Run("TTLSecondsAnnotation", func(t *testing.T) {
		const ttl = 600 * time.Second
		start := time.Now()
		sb := e.mustCreate(ctx, t, newSandbox(ns, "ttl", withTemplate(templateBase), withAnnotation(sandbox.AnnotationTTLSeconds, "600")))
		checkLease(t, deadlineOf(t, sb), start, ttl)
	})

	t.Run("NodeDefault", func(t *testing.T) {
		start := time.Now()
		sb := e.mustCreate(ctx, t, newSandbox(ns, "default", withTemplate(templateBase)))
		checkLease(t, deadlineOf(t, sb), start, sandboxd.DefaultTTL)
	})

	refusals := []struct {
		name string
		opts []sandboxOption
	}{
		{"PastShutdownTime", []sandboxOption{withShutdownTime(time.Now().Add(-time.Minute))}},
		{"MalformedTTL", []sandboxOption{withAnnotation(sandbox.AnnotationTTLSeconds, "ten minutes")}},
		{"NegativeTTL", []sandboxOption{withAnnotation(sandbox.AnnotationTTLSeconds, "-5")}},
		{"MalformedTTLBesideShutdownTime", []sandboxOption{
			withShutdownTime(time.Now().Add(time.Hour)),
			withAnnotation(sandbox.AnnotationTTLSeconds, "1.5"),
		}},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			before := e.claimed()
			opts := append([]sandboxOption{withTemplate(templateBase)}, tc.opts...)
			_, err := e.createSandbox(ctx, t, newSandbox(ns, "refused", opts...))
			if err == nil {
				e.deleteAtCleanup(t, ns, "refused")
			}
			if !apierrors.IsBadRequest(err) {
				t.Errorf("create: %v, want 400", err)
			}
			if after := e.claimed(); after != before {
				t.Errorf("the fleet's claims went from %d to %d: a refused create spent a VM", before, after)
			}
		})
	}
}

// checkLease checks that a deadline granted for a request sent at start is
// start+ttl, within the slack.
func checkLease(t *testing.T, deadline, start time.Time, ttl time.Duration) {
	t.Helper()
	lo := start.Add(ttl).Add(-time.Second) // the annotation drops sub-seconds
	hi := time.Now().Add(ttl).Add(deadlineSlack)
	if deadline.Before(lo) || deadline.After(hi) {
		t.Errorf("deadline %v: want %v after the request, between %v and %v", deadline, ttl, lo, hi)
	}
}
