package records

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Reads of a node's sandbox index serve the labels of every sandbox on it
// for rowsTTL, so a list costs at most one call per node per second
// however many sandboxes it shows; a sandbox missing from a read older
// than rowsRecheck (created since) is read again.
const (
	rowsTTL     = time.Second
	rowsRecheck = 200 * time.Millisecond
	// rowsTimeout bounds one node's read.
	rowsTimeout = 5 * time.Second
	// claimSkew is how far replicas' clocks may disagree on when a
	// sandbox was claimed.
	claimSkew = time.Second
)

// nodeRows caches the claim labels of the sandboxes on each node, read
// from the node's GET /v1/sandboxes.
type nodeRows struct {
	nodes NodeIndex
	clock clock.PassiveClock

	mu    sync.Mutex
	reads map[string]*rowsRead // by node address
}

type rowsRead struct {
	mu     sync.Mutex // held while reading, so one read serves concurrent callers
	at     time.Time
	labels map[string]map[string]string // by sandbox id
}

func newNodeRows(nodes NodeIndex, clk clock.PassiveClock) *nodeRows {
	return &nodeRows{nodes: nodes, clock: clk, reads: map[string]*rowsRead{}}
}

// labels returns the claim labels of sandbox id on the node at addr;
// found is false when the node does not list it. claimedAt is when the
// sandbox was claimed, as far as the caller knows: a read from before then
// (within clock skew) cannot list it, so it is read again however recent,
// which is how a sandbox another replica just created shows its labels.
func (n *nodeRows) labels(ctx context.Context, addr, id string, claimedAt time.Time) (map[string]string, bool, error) {
	n.mu.Lock()
	rd := n.reads[addr]
	if rd == nil {
		rd = &rowsRead{}
		n.reads[addr] = rd
	}
	n.mu.Unlock()

	rd.mu.Lock()
	defer rd.mu.Unlock()
	age := n.clock.Since(rd.at)
	if l, ok := rd.labels[id]; ok && age < rowsTTL {
		return l, true, nil
	}
	if rd.labels != nil && age < rowsRecheck && rd.at.After(claimedAt.Add(claimSkew)) {
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, rowsTimeout)
	defer cancel()
	rows, err := n.nodes.NodeSandboxes(ctx, addr)
	if err != nil {
		return nil, false, err
	}
	rd.at, rd.labels = n.clock.Now(), indexLabels(rows)
	l, ok := rd.labels[id]
	return l, ok, nil
}

func indexLabels(rows []sandboxd.Sandbox) map[string]map[string]string {
	out := make(map[string]map[string]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Metadata
	}
	return out
}
