package main

import (
	"context"
	"fmt"

	"github.com/cocoonstack/sandbox-operator/tools/scale/proxybench"
)

// runProxyPhase measures sandbox-envd-proxy next to the node relay it
// fronts, on the environment's cluster, with the package's default sizes.
func runProxyPhase(ctx context.Context, e *Env, log func(string, ...any)) (*proxybench.Result, error) {
	log("proxy: sandbox-envd-proxy next to the node relay")
	res, err := proxybench.Run(ctx, proxybench.Config{Cluster: e.cluster, Logf: log})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	return &res, nil
}
