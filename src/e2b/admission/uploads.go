package admission

import (
	"sync"

	"github.com/cocoonstack/sandbox-operator/src/e2b/buildstore"
)

// UploadsInFlight are the files and bytes of each namespace's uploads
// being written: the store counts an archive only once it is complete, so
// without these two uploads at once could each pass a bound. The zero
// value is ready to use.
type UploadsInFlight struct {
	mu sync.Mutex
	by map[string]buildstore.Usage
}

// Add adds d (negative to end an upload) to namespace's uploads in flight.
func (u *UploadsInFlight) Add(namespace string, d buildstore.Usage) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.by == nil {
		u.by = map[string]buildstore.Usage{}
	}
	n := u.by[namespace].Add(d)
	if n.Files <= 0 {
		delete(u.by, namespace)
		return
	}
	u.by[namespace] = n
}

// Of is namespace's uploads in flight.
func (u *UploadsInFlight) Of(namespace string) buildstore.Usage {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.by[namespace]
}
