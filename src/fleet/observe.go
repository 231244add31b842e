package fleet

import (
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// ClaimObserver is told how every warm-pool claim the core makes ended:
// the front that asked (ClaimRequest.Front), the pool key asked for (with
// its defaults), how long the claim took, and nil or the error the caller
// got. The core knows nothing of what the
// observer keeps (the metrics package counts claims by front, tier and
// outcome); it calls it on the claim's own goroutine, so it must not
// block.
type ClaimObserver interface {
	ObserveClaim(front string, key sandbox.PoolKey, took time.Duration, err error)
}

// Operation names a lifecycle verb the core runs on an existing sandbox
// (or, for OperationCheckpointClaim, a claim branched from a checkpoint),
// as an OperationObserver is told it.
type Operation string

// The operations the core reports.
const (
	OperationPause           Operation = "pause"
	OperationResume          Operation = "resume"
	OperationRenew           Operation = "renew"
	OperationFork            Operation = "fork"
	OperationCheckpoint      Operation = "checkpoint"
	OperationRelease         Operation = "release"
	OperationCheckpointClaim Operation = "checkpoint_claim"
)

// Operations lists every Operation, for an observer that keeps one series
// per operation from the start.
var Operations = []Operation{
	OperationPause, OperationResume, OperationRenew, OperationFork,
	OperationCheckpoint, OperationRelease, OperationCheckpointClaim,
}

// OperationObserver is told how every lifecycle operation the core ran
// ended: which one, how long it took, and nil or the caller's error. Like
// ClaimObserver it runs on the caller's goroutine and must not block.
type OperationObserver interface {
	ObserveOperation(op Operation, took time.Duration, err error)
}

// observeOperation reports op, begun at start, to the operation observer.
// It takes the error by pointer so that a deferred call sees the named
// result the method returns.
func (f *Fleet) observeOperation(op Operation, start time.Time, err *error) {
	if f.cfg.OperationObserver == nil {
		return
	}
	f.cfg.OperationObserver.ObserveOperation(op, f.cfg.Clock.Since(start), *err)
}
