// Package warmpool is the warm-pool driver: it keeps every node's sandboxd
// warm pools matching the cluster's SandboxWarmPool objects
// (extensions.agents.x-k8s.io/v1beta1), pool-level and never per sandbox.
//
// Each pass resolves every SandboxWarmPool's SandboxTemplate into a
// (template, net, size) key with the same rule a Sandbox create uses
// (sandbox.PoolKeyOf), sums spec.replicas per key, spreads each key's
// sum over the fresh nodes that advertise a sandboxd address with a stable
// rendezvous placement (Place), and PUTs each node its whole pool set in
// one request, because sandboxd replaces the set wholesale. The warm
// counts those PUTs answer become status.replicas and status.readyReplicas.
// Events on the SandboxWarmPool say what the driver did and why a pool is
// not ready.
//
// Only the holder of the Lease cocoon-warmpool-driver drives. A Driver
// runs a controller-runtime manager for the election and the watches, with
// its metrics and health servers off; when the manager stops (a lost
// lease) the Driver builds a new one after RebuildDelay and waits in the
// election again, so the hosting process keeps serving.
//
// Without a sandboxd token the driver fails closed: it logs once and sets
// no pools.
package warmpool
