// Package metrics is what sandbox-operator's binaries tell Prometheus about
// the fleet, beyond the Go runtime and the process: each metric's name,
// help, unit and labels, and the observers that the parts doing the work
// (the fleet core, the fronts) are handed.
//
// The rules every metric here follows:
//
//   - Names follow Prometheus's conventions: the sandbox_operator_ prefix,
//     base units (_seconds, _bytes), _total on counters.
//   - Labels come from fixed sets (a front, a size tier, an outcome kind),
//     never from a sandbox id, a name or a namespace: the number of series
//     stays the same however many sandboxes there are. A value from a
//     request that is not in its set (an unknown size) is counted as
//     "other".
//   - Nothing is global: a binary builds one Registry and hands it to what
//     it runs, so tests build their own and read exactly what they did.
package metrics
