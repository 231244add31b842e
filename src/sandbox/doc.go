// Package sandbox is the sandbox contract every part of sandbox-operator
// speaks: how a claim is referenced (ClaimRef), which pool it draws from
// (PoolKey and the annotations that name it), the size tiers a pool key may
// name, how fork children are named and how many one fork may make, and the
// two spellings of a sandbox id.
//
// The Kubernetes front, the e2b front, the fleet core, the inventory, the
// mesh view, the warm-pool driver and the simulator all import it, so a
// sandbox has one name and one set of limits whichever way it is reached.
// It depends on nothing of this project.
package sandbox
