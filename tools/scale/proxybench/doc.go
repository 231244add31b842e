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
//
// It is a benchmark run by hand through the scale harness (tools/scale),
// not a test.
package proxybench
