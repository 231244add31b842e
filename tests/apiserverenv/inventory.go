package apiserverenv

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// WaitFleetPublished waits until every node of f has a NodeInventory,
// read through client, that lists at least minPools pools, each full, so
// the first create finds the capacity the fleet was started with. ctx
// bounds the wait.
func WaitFleetPublished(ctx context.Context, client dynamic.Interface, f *simfleet.Fleet, minPools int) error {
	api := client.Resource(v1beta1.NodeInventoryGVR)
	last := "nothing published"
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		for _, n := range f.Nodes() {
			u, err := api.Get(ctx, n.Name(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				last = n.Name() + " has not published"
				return false, nil
			}
			if err != nil {
				return false, fmt.Errorf("get NodeInventory %s: %w", n.Name(), err)
			}
			if full, why := poolsFull(u.Object, minPools); !full {
				last = n.Name() + " " + why
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("fleet inventory (%s): %w", last, err)
	}
	return nil
}

// poolsFull reports whether a NodeInventory lists at least minPools pools,
// each with warm VMs up to its target; why says what falls short. A pool
// with no warm VMs is not full whatever its target reads: every pool the
// callers configure has a warm target, so it has not been filled yet.
func poolsFull(inventory map[string]any, minPools int) (full bool, why string) {
	pools, _ := inventory["pools"].([]any)
	if len(pools) < minPools {
		return false, fmt.Sprintf("publishes %d pools", len(pools))
	}
	for _, p := range pools {
		pm, _ := p.(map[string]any)
		warm, _ := pm["warm"].(int64)
		target, _ := pm["target"].(int64)
		if warm == 0 || warm < target {
			return false, fmt.Sprintf("publishes pool %v", pm)
		}
	}
	return true, ""
}
