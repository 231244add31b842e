package fleet

import (
	"cmp"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// DefaultNodeTimeout bounds one call to one node when Config leaves it 0.
const DefaultNodeTimeout = 10 * time.Second

// ErrInvalid is a request the fleet refuses before calling any node (a
// fork count out of range, a sandbox of no namespace to fork).
var ErrInvalid = errors.New("invalid request")

// Config configures a Fleet.
type Config struct {
	// View is the fleet's read side. Required. When it also implements
	// Recorder it is told of every write.
	View View
	// Token is the fleet sandboxd token presented to every node. Reading a
	// sandbox's own token back (Token) needs the nodes' root api_token.
	Token string
	// HTTPClient carries sandboxd calls; default the sandboxd package's.
	HTTPClient *http.Client
	// NodeTimeout bounds each call to one node within the caller's own
	// deadline; default DefaultNodeTimeout.
	NodeTimeout time.Duration
	// FollowRedirects sends claims that may be redirected by the node to
	// its peers (a mesh, where the view's warm counts are a hint), and
	// lets a claim enter at nodes the view shows no warm VM on. Without
	// it a claim is pinned to the node chosen (no_redirect), as the
	// Kubernetes front needs, since it names the node in the Sandbox.
	FollowRedirects bool
	// Clock tells the time and times the core's background retries (the
	// release of an abandoned sandbox, of a possibly orphaned claim);
	// default the real one.
	Clock  clock.WithTicker
	Logger *slog.Logger
	// Rand drives the node-choice policy; default a randomly seeded one.
	Rand *rand.Rand
	// ClaimObserver, when set, is told how every Claim ended.
	ClaimObserver ClaimObserver
	// OperationObserver, when set, is told how every lifecycle operation
	// (pause, resume, renew, fork, checkpoint, release, a checkpoint's
	// claim) ended.
	OperationObserver OperationObserver
}

// Fleet is the fleet core. It is safe for concurrent use.
type Fleet struct {
	cfg Config
	rec Recorder // nil when the view records nothing
	log *slog.Logger

	randMu sync.Mutex
	rng    *rand.Rand

	unanswered unanswered

	bg        sync.WaitGroup
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// New validates cfg and builds a Fleet.
func New(cfg Config) (*Fleet, error) {
	if cfg.View == nil {
		return nil, errors.New("fleet: View is required")
	}
	if cfg.NodeTimeout < 0 {
		return nil, errors.New("fleet: NodeTimeout must not be negative")
	}
	cfg.NodeTimeout = cmp.Or(cfg.NodeTimeout, DefaultNodeTimeout)
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	f := &Fleet{cfg: cfg, log: cfg.Logger, rng: cfg.Rand, done: make(chan struct{})}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.rng == nil {
		f.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	f.rec, _ = cfg.View.(Recorder)
	return f, nil
}

// Close stops the background clean-ups of failed claims (one still
// re-checking a hung node gives up: the node's lease reaper frees what it
// may hold) and waits for them.
func (f *Fleet) Close() {
	f.closeOnce.Do(func() { close(f.done) })
	f.bg.Wait()
}

// Client returns a sandboxd client for the node at addr with the fleet
// token. The fronts reach nodes through the Fleet's verbs; this is for the
// view's own reads of a node (sandbox-apiserver's lookup of a sandbox its
// inventory does not show yet) and for tests.
func (f *Fleet) Client(addr string) (*sandboxd.Client, error) {
	if addr == "" {
		return nil, errors.New("fleet: the sandbox's node has no address")
	}
	opts := []sandboxd.Option{sandboxd.WithToken(f.cfg.Token)}
	if f.cfg.HTTPClient != nil {
		opts = append(opts, sandboxd.WithHTTPClient(f.cfg.HTTPClient))
	}
	return sandboxd.New(addr, opts...)
}

// unreachable reports whether err says the node did not answer at all
// (rather than answering no, or the caller giving up).
func unreachable(ctx interface{ Err() error }, err error) bool {
	return err != nil && sandboxd.StatusOf(err) == 0 && ctx.Err() == nil &&
		!errors.Is(err, sandboxd.ErrResponseTooLarge) && !errors.Is(err, sandboxd.ErrNoRedirectTarget) &&
		!errors.Is(err, ErrInvalid)
}

// Serves reports whether some node keeps a pool of template (at any net
// and size), warm or not: whether a claim of it names something that
// exists, rather than an image no node was told to serve.
func (f *Fleet) Serves(template string) bool {
	for _, n := range f.cfg.View.Nodes() {
		for k := range n.Warm {
			if k.Template == template {
				return true
			}
		}
	}
	return false
}
