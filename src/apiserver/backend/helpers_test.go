package backend

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
	"github.com/cocoonstack/sandbox-operator/src/internal/fleettest"
	"github.com/cocoonstack/sandbox-operator/src/internal/inventorytest"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

const rootToken = "fleet-root-token"

var baseKey = sandbox.PoolKey{Template: "base", Net: "none", Size: "small"}

// env is a simulated fleet, an inventory fed from its snapshots through a
// real informer, and a Service over both, all on one fake clock.
type env struct {
	t     *testing.T
	clk   *clocktesting.FakeClock
	fleet *simfleet.Fleet
	inv   *inventorytest.Harness
	svc   *Service
}

type envOptions struct {
	nodes     int
	warm      []int // per node; default 2 each
	maxClaims []int // per node; default unlimited
	cfg       Config
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	if o.nodes == 0 {
		o.nodes = 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f, err := simfleet.Start(ctx, simfleet.Config{
		Nodes:     o.nodes,
		RootToken: rootToken,
		EchoPorts: []int{},
		Customize: func(i int, c *node.Config) {
			warm := 2
			if i < len(o.warm) {
				warm = o.warm[i]
			}
			c.Pools = []sandboxd.PoolSpec{{Template: baseKey.Template, Net: baseKey.Net, Size: baseKey.Size, Warm: warm}}
			if i < len(o.maxClaims) {
				c.MaxClaims = o.maxClaims[i]
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	for i, n := range f.Nodes() {
		want := 2
		if i < len(o.warm) {
			want = o.warm[i]
		}
		if err := n.WaitWarm(ctx, baseKey, want); err != nil {
			t.Fatalf("node %d never warmed: %v", i, err)
		}
	}

	clk := clocktesting.NewFakeClock(time.Now())
	h := inventorytest.Start(t, inventorytest.Options{Clock: clk, StaleAfter: 90 * time.Second})
	cfg := o.cfg
	cfg.Inventory, cfg.Token, cfg.Clock = h.Store, rootToken, clk
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	e := &env{t: t, clk: clk, fleet: f, inv: h, svc: svc}
	e.publish()
	return e
}

// publish makes every live node publish its snapshot stamped with the
// current fake time, and waits until the store shows every one.
func (e *env) publish() {
	e.t.Helper()
	// Each publish carries a new stamp (stamps have second precision), so
	// waiting for it cannot be satisfied by the previous one.
	e.clk.Step(time.Second)
	now := e.clk.Now()
	want := map[string]int{}
	for i, n := range e.fleet.Nodes() {
		if !e.fleet.Alive(i) {
			continue
		}
		snap := n.Snapshot()
		want[snap.Node] = len(snap.Entries)
		e.inv.Publish(inventorytest.FromSnapshot(snap, now))
	}
	e.inv.Eventually("the inventory to show the publish", func() bool {
		for name, entries := range want {
			n, ok := e.inv.Store.Node(name)
			if !ok || !n.PublishedAt.Equal(now.Truncate(time.Second)) || n.Entries != entries {
				return false
			}
		}
		return true
	})
}

// claims is how many claims the fleet has granted in all, by any path.
func (e *env) claims() int64 {
	var total int64
	for _, n := range e.fleet.Nodes() {
		c := n.Counters()
		total += c.ClaimsWarm + c.ClaimsClone + c.ClaimsCold + c.ForkChildren
	}
	return total
}

// entry finds a live claim on the fleet by claim ref.
func (e *env) entry(ref string) (node.EntrySnapshot, string, bool) {
	for _, n := range e.fleet.Nodes() {
		for _, en := range n.Snapshot().Entries {
			if en.ClaimRef == ref {
				return en, n.Name(), true
			}
		}
	}
	return node.EntrySnapshot{}, "", false
}

func newSandbox(namespace, name, image string) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{}
	sb.Namespace, sb.Name = namespace, name
	if image != "" {
		sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Image: image}}
	}
	return sb
}

func timePtr(t time.Time) *metav1.Time { mt := metav1.NewTime(t); return &mt }

func condition(sb *agentsv1beta1.Sandbox, typ agentsv1beta1.ConditionType) *metav1.Condition {
	for i := range sb.Status.Conditions {
		if sb.Status.Conditions[i].Type == string(typ) {
			return &sb.Status.Conditions[i]
		}
	}
	return nil
}

// storeOnly is a Service over an inventory harness without a fleet, for
// tests that drive the inventory by hand.
func storeOnly(t *testing.T, cfg Config) (*Service, *inventorytest.Harness, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	h := inventorytest.Start(t, inventorytest.Options{Clock: clk, StaleAfter: 90 * time.Second})
	cfg.Inventory, cfg.Clock = h.Store, clk
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	return svc, h, clk
}

func TestConformance(t *testing.T) {
	fleettest.Run(t, func(t *testing.T, spec fleettest.Spec) fleettest.Harness {
		warm := make([]int, spec.Nodes)
		for i := range warm {
			warm[i] = spec.Warm
		}
		e := newEnv(t, envOptions{nodes: spec.Nodes, warm: warm, cfg: Config{Rand: spec.Rand}})
		return fleettest.Harness{Fleet: e.svc.Fleet(), Key: baseKey, Owners: func() map[string]int {
			owners, err := fleettest.CountOwners(context.Background(), e.fleet.Addrs(), rootToken)
			if err != nil {
				t.Fatal(err)
			}
			return owners
		}}
	})
}

// The Service is the registry's Backend; the registry does not know it.
var _ registry.Backend = (*Service)(nil)
