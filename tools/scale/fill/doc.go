// Package fill measures the warm-pool fill constant: how long one
// SandboxWarmPool patch from 0 to R replicas takes until every node of an
// N-node fleet has been told its share ("target") and until every node
// holds that many warm VMs ("warm"), and how many writes the
// kube-apiserver took meanwhile.
//
// It runs the real warm-pool driver (src/warmpool) in this process against
// a real kube-apiserver, over an in-process simulated fleet
// (src/simulator/simfleet) that publishes its NodeInventory, the way
// tests/integration/warmpool's BenchmarkScaleTo50000 does. The simulator
// runs unisolated with a refill delay of 0, so a warm VM is bookkeeping
// and "warm" measures the control path (driver, PUT /v1/pools, the node's
// refill loop), not VM boot time.
//
// How the nodes are watched matters on a small machine: polling every
// node's GET /v1/info (ObserveInfo, the default, the node as any client
// sees it) competes with the driver for the CPU at a thousand nodes and
// makes the fill look slower the harder it polls, so Result reports the
// poll period and ObserveSnapshot reads the simulated nodes in-process
// instead, at a fraction of the cost.
//
// It is a benchmark run by hand through the scale harness (tools/scale),
// not a test.
package fill
