package warmpool_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/src/warmpool"
)

func newScheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := extv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWarmPoolDriver starts one cluster (most of the cost) and runs each
// scenario against it in its own namespace, lease namespace and fleet.
func TestWarmPoolDriver(t *testing.T) {
	e := startEnv(t)
	t.Run("PlacementScaleJoinStale", func(t *testing.T) { testPlacement(t, e) })
	t.Run("LeaderElection", func(t *testing.T) { testLeaderElection(t, e) })
}

func hasEvent(e *env, ns, pool, reason, contains string) (bool, string) {
	var list eventsv1.EventList
	if err := e.kube.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return false, err.Error()
	}
	var seen []string
	for _, ev := range list.Items {
		if ev.Regarding.Name != pool {
			continue
		}
		seen = append(seen, ev.Reason+": "+ev.Note)
		if ev.Reason == reason && strings.Contains(ev.Note, contains) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("events of %s: %q", pool, seen)
}

func testPlacement(t *testing.T, e *env) {
	ns := e.namespace(t, "placement")
	a := e.startFleet(t, "a-", 3, token)
	d, _ := e.startDriver(t, ns, "only", token)
	eventually(t, "the driver leads", func() (bool, string) { return d.Leading(), "not leading" })

	key := keyOf("base:24.04")
	e.apply(t, ns, "base", key.Template, 7)
	eventually(t, "7 replicas over 3 nodes", func() (bool, string) { return placedAsExpected(key, 7, a) })
	eventually(t, "status reports 7 warm", func() (bool, string) {
		st := e.pool(t, ns, "base").Status
		return st.Replicas == 7 && st.ReadyReplicas == 7, fmt.Sprintf("status %+v", st)
	})
	eventually(t, "a Placed event", func() (bool, string) {
		return hasEvent(e, ns, "base", warmpool.ReasonPlaced, "7 replicas over 3 nodes")
	})

	e.scale(t, ns, "base", 12)
	eventually(t, "scaled up to 12", func() (bool, string) { return placedAsExpected(key, 12, a) })
	e.scale(t, ns, "base", 2)
	eventually(t, "scaled down to 2", func() (bool, string) { return placedAsExpected(key, 2, a) })
	eventually(t, "status follows the scale-down", func() (bool, string) {
		st := e.pool(t, ns, "base").Status
		return st.Replicas == 2 && st.ReadyReplicas == 2, fmt.Sprintf("status %+v", st)
	})

	// A second pool on the same key adds to the same node pool, and each
	// pool reports its proportional part.
	e.createPool(t, ns, "base-too", "base", 4)
	eventually(t, "two pools of one key sum to 6", func() (bool, string) { return placedAsExpected(key, 6, a) })
	eventually(t, "shares of the key's warm count", func() (bool, string) {
		s1, s2 := e.pool(t, ns, "base").Status, e.pool(t, ns, "base-too").Status
		return s1.ReadyReplicas == 2 && s2.ReadyReplicas == 4, fmt.Sprintf("%+v %+v", s1, s2)
	})
	if err := e.kube.Delete(context.Background(), &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "base-too"}}); err != nil {
		t.Fatal(err)
	}

	e.scale(t, ns, "base", 9)
	b := e.startFleet(t, "b-", 1, token)
	eventually(t, "a joining node takes its share", func() (bool, string) { return placedAsExpected(key, 9, a, b) })

	if err := a.Kill(0); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a stale node's share moves to the others", func() (bool, string) { return placedAsExpected(key, 9, a, b) })
	eventually(t, "the stale node is out of the fleet view", func() (bool, string) {
		_, ok := e.store.Node(a.Node(0).Name())
		return !ok, "still fresh"
	})
	eventually(t, "placement without the stale node", func() (bool, string) { return placedAsExpected(key, 9, a, b) })

	e.createPool(t, ns, "orphan", "no-such-template", 3)
	eventually(t, "a TemplateNotFound event", func() (bool, string) {
		return hasEvent(e, ns, "orphan", warmpool.ReasonTemplateNotFound, "no-such-template")
	})
}

// waitRenewals waits until holder has renewed the warm-pool Lease in ns
// renewals times, and fails the test if meanwhile the Lease names anyone
// else or changes hands (its leaseTransitions move, which also catches a
// change and a change back between two reads). A renewal is the election's
// own clock: the other candidates try to acquire at the same retry period
// the holder renews at, so renewals with the holder unchanged show their
// tries failed, where a fixed sleep would only have let time pass.
func waitRenewals(t *testing.T, e *env, ns, holder string, renewals int) {
	t.Helper()
	var (
		started     bool // the first read is the baseline
		transitions int32
		last        metav1.MicroTime
		seen        int
	)
	poll.UntilNil(t, fmt.Sprintf("%s to renew the lease %d times", holder, renewals), func() error {
		var lease coordinationv1.Lease
		if err := e.kube.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: warmpool.LeaseName}, &lease); err != nil {
			return err
		}
		h, tr, renewed := "", int32(0), metav1.MicroTime{}
		if lease.Spec.HolderIdentity != nil {
			h = *lease.Spec.HolderIdentity
		}
		if lease.Spec.LeaseTransitions != nil {
			tr = *lease.Spec.LeaseTransitions
		}
		if lease.Spec.RenewTime != nil {
			renewed = *lease.Spec.RenewTime
		}
		if h != holder {
			t.Fatalf("the lease moved from %s to %q without a failure", holder, h)
		}
		switch {
		case !started:
			started, transitions, last = true, tr, renewed
		case tr != transitions:
			t.Fatalf("the lease changed hands (leaseTransitions %d → %d) without a failure", transitions, tr)
		case !renewed.Equal(&last):
			last = renewed
			seen++
		}
		if seen < renewals {
			return fmt.Errorf("renewed %d times", seen)
		}
		return nil
	})
}

func leaseHolder(e *env, ns string) string {
	var lease coordinationv1.Lease
	if err := e.kube.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: warmpool.LeaseName}, &lease); err != nil {
		return ""
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

func testLeaderElection(t *testing.T, e *env) {
	ns := e.namespace(t, "election")
	f := e.startFleet(t, "c-", 2, token)
	key := keyOf("python:3.12")
	e.apply(t, ns, "py", key.Template, 5)

	one, stopOne := e.startDriver(t, ns, "replica-one", token)
	two, stopTwo := e.startDriver(t, ns, "replica-two", token)
	eventually(t, "one replica leads", func() (bool, string) {
		return one.Leading() != two.Leading(), fmt.Sprintf("one=%v two=%v", one.Leading(), two.Leading())
	})
	leader, follower, stopLeader := one, two, stopOne
	if two.Leading() {
		leader, follower, stopLeader = two, one, stopTwo
	}
	eventually(t, "the lease names the leader", func() (bool, string) {
		h := leaseHolder(e, ns)
		return h == leader.Identity(), "holder " + h
	})
	eventually(t, "the leader places the pool", func() (bool, string) { return placedAsExpected(key, 5, f) })
	// Over several retry periods the follower never drives: once the
	// leader has renewed the lease a few times (each a retry period in
	// which the follower tried to acquire it and must have failed), the
	// follower does not lead and has written nothing to a node.
	waitRenewals(t, e, ns, leader.Identity(), 4)
	if follower.Leading() || follower.Puts() != 0 {
		t.Fatalf("the follower drives too (leading=%v, puts=%d)", follower.Leading(), follower.Puts())
	}

	stopLeader()
	killed := time.Now()
	eventually(t, "the follower takes over", func() (bool, string) { return follower.Leading(), "not leading" })
	took := time.Since(killed)
	t.Logf("takeover after the leader stopped: %v (lease duration %v)", took.Round(time.Millisecond), leaseDuration)
	if took > leaseDuration+2*retryPeriod {
		t.Errorf("takeover took %v, beyond the lease duration %v", took, leaseDuration)
	}
	e.scale(t, ns, "py", 8)
	eventually(t, "the new leader drives", func() (bool, string) { return placedAsExpected(key, 8, f) })

	// Steal the lease: the leader cannot renew, its driver stops, is
	// rebuilt and waits in the election until the thief's lease expires.
	var lease coordinationv1.Lease
	if err := e.kube.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: warmpool.LeaseName}, &lease); err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity = ptrTo("thief")
	lease.Spec.LeaseDurationSeconds = ptrTo(int32(3))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if err := e.kube.Update(context.Background(), &lease); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the robbed leader stops driving", func() (bool, string) { return !follower.Leading(), "still leading" })
	eventually(t, "the rebuilt driver leads again", func() (bool, string) { return follower.Leading(), "not leading" })
	e.scale(t, ns, "py", 3)
	eventually(t, "the rebuilt driver drives", func() (bool, string) { return placedAsExpected(key, 3, f) })
}

func ptrTo[T any](v T) *T { return &v }
