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
