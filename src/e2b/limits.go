package e2b

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/cocoonstack/sandbox-operator/src/e2b/admission"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
)

// admitCreate applies the caller's create rate and live-sandbox cap
// before a create claims anything, answering 429 in e2b's error shape when
// either is reached. On success the caller must call the returned
// ticket's done once the create has ended (a nil ticket's done does
// nothing).
func (s *Server) admitCreate(w http.ResponseWriter, r *http.Request, c caller) (*admission.Ticket, bool) {
	who := "API key"
	if c.anonymous {
		who = "source address"
	}
	if ok, wait := s.admit.Take(c.client); !ok {
		s.cfg.Refusals.Refused(metrics.ReasonRateLimit)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf(
			"rate limit reached: a %s may create %g sandboxes per second, in bursts of at most %d; retry later",
			who, s.cfg.CreateRate, s.cfg.CreateBurst))
		return nil, false
	}
	if s.admit.MaxLive() <= 0 {
		return nil, true
	}
	t := s.admit.Begin(c.scope())
	live, err := s.liveSandboxes(r.Context(), c)
	if err != nil {
		t.Done(false)
		s.fleetError(w, err, "list")
		return nil, false
	}
	if !t.Admit(live) {
		s.cfg.Refusals.Refused(metrics.ReasonSandboxCap)
		owner := "this API key's namespace"
		if c.anonymous {
			owner = "this source address"
		}
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf(
			"%s has reached its limit of %d concurrent sandboxes; kill or let one expire before creating another",
			owner, s.admit.MaxLive()))
		return nil, false
	}
	return t, true
}

// liveSandboxes counts the caller's sandboxes, running or paused, as the
// fleet lists them now, so a kill, an expiry or a create through another
// replica counts at once. A key counts its whole namespace. An anonymous
// caller counts the sandboxes of the namespace that this process created
// for its source address (the fleet does not know who created what): the
// count can miss sandboxes another replica created for the same source,
// or that this one forgot (the records cache is bounded), but never
// counts one that is gone.
func (s *Server) liveSandboxes(ctx context.Context, c caller) (int, error) {
	sbs, err := s.fleet.List(ctx, c.namespace)
	if err != nil {
		return 0, fmt.Errorf("counting the live sandboxes of %s: %w", c.scope(), err)
	}
	n := 0
	for _, sb := range sbs {
		if sb.Namespace != c.namespace {
			continue
		}
		if c.anonymous {
			if rec, ok := s.records.Of(ctx, sb); !ok || rec.Source != c.source {
				continue
			}
		}
		n++
	}
	return n, nil
}

// sourceAddr is the address an anonymous caller is limited by: the
// connection's remote IP (no forwarding header is trusted: nothing
// configures a trusted proxy), IPv4-mapped addresses unmapped, and an IPv6
// address widened to its /64, which one host is routinely given whole.
func sourceAddr(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		// Not ip:port (a handler called directly): the string is all
		// there is to tell callers apart by.
		return "remote " + r.RemoteAddr
	}
	ip := ap.Addr().Unmap().WithZone("")
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}
