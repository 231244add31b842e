package backend

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cocoonstack/sandbox-operator/src/namehold"
)

// recordedHolds stands in for the cross-replica holds (src/namehold runs
// the real ones against a kube-apiserver): it answers Acquire with err and
// records what the Service asked, to check when the Service asks.
type recordedHolds struct {
	mu    sync.Mutex
	err   error
	calls []string
}

func (h *recordedHolds) record(op, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, op+" "+key)
}

func (h *recordedHolds) Acquire(_ context.Context, key string) error {
	h.record("acquire", key)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}
func (h *recordedHolds) Settle(key string)  { h.record("settle", key) }
func (h *recordedHolds) Release(key string) { h.record("release", key) }
func (h *recordedHolds) Free(_ context.Context, key string) error {
	h.record("free", key)
	return nil
}

func (h *recordedHolds) saw(call string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.calls, call)
}

func TestCreateRefusedWithoutTheNameHold(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status func(error) bool
	}{
		{"held by another replica", namehold.ErrHeld, apierrors.IsAlreadyExists},
		{"too many in flight", namehold.ErrFull, apierrors.IsTooManyRequests},
		{"the API is down", errors.New("connection refused"), apierrors.IsServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holds := &recordedHolds{err: tc.err}
			e := newEnv(t, envOptions{cfg: Config{Names: holds}})
			before := e.claims()
			_, err := e.svc.Create(context.Background(), newSandbox("team", "web", "base"))
			if !tc.status(err) {
				t.Fatalf("Create = %v", err)
			}
			if got := e.claims(); got != before {
				t.Fatalf("a create without the hold claimed: %d claims, had %d", got, before)
			}
			if _, err := e.svc.Get(context.Background(), "team", "web"); !apierrors.IsNotFound(err) {
				t.Fatalf("a refused create is visible: %v", err)
			}
		})
	}
}

func TestNameHoldLifecycle(t *testing.T) {
	holds := &recordedHolds{}
	e := newEnv(t, envOptions{nodes: 1, maxClaims: []int{1}, cfg: Config{Names: holds}})
	ctx := context.Background()

	if _, err := e.svc.Create(ctx, newSandbox("team", "web", "base")); err != nil {
		t.Fatal(err)
	}
	if !holds.saw("acquire team/web") || holds.saw("release team/web") || holds.saw("settle team/web") {
		t.Fatalf("after a create: %v, want the hold acquired and kept", holds.calls)
	}
	// The node is full: the claim fails and gives the hold back.
	if _, err := e.svc.Create(ctx, newSandbox("team", "second", "base")); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("Create on a full node = %v", err)
	}
	if !holds.saw("release team/second") {
		t.Fatalf("a failed claim kept its hold: %v", holds.calls)
	}
	// Once the inventory shows the sandbox the hold may lapse.
	e.publish()
	if !holds.saw("settle team/web") {
		t.Fatalf("the published create's hold is still renewed: %v", holds.calls)
	}
	if _, err := e.svc.Delete(ctx, "team", "web"); err != nil {
		t.Fatal(err)
	}
	if !holds.saw("free team/web") {
		t.Fatalf("a delete did not free the name: %v", holds.calls)
	}
}
