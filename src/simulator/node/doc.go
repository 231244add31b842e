// Package node simulates one sandboxd node: the HTTP API of
// docs/sandboxd-api.md (claims, pools, lifecycle verbs, checkpoints,
// promoted templates, the guest-port relay, peers, drain, metrics) backed
// by in-memory state instead of microVMs.
//
// A "VM" here is bookkeeping: a warm pool is a stack of names, a claim pops
// one. Guests are real loopback listeners started on demand when the relay
// first reaches a guest port, so traffic through the relay exercises real
// TCP, including half-close. Each sandbox has a scratch directory standing
// in for its disk; fork, checkpoint and promote copy it (a promoted template
// is that copy, which claims of its key clone on demand).
//
// Timing knobs (refill, cold provisioning) make the control-plane behaviour
// observable in tests; the warm claim path never sleeps.
package node
