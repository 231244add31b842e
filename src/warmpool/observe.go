package warmpool

import "time"

// Observer is told what the driver does, in its own terms: the passes
// that reconcile the SandboxWarmPools with the nodes' pools, the PUTs of
// each node's pool set, and when this replica drives. The metrics
// package counts them. It is called on the driver's goroutines, so it
// must not block.
type Observer interface {
	// ObservePass: a reconcile pass ended after took, with nil or the
	// error that stopped it (the SandboxWarmPools or their templates
	// could not be read). A node refusing its pool set does not fail a
	// pass: ObservePush tells of it. A pass cut short because this
	// replica stopped driving (the lease lost, the process stopping) is
	// not told: it says nothing about the pools.
	ObservePass(took time.Duration, err error)
	// ObservePush: the driver tried to set one node's pool set (PUT
	// /v1/pools), with nil or why the node's pools were not set. A push
	// cut short because this replica stopped driving is not told.
	ObservePush(err error)
	// ObserveLeading: this replica started driving the pools (true:
	// it holds the Lease and its caches synced) or stopped (false).
	ObserveLeading(leading bool)
}

// unobserved is the Observer of a driver configured without one.
type unobserved struct{}

func (unobserved) ObservePass(time.Duration, error) {}
func (unobserved) ObservePush(error)                {}
func (unobserved) ObserveLeading(bool)              {}
