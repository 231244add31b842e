package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/simulator/publisher"
)

// Synthetic inventory: sandboxes that nodes report but that no simulated
// VM backs, so tens of thousands of them cost no claims. Their nodes have
// no pools, so no claim is ever sent to them.
const (
	// syntheticLead is how far ahead of now synthetic nodes stamp
	// publishedAt. The server measures age against min(newest stamp, now),
	// so a stamp ahead keeps a node fresh without republishing (which at
	// 50 000 entries would load the machine being measured) and makes no
	// other node look old.
	syntheticLead = 30 * time.Minute
	// maxEntriesPerInventory bounds one NodeInventory object (an entry is
	// about 300 bytes of JSON; etcd refuses requests over 1.5 MiB).
	maxEntriesPerInventory = 2500
	// syntheticAddr is the address synthetic nodes advertise; nothing
	// listens there.
	syntheticAddr = "127.0.0.1:1"
)

// syntheticNode is one published synthetic NodeInventory.
type syntheticNode struct {
	inv *v1beta1.NodeInventory
	pub *publisher.Publisher
}

// newSyntheticNode returns a node named name with no entries, not yet
// published.
func newSyntheticNode(client dynamic.Interface, name string) (*syntheticNode, error) {
	s := &syntheticNode{inv: &v1beta1.NodeInventory{Node: name, Address: syntheticAddr}}
	clock := testingclock.NewFakeClock(time.Now().Add(syntheticLead))
	pub, err := publisher.New(publisher.Config{
		Client:  client,
		Source:  func(context.Context) (*v1beta1.NodeInventory, error) { return s.inv, nil },
		Clock:   clock,
		Timeout: requestTimeout,
	})
	if err != nil {
		return nil, err
	}
	s.pub = pub
	return s, nil
}

// add appends an entry for namespace/name to the node's inventory; it is
// published with the next publish.
func (s *syntheticNode) add(namespace, name string, seq int) {
	now := time.Now()
	deadline := metav1.NewTime(now.Add(time.Hour))
	claimed := metav1.NewTime(now)
	ref := namespace + "/" + name
	s.inv.Entries = append(s.inv.Entries, v1beta1.InventoryEntry{
		Name: ref, ClaimRef: ref, Phase: v1beta1.SandboxPhaseRunning,
		ID:       fmt.Sprintf("sb_%020x", seq),
		Addr:     syntheticAddr,
		Template: templateBase,
		Deadline: &deadline, ClaimedAt: &claimed,
	})
}

func (s *syntheticNode) publish(ctx context.Context) error {
	if err := s.pub.PublishOnce(ctx); err != nil {
		return fmt.Errorf("publish synthetic %s: %w", s.inv.Node, err)
	}
	return nil
}

func (s *syntheticNode) delete(ctx context.Context) error { return s.pub.Delete(ctx) }

// syntheticInventory is a set of synthetic nodes.
type syntheticInventory struct {
	nodes []*syntheticNode
}

// publishSynthetic publishes n entries named sb-<i> in namespace, spread
// evenly over the given number of nodes named <prefix>-<j>.
func publishSynthetic(ctx context.Context, client dynamic.Interface, namespace, prefix string, n, nodes int) (*syntheticInventory, error) {
	s := &syntheticInventory{}
	for j := range nodes {
		nd, err := newSyntheticNode(client, fmt.Sprintf("%s-%03d", prefix, j))
		if err != nil {
			return s, err
		}
		s.nodes = append(s.nodes, nd)
	}
	for i := range n {
		s.nodes[i%nodes].add(namespace, "sb-"+strconv.Itoa(i), i)
	}
	for _, nd := range s.nodes {
		if err := nd.publish(ctx); err != nil {
			return s, err
		}
		// The entries are now in the apiserver; keep no second copy.
		nd.inv.Entries = nil
	}
	return s, nil
}

// delete removes every node of s.
func (s *syntheticInventory) delete(ctx context.Context) error {
	for _, nd := range s.nodes {
		if err := nd.delete(ctx); err != nil {
			return err
		}
	}
	return nil
}

// waitListed waits until the server lists n sandboxes in namespace,
// polling every interval, and collects the garbage the polls made.
func (e *Env) waitListed(ctx context.Context, namespace string, n int, interval, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	got := -1
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		if err := e.checkAlive(); err != nil {
			return false, err
		}
		list, err := e.sandboxes.Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil // a slow list under load; try again
		}
		got = len(list.Items)
		return got == n, nil
	})
	runtime.GC()
	if err != nil {
		return fmt.Errorf("the server lists %d sandboxes in %s, want %d: %w", got, namespace, n, err)
	}
	return nil
}
