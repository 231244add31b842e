// Package oneshot sends one HTTP/1.1 request over a connection the caller
// opened, and reads its answer, on the caller's own goroutine.
//
// Both the envd proxy and the e2b surface open a new guest-port relay for
// every exchange with a guest (an open relay holds the sandbox's idle
// clock, so none is pooled). net/http's Transport would hand each such
// exchange to a writer and a reader goroutine of its own, bound to a
// connection it never reuses: three wake-ups and two fresh goroutine
// stacks a request, each wake-up likely on the other CPU, which on a
// small VM costs more than the rest of the exchange. RoundTrip does the
// same exchange without them.
//
// Only requests whose body is already in hand fit: RoundTrip writes the
// whole request before it reads the answer, so a request that streams its
// body while the guest answers (full duplex) needs the Transport.
package oneshot
