// Package proxybench measures what sandbox-envd-proxy adds over talking
// to a node's guest-port relay directly: small-request latency
// (p50/p95/p99) and bulk download and upload throughput, through the real
// binary (src/cmd/sandbox-envd-proxy) reading NodeInventory from a real
// kube-apiserver, next to the same requests sent straight to the relay.
//
// The sandbox is one claim on one in-process simulated node
// (src/simulator/simfleet) whose guest serves a small HTTP/1.1 byte source
// and sink; the node publishes its NodeInventory every second, so the
// proxy places the sandbox from its informer as in production.
//
// The requests are sent by a client process of their own (this binary
// started again, client.go), as a real client is never inside the node it
// reaches. Every path then crosses from one process to another the way it
// would across machines, and the difference between two paths is what
// their hops add, not where the benchmark happened to run its client.
//
// What each path keeps open across requests:
//
//   - direct: nothing. Every request dials the node, upgrades to the
//     guest-port relay with the claim token and closes it after the
//     answer, exactly what the proxy does toward the node for each
//     request it carries.
//   - proxied: the client's HTTP/1.1 keep-alive connection to the proxy.
//     The proxy itself opens a new relay per request by design (an open
//     relay holds the sandbox's idle clock; docs/envd-proxy.md, "No
//     pooling"), so keep-alive is reused only where the proxy allows it.
//   - direct_reused_relay (small requests only): one relay kept open and
//     reused with HTTP keep-alive inside it; the floor a client holding a
//     relay gets, which no request through the proxy can reach.
//   - floor (small requests only): a keep-alive connection to the same
//     guest handler served straight from the benchmark's process, no
//     relay. It is one HTTP exchange between two processes, the least any
//     hop added to a path costs on the machine; the proxied path makes
//     exactly one more of those than the direct one.
//
// It is a benchmark run by hand through the scale harness (tools/scale),
// not a test.
package proxybench
