package main

import (
	"context"
	"fmt"

	"github.com/cocoonstack/sandbox-operator/tools/scale/fill"
)

// fillRuns is how many fills each fleet size is measured over.
const fillRuns = 3

// runFillPhase measures the warm-pool fill constant at each fleet size on
// the environment's cluster. The sandbox-apiserver runs with its own
// warm-pool driver off, so the measured driver is the only one.
//
// The nodes are observed through the simulator's in-process snapshots,
// not GET /v1/info: at 1 000 nodes, polling every node's info competes
// with the driver for the same two cores and measured the poller (see
// docs/performance.md).
func runFillPhase(ctx context.Context, e *Env, sizes []int, replicas int, log func(string, ...any)) ([]fill.Result, error) {
	var out []fill.Result
	for _, nodes := range sizes {
		log("fill: %d replicas over %d nodes, %d runs", replicas, nodes, fillRuns)
		res, err := fill.Run(ctx, fill.Config{
			Cluster: e.cluster, Nodes: nodes, Replicas: replicas, Runs: fillRuns,
			Observe: fill.ObserveSnapshot, Logf: log,
		})
		if err != nil {
			return out, fmt.Errorf("fill at %d nodes: %w", nodes, err)
		}
		out = append(out, res)
	}
	return out, nil
}
