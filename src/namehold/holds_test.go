package namehold

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// The holds are only as good as the compare-and-set under them, so these
// tests run against a real kube-apiserver and etcd (tests/cluster), shared
// by the package; each test works in a namespace of its own.
var testCluster *cluster.Cluster

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "namehold-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testCluster, err = cluster.StartContext(context.Background(), dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "start the test cluster: %v\n", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if err := testCluster.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop the test cluster: %v\n", err)
		code = max(code, 1)
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// testNamespace makes a namespace for t.
func testNamespace(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("holds-%d", time.Now().UnixNano()%1_000_000_000)
	_, err := testCluster.Clientset().CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// countingConfigMaps counts the updates that reach the real API.
type countingConfigMaps struct {
	corev1client.ConfigMapsGetter
	updates *atomic.Int64
}

func (c countingConfigMaps) ConfigMaps(ns string) corev1client.ConfigMapInterface {
	return countingConfigMapInterface{c.ConfigMapsGetter.ConfigMaps(ns), c.updates}
}

type countingConfigMapInterface struct {
	corev1client.ConfigMapInterface
	updates *atomic.Int64
}

func (c countingConfigMapInterface) Update(ctx context.Context, cm *corev1.ConfigMap, o metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	c.updates.Add(1)
	return c.ConfigMapInterface.Update(ctx, cm, o)
}

// replica is one running Holds; stop ends its writers as a dying replica's
// would end.
type replica struct {
	*Holds
	updates atomic.Int64
	stop    func()
}

func startReplica(t *testing.T, ns, identity string, ttl time.Duration, mutate ...func(*Config)) *replica {
	t.Helper()
	r := &replica{}
	cfg := Config{
		ConfigMaps: countingConfigMaps{testCluster.Clientset().CoreV1(), &r.updates},
		Namespace:  ns, Identity: identity, TTL: ttl,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	r.Holds = h
	r.stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(r.stop)
	return r
}

// sharedClock makes replicas share one fake clock, as replicas share the
// real one, so a test steps the holds' TTL instead of sleeping through it.
func sharedClock(clk *clocktesting.FakeClock) func(*Config) {
	return func(c *Config) { c.Clock = clk }
}

// startReplicaOn starts a replica on clk and waits until its renewal
// ticker is on the clock, so the test's next step reaches it.
func startReplicaOn(t *testing.T, clk *clocktesting.FakeClock, ns, identity string, ttl time.Duration) *replica {
	t.Helper()
	before := clk.Waiters()
	r := startReplica(t, ns, identity, ttl, sharedClock(clk))
	poll.Until(t, identity+"'s renewal ticker", func() bool { return clk.Waiters() > before })
	return r
}

// stepRenewal moves clk on by one renewal period (TTL/3) and waits until
// holder's renewal of key, stamped at the new time, is in the object.
func stepRenewal(t *testing.T, clk *clocktesting.FakeClock, ttl time.Duration, ns, key string, holder *replica) {
	t.Helper()
	clk.Step(ttl / 3)
	want := clk.Now().Add(ttl)
	poll.UntilNil(t, holder.Identity()+" renews "+key, func() error {
		cm, err := testCluster.Clientset().CoreV1().ConfigMaps(ns).Get(context.Background(), ObjectName(shardOf(key)), metav1.GetOptions{})
		if err != nil {
			return err
		}
		e, ok := decodeEntry(cm.Data[dataKey(key)])
		if !ok || e.Holder != holder.Identity() || e.Expires.Before(want) {
			return fmt.Errorf("the entry is %+v (ok %v), want %s's expiring at %v", e, ok, holder.Identity(), want)
		}
		return nil
	})
}

func acquire(t *testing.T, r *replica, key string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.Acquire(ctx, key)
}

func TestOneHolderPerNameAcrossReplicas(t *testing.T) {
	ns := testNamespace(t)
	a := startReplica(t, ns, "replica-a", DefaultTTL)
	b := startReplica(t, ns, "replica-b", DefaultTTL)
	const names = 200
	var wg sync.WaitGroup
	results := make([][2]error, names)
	start := make(chan struct{})
	for i := range names {
		key := fmt.Sprintf("team/race-%d", i)
		for j, r := range []*replica{a, b} {
			wg.Go(func() {
				<-start
				results[i][j] = acquire(t, r, key)
			})
		}
	}
	close(start)
	wg.Wait()
	var wonA, wonB int
	for i, res := range results {
		switch {
		case res[0] == nil && errors.Is(res[1], ErrHeld):
			wonA++
		case res[1] == nil && errors.Is(res[0], ErrHeld):
			wonB++
		default:
			t.Errorf("team/race-%d: replica a got %v, replica b %v; want one hold and one ErrHeld", i, res[0], res[1])
		}
	}
	writes := a.updates.Load() + b.updates.Load()
	t.Logf("%d names raced by two replicas: a won %d, b won %d, in %d writes", names, wonA, wonB, writes)
	// Batching: 400 acquires queued at once go out in a few writes per
	// shard, not one each.
	if writes >= names {
		t.Errorf("%d acquires took %d writes; want them batched into fewer than %d", 2*names, writes, names)
	}
}

func TestReleaseAndFreeGiveTheNameBack(t *testing.T) {
	ns := testNamespace(t)
	const ttl = time.Second
	clk := clocktesting.NewFakeClock(time.Now())
	a := startReplicaOn(t, clk, ns, "replica-a", ttl)
	b := startReplicaOn(t, clk, ns, "replica-b", ttl)

	if err := acquire(t, a, "team/released"); err != nil {
		t.Fatal(err)
	}
	if err := acquire(t, b, "team/released"); !errors.Is(err, ErrHeld) {
		t.Fatalf("b took a name a holds: %v", err)
	}
	// Release gives up only the replica's own hold: b's release of a's
	// hold, queued before b's acquire, changes nothing.
	b.Release("team/released")
	if err := acquire(t, b, "team/released"); !errors.Is(err, ErrHeld) {
		t.Fatalf("b's release dropped a's hold: %v", err)
	}
	a.Release("team/released")
	poll.UntilNil(t, "b takes the name a released", func() error { return acquire(t, b, "team/released") })

	// Free removes whoever holds the name: the sandbox was deleted.
	if err := acquire(t, a, "team/freed"); err != nil {
		t.Fatal(err)
	}
	c := startReplicaOn(t, clk, ns, "replica-c", ttl)
	if err := b.Free(context.Background(), "team/freed"); err != nil {
		t.Fatal(err)
	}
	// Free returns once the hold is gone from the object, so a third
	// replica takes the name at once, with no wait for the write.
	if err := acquire(t, c, "team/freed"); err != nil {
		t.Fatalf("c could not take a name b freed, right after Free returned: %v", err)
	}
	c.Release("team/freed")
	poll.UntilNil(t, "b takes the name it freed", func() error { return acquire(t, b, "team/freed") })
	// a must not renew a hold that was freed under it: two TTLs on, the
	// name is still b's, renewed by b alone.
	for range 6 {
		stepRenewal(t, clk, ttl, ns, "team/freed", b)
	}
	if err := acquire(t, a, "team/freed"); !errors.Is(err, ErrHeld) {
		t.Fatalf("a took the name b holds after freeing it: %v", err)
	}
}

func TestHoldsLapseUnlessRenewed(t *testing.T) {
	ns := testNamespace(t)
	const ttl = time.Second
	clk := clocktesting.NewFakeClock(time.Now())
	a := startReplicaOn(t, clk, ns, "replica-a", ttl)
	b := startReplicaOn(t, clk, ns, "replica-b", ttl)

	if err := acquire(t, a, "team/renewed"); err != nil {
		t.Fatal(err)
	}
	if err := acquire(t, a, "team/settled"); err != nil {
		t.Fatal(err)
	}
	a.Settle("team/settled")
	// Three TTLs later a still holds what it renews, and the settled hold,
	// no longer renewed, has lapsed.
	for range 9 {
		stepRenewal(t, clk, ttl, ns, "team/renewed", a)
	}
	if err := acquire(t, b, "team/renewed"); !errors.Is(err, ErrHeld) {
		t.Fatalf("a renewed hold was taken: %v", err)
	}
	if err := acquire(t, b, "team/settled"); err != nil {
		t.Fatalf("a settled hold did not lapse: %v", err)
	}
	// A replica that dies stops renewing: its names are held until the
	// TTL after its last renewal, and free from then on.
	a.stop()
	clk.Step(ttl - time.Nanosecond)
	if err := acquire(t, b, "team/renewed"); !errors.Is(err, ErrHeld) {
		t.Fatalf("a dead replica's hold was taken before its TTL ran out: %v", err)
	}
	clk.Step(time.Nanosecond)
	if err := acquire(t, b, "team/renewed"); err != nil {
		t.Fatalf("a dead replica's hold did not lapse at its TTL: %v", err)
	}
}

func TestDamagedEntryDoesNotBlock(t *testing.T) {
	ns := testNamespace(t)
	key := "team/damaged"
	_, err := testCluster.Clientset().CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ObjectName(shardOf(key))},
		Data:       map[string]string{dataKey(key): "{not json"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, ns, "replica-a", DefaultTTL)
	if err := acquire(t, a, key); err != nil {
		t.Fatalf("a damaged entry blocked the name: %v", err)
	}
}

func TestFullShardRefuses(t *testing.T) {
	ns := testNamespace(t)
	a := startReplica(t, ns, "replica-a", DefaultTTL, func(c *Config) { c.MaxPerShard = 2 })
	var same []string
	for i := 0; len(same) < 3; i++ {
		if key := fmt.Sprintf("team/full-%d", i); shardOf(key) == 0 {
			same = append(same, key)
		}
	}
	for _, key := range same[:2] {
		if err := acquire(t, a, key); err != nil {
			t.Fatal(err)
		}
	}
	if err := acquire(t, a, same[2]); !errors.Is(err, ErrFull) {
		t.Fatalf("a third name in a shard of two: %v, want ErrFull", err)
	}
	a.Release(same[0])
	poll.UntilNil(t, "a released slot is taken", func() error { return acquire(t, a, same[2]) })
}

func TestAPIDownFailsClosed(t *testing.T) {
	a := startReplica(t, "unused", "replica-a", DefaultTTL, func(c *Config) { c.Namespace = "does-not-exist" })
	err := acquire(t, a, "team/nowhere")
	if err == nil || errors.Is(err, ErrHeld) {
		t.Fatalf("a hold in a namespace that does not exist: %v, want the API's error", err)
	}
}
