package envdproxy

import "time"

// Observer is told what the data plane carries: every answered request's
// status, every relay dial and how it ended, each relay's opening and
// closing, and the bytes relays carry each way. The proxy knows nothing of
// what the observer keeps (the metrics package counts and times it); it
// calls it on the request's own goroutines, the byte counts once per read
// or write of a relay, so it must not block and should be cheap.
//
// No method is told which sandbox, port or node: what the proxy reports is
// only what may become a label of fixed size.
type Observer interface {
	// ObserveRequest is one request answered, with the status the client
	// got (101 for a switch to another protocol such as WebSocket). The
	// proxy's own /healthz is not data-plane traffic and is not reported.
	ObserveRequest(code int)
	// ObserveDial is one relay dial (the node's guest-port relay
	// handshake, which on sandboxd's active path includes waking a paused
	// sandbox) and how long it took; cause is NoDialFailure when the
	// relay opened.
	ObserveDial(took time.Duration, cause DialFailure)
	// ObserveRelayOpened and ObserveRelayClosed bracket every relay that
	// opened: the first right after its dial, the second once it is
	// closed, however the exchange over it ended.
	ObserveRelayOpened()
	ObserveRelayClosed()
	// ObserveBytes is n bytes an open relay carried in direction dir, as
	// the guest's protocol carries them (HTTP heads and framing
	// included).
	ObserveBytes(dir Direction, n int)
}

// DialFailure is why a relay dial did not open a relay, spelled as the
// metrics' cause label spells it.
type DialFailure string

// The causes a relay dial fails for.
const (
	// NoDialFailure is the cause of a dial that opened its relay.
	NoDialFailure DialFailure = ""
	// DialNodeUnreachable: no connection to the node's sandboxd (refused,
	// no route, name not resolved, connect timed out).
	DialNodeUnreachable DialFailure = "node_unreachable"
	// DialNotListening: the node took the relay but nothing answers on
	// that port inside the guest (sandboxd's 502).
	DialNotListening DialFailure = "not_listening"
	// DialSandboxGone: the node does not hold the sandbox, or not under
	// the token the proxy had for it (sandboxd's 404).
	DialSandboxGone DialFailure = "sandbox_gone"
	// DialRefused: the node answered and would not open the relay for
	// another reason (the token refused, the sandbox paused on the
	// passive path, the node busy or draining).
	DialRefused DialFailure = "refused"
	// DialTimeout: the handshake with the node ran out of time.
	DialTimeout DialFailure = "timeout"
	// DialOther: anything else, including a client that left during the
	// dial.
	DialOther DialFailure = "other"
)

// Direction is which way relayed bytes went, spelled as the metrics'
// direction label spells it.
type Direction string

const (
	// ToSandbox is from the client into the guest.
	ToSandbox Direction = "to_sandbox"
	// FromSandbox is from the guest back to the client.
	FromSandbox Direction = "from_sandbox"
)

// unobserved is the Observer of a Config that sets none.
type unobserved struct{}

func (unobserved) ObserveRequest(int)                     {}
func (unobserved) ObserveDial(time.Duration, DialFailure) {}
func (unobserved) ObserveRelayOpened()                    {}
func (unobserved) ObserveRelayClosed()                    {}
func (unobserved) ObserveBytes(Direction, int)            {}
