package metrics

import "github.com/prometheus/client_golang/prometheus"

// NameHolds counts what other replicas did to this replica's holds on
// Sandbox names (src/namehold). It implements namehold.Observer; the
// assertion is in the tests, so that the metrics package, which every
// binary links, does not link the holds' Kubernetes client.
type NameHolds struct {
	waits     prometheus.Counter
	conflicts prometheus.Counter
}

// NewNameHolds registers the name-hold metrics with reg.
func NewNameHolds(reg prometheus.Registerer) *NameHolds {
	h := &NameHolds{
		// The holds never wait for another replica's hold (a held name is
		// refused at once); what a create does wait on another replica
		// for is the shard object, when its write loses the
		// compare-and-set to theirs. The catalog's name stays.
		waits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "name_hold_waits_total",
			Help: "Sandbox creates whose name hold waited on another replica: the write of the hold lost the compare-and-set on its shard ConfigMap to another replica's write and was read and retried. A held name is never waited for; see name_hold_conflicts_total.",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "name_hold_conflicts_total",
			Help: "Sandbox creates refused (409 AlreadyExists) because another replica holds the name: its create is in flight or not yet published. A name refused because the inventory shows it, or because this replica is creating it already, is not counted here.",
		}),
	}
	h.waits, h.conflicts = register(reg, h.waits), register(reg, h.conflicts)
	return h
}

// ObserveHeld is the name holds' Observer: an Acquire was refused because
// another replica holds the name.
func (h *NameHolds) ObserveHeld() { h.conflicts.Inc() }

// ObserveContended is the name holds' Observer: acquires Acquires waited
// for a write that conflicted with another replica's.
func (h *NameHolds) ObserveContended(acquires int) { h.waits.Add(float64(acquires)) }
