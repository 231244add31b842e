package namehold

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// recorder is an Observer that counts what it is told.
type recorder struct {
	mu        sync.Mutex
	held      int
	contended int
}

func (r *recorder) ObserveHeld() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held++
}

func (r *recorder) ObserveContended(acquires int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.contended += acquires
}

func (r *recorder) counts() (held, contended int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held, r.contended
}

func observedBy(r *recorder) func(*Config) {
	return func(c *Config) { c.Observer = r }
}

// TestHeldNameObserved: a replica refused a name another replica holds
// is told so once per refused Acquire; the holder, and a replica taking
// its own hold again, are told nothing.
func TestHeldNameObserved(t *testing.T) {
	ns := testNamespace(t)
	holderSaw, refusedSaw := &recorder{}, &recorder{}
	holder := startReplica(t, ns, "replica-holder", DefaultTTL, observedBy(holderSaw))
	refused := startReplica(t, ns, "replica-refused", DefaultTTL, observedBy(refusedSaw))

	if err := acquire(t, holder, "team/taken"); err != nil {
		t.Fatal(err)
	}
	if err := acquire(t, holder, "team/taken"); err != nil {
		t.Fatalf("the holder's second Acquire of its own hold: %v", err)
	}
	for range 2 {
		if err := acquire(t, refused, "team/taken"); !errors.Is(err, ErrHeld) {
			t.Fatalf("another replica took a held name: %v", err)
		}
	}
	if held, _ := refusedSaw.counts(); held != 2 {
		t.Fatalf("the refused replica was told of %d held names, want 2", held)
	}
	if held, contended := holderSaw.counts(); held != 0 || contended != 0 {
		t.Fatalf("the holder was told of %d held names and %d contended acquires, want none", held, contended)
	}
}

// interferingConfigMaps writes the shard as another replica would,
// between this replica's read of it and this replica's first update.
type interferingConfigMaps struct {
	corev1client.ConfigMapsGetter
	done *atomic.Bool
}

func (c interferingConfigMaps) ConfigMaps(ns string) corev1client.ConfigMapInterface {
	return interferingConfigMapInterface{c.ConfigMapsGetter.ConfigMaps(ns), c.done}
}

type interferingConfigMapInterface struct {
	corev1client.ConfigMapInterface
	done *atomic.Bool
}

func (c interferingConfigMapInterface) Update(ctx context.Context, cm *corev1.ConfigMap, o metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	if c.done.CompareAndSwap(false, true) {
		other, err := c.ConfigMapInterface.Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		other.Annotations = map[string]string{"example.com/written-by": "another-replica"}
		if _, err := c.ConfigMapInterface.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
	}
	return c.ConfigMapInterface.Update(ctx, cm, o)
}

// TestContendedWriteObserved: an Acquire whose write loses the
// compare-and-set to another replica's write of the shard is read again,
// granted, and told as one Acquire that waited on another replica.
func TestContendedWriteObserved(t *testing.T) {
	ns := testNamespace(t)
	saw := &recorder{}
	var interfered atomic.Bool
	r := startReplica(t, ns, "replica-contended", DefaultTTL, observedBy(saw), func(c *Config) {
		c.ConfigMaps = interferingConfigMaps{c.ConfigMaps, &interfered}
	})
	if err := acquire(t, r, "team/contended"); err != nil {
		t.Fatalf("an Acquire whose first write conflicted: %v, want it granted on the retry", err)
	}
	if !interfered.Load() {
		t.Fatal("no write reached the API")
	}
	if held, contended := saw.counts(); held != 0 || contended != 1 {
		t.Fatalf("told of %d held names and %d contended acquires, want 0 and 1", held, contended)
	}
	// A write with nothing in its way is not contended.
	if err := acquire(t, r, "team/uncontended"); err != nil {
		t.Fatal(err)
	}
	if _, contended := saw.counts(); contended != 1 {
		t.Fatalf("told of %d contended acquires after an uncontended one, want still 1", contended)
	}
}
