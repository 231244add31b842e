package envdproxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Reasons a sandbox cannot be placed. All of them answer 502 alike.
var (
	errUnknown    = errors.New("no node holds the sandbox")
	errOverBudget = errors.New("lookup budget for unlisted ids spent")
	errNoClaim    = errors.New("the node answered without the sandbox's token (is the fleet token the node's root api_token?)")
	errNodeFailed = errors.New("node read failed")
	errCallerGone = errors.New("caller went away")
)

// locate finds id's owner. With needClaim it also returns the claim token
// and the derived access token, reading them from the owner when the cache
// has none; without it (signed URLs) an address is enough.
//
// An id the Locator lists is read from its node. An id it does not list
// is asked of every node at once, inside the per-proxy budget; past the
// budget it is errOverBudget until its node publishes it.
func (p *Proxy) locate(ctx context.Context, id string, needClaim bool) (owner, error) {
	now := p.cfg.Clock.Now()
	addr, listed := p.cfg.Locator.Owner(id)
	if o, ok := p.cache.get(id, now); ok && (!listed || o.addr == addr) {
		if !needClaim || o.claim != "" {
			return o, nil
		}
	}
	if listed {
		if !needClaim {
			return owner{addr: addr}, nil
		}
		return p.flight.do(ctx.Done(), "read\x00"+id+"\x00"+addr, func() (owner, error) {
			return p.readOwner(id, addr)
		})
	}
	o, err := p.flight.do(ctx.Done(), "ask\x00"+id, func() (owner, error) {
		if !p.budget.AllowN(p.cfg.Clock.Now(), 1) {
			return owner{}, errOverBudget
		}
		return p.askNodes(id)
	})
	if err != nil {
		return owner{}, err
	}
	if needClaim && o.claim == "" {
		return owner{}, errNoClaim
	}
	return o, nil
}

// readOwner reads id's claim token from the node the Locator names.
func (p *Proxy) readOwner(id, addr string) (owner, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.LookupTimeout)
	defer cancel()
	c, err := p.node(addr)
	if err != nil {
		return owner{}, err
	}
	sb, err := c.Sandbox(ctx, id)
	if err != nil {
		if errors.Is(err, sandboxd.ErrNotFound) {
			return owner{}, errUnknown
		}
		return owner{}, fmt.Errorf("%w: %w", errNodeFailed, err)
	}
	if sb.Token == "" {
		return owner{}, errNoClaim
	}
	o := p.ownerOf(addr, sb.Token, sb.Metadata)
	p.cache.put(id, o, p.cfg.Clock.Now())
	return o, nil
}

// askNodes asks every node for id in parallel; the first that knows it is
// the owner. Unknown ids cost every node one lookup, which is what the
// budget bounds.
func (p *Proxy) askNodes(id string) (owner, error) {
	nodes := p.cfg.Locator.Nodes()
	if len(nodes) == 0 {
		return owner{}, errUnknown
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.LookupTimeout)
	defer cancel()
	type answer struct {
		addr   string
		token  string
		labels map[string]string
		err    error
	}
	answers := make(chan answer, len(nodes))
	for _, addr := range nodes {
		go func() {
			c, err := p.node(addr)
			if err != nil {
				answers <- answer{addr: addr, err: err}
				return
			}
			sb, err := c.Sandbox(ctx, id)
			if err != nil {
				answers <- answer{addr: addr, err: err}
				return
			}
			answers <- answer{addr: addr, token: sb.Token, labels: sb.Metadata}
		}()
	}
	// Returning cancels the asks still in flight; the channel is buffered
	// for all of them, so none blocks.
	var failed error
	for range nodes {
		a := <-answers
		if a.err != nil {
			if !errors.Is(a.err, sandboxd.ErrNotFound) {
				failed = a.err
			}
			continue
		}
		o := owner{addr: a.addr}
		if a.token != "" {
			o = p.ownerOf(a.addr, a.token, a.labels)
		}
		p.cache.put(id, o, p.cfg.Clock.Now())
		return o, nil
	}
	if failed != nil {
		p.cfg.Logger.Debug("asking the nodes for an unlisted sandbox: a node failed", "sandbox", id, "err", failed)
	}
	return owner{}, errUnknown
}

func (p *Proxy) ownerOf(addr, claim string, labels map[string]string) owner {
	return owner{addr: addr, claim: claim, derived: envdtoken.Derive(p.cfg.Secret, claim), wakes: sandbox.AutoResumes(labels)}
}

// node returns the fleet-token client of the node at addr. Addresses come
// from the Locator only, never from a request, so the map stays as small
// as the fleet.
func (p *Proxy) node(addr string) (*sandboxd.Client, error) {
	if c, ok := p.nodes.Load(addr); ok {
		return c.(*sandboxd.Client), nil
	}
	opts := []sandboxd.Option{sandboxd.WithToken(p.cfg.Token)}
	if p.cfg.HTTPClient != nil {
		opts = append(opts, sandboxd.WithHTTPClient(p.cfg.HTTPClient))
	}
	c, err := sandboxd.New(addr, opts...)
	if err != nil {
		return nil, err
	}
	actual, _ := p.nodes.LoadOrStore(addr, c)
	return actual.(*sandboxd.Client), nil
}
