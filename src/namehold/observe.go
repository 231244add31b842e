package namehold

// Observer is told when another replica stood in the way of a hold, in
// the package's terms; the metrics package counts it. It is called on a
// shard's writer goroutine, so it must not block.
//
// A hold is never waited for: an Acquire of a name another replica holds
// fails at once with ErrHeld. What an Acquire does wait on another
// replica for is the shard's object: when the write carrying it loses the
// compare-and-set to another replica's write of the same shard, it is
// read again and retried.
type Observer interface {
	// ObserveHeld: an Acquire was refused with ErrHeld, because another
	// replica holds the name.
	ObserveHeld()
	// ObserveContended: acquires Acquires waited for another replica: the
	// write carrying them hit one or more resourceVersion conflicts with
	// another replica's write of their shard before it landed or failed.
	ObserveContended(acquires int)
}

// unobserved is the Observer of Holds configured without one.
type unobserved struct{}

func (unobserved) ObserveHeld()         {}
func (unobserved) ObserveContended(int) {}
