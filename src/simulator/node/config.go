package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/serve"
)

// Tenant is one entry of the node's tenants list: a named token with its own
// claim cap.
type Tenant struct {
	Name  string
	Token string
	// MaxClaims caps the tenant's live claims on this node; 0 is unlimited.
	MaxClaims int
	// EgressClass names the egress class the tenant's claims get. The
	// simulator filters no egress, so it is recorded and listed only.
	EgressClass string
}

// SandboxInfo describes a claimed sandbox to a guest when the guest starts.
type SandboxInfo struct {
	ID string
	// Token is the sandbox's own claim token (e2b derives envd's access
	// token from it). Guests must not log it.
	Token      string
	Key        sandbox.PoolKey
	ClaimRef   string
	Tenant     string
	ScratchDir string
}

// Guest is a service the simulated guest runs on one port. Exactly one of
// HTTP and Stream is set.
type Guest struct {
	Port int
	// HTTP builds the handler served on the port. It is called once per
	// sandbox, the first time the port is reached, and the handler is
	// kept across hibernate and wake (only its listener stops), like a
	// guest daemon whose memory survives the snapshot. When the sandbox is
	// released or reaped a handler that implements io.Closer is closed.
	HTTP func(sb SandboxInfo) (http.Handler, error)
	// H2C also serves cleartext HTTP/2 (prior knowledge) on the port;
	// otherwise the guest speaks HTTP/1.1 only, as envd does.
	H2C bool
	// Stream handles each raw TCP connection; it owns conn and must close it.
	Stream func(sb SandboxInfo, conn net.Conn)
}

// Mesh is the node's view of the other cluster members (gossip). A nil
// Mesh is a mesh of one.
type Mesh interface {
	// Peers returns the live members other than self.
	Peers(self *Node) []Peer
}

// Introductions is implemented by a Mesh that learns of members through
// the nodes' API (the simulator's gossip between processes, package
// gossip): a root-token read of GET /v1/info that names the reader's own
// nodes in IntroductionHeader introduces them, as a memberlist join does.
type Introductions interface {
	Introduce(addrs []string)
}

// IntroductionHeader carries, on a gossip read of GET /v1/info, the API
// addresses (comma-separated) of the reading process's nodes.
const IntroductionHeader = "Sandboxd-Sim-Member"

// Peer is what gossip tells one node about another.
type Peer interface {
	Addr() string
	// WarmCount is the peer's warm VMs for key (0 while draining).
	WarmCount(key sandbox.PoolKey) int
	// HasCheckpoint answers the checkpoint ownership probe.
	HasCheckpoint(id string) bool
	// HasTemplate reports whether the peer holds a promoted template for
	// key (claims and template deletes redirect to the holders).
	HasTemplate(key sandbox.PoolKey) bool
}

// Config configures one simulated node.
type Config struct {
	// Name is the node's name (mesh node_id); required.
	Name string
	// ListenAddr is where the API listens; default 127.0.0.1:0.
	ListenAddr string
	// AdvertiseAddr is the address claims report as owner_addr and peers
	// redirect to; default the bound listener address.
	AdvertiseAddr string
	// AdvertiseHost, when AdvertiseAddr is empty, advertises this host with
	// the bound port: for a node listening on a wildcard or on an address
	// its clients reach by another name.
	AdvertiseHost string

	// RootToken is the node's api_token. Empty makes an open node: its
	// operator surfaces need no token, but it never grants per-sandbox
	// authority by id.
	RootToken string
	Tenants   []Tenant

	// MaxClaims caps live claims on the node; 0 is unlimited.
	MaxClaims int
	// Without lists routes ("GET /v1/volumes", as registered) the node
	// answers with a plain 404, standing in for an older sandboxd that
	// lacks those verbs.
	Without []string
	// MaxForkCount bounds one fork's count; default sandbox.MaxForkCount.
	MaxForkCount int

	// Pools is the initial pool set (as if applied by PUT /v1/pools).
	Pools []sandboxd.PoolSpec
	// RefillDelay is how long cloning one warm VM from a golden takes; a
	// warm miss on a pooled key provisions in the same time.
	RefillDelay time.Duration
	// ColdProvisionDelay is how long a cold boot takes: a claim for an
	// unpooled key, and building a new pool's golden.
	ColdProvisionDelay time.Duration
	// RefillConcurrency bounds VMs cloned at once; default 8.
	RefillConcurrency int

	// DefaultTTL is the lease for ttl_seconds 0 (default 300 s); MaxTTL
	// caps any lease (default 24 h).
	DefaultTTL time.Duration
	MaxTTL     time.Duration
	// ReapInterval is how often expired leases are reaped; default 1 s.
	ReapInterval time.Duration
	// ArchiveDeleteAfter is how long an archived sandbox (on_expire
	// archive) is kept before it is deleted (archive_delete_after); 0
	// keeps it until it is released.
	ArchiveDeleteAfter time.Duration

	// EgressAttachment makes the node serve the egress lane (net
	// "egress": claims and pools) like a node configured with an egress
	// attachment; without it that lane answers 409. Nothing is filtered:
	// the simulated guests' processes reach the network as the host does,
	// which is the egress lane's promise. The e2b SDK's default create
	// asks for this lane.
	EgressAttachment bool

	// Volumes is the node's dataset-volume catalog (GET /v1/volumes and a
	// claim's volumes); see Volume.
	Volumes []Volume

	// Sizes are the accepted size tiers; default sandbox.SizeTiers().
	Sizes map[string]sandbox.SizeTier

	// Guests are the services every sandbox's guest runs.
	Guests []Guest
	// EnvdHandler, when set, serves envd on port 49983 (HTTP/1.1 only, as
	// envd does), with Guest.HTTP's lifetime: built once per sandbox, kept
	// across hibernate, closed (if an io.Closer) on release. When nil
	// nothing listens there and the relay answers 502.
	EnvdHandler func(sb SandboxInfo) (http.Handler, error)

	// Isolation, when set, runs every sandbox as its own machine
	// (namespaces over a root filesystem) whose program serves the guest
	// ports; Guests and EnvdHandler are then not used. Nil runs the guest
	// services in this process, unisolated.
	Isolation *Isolation

	// BodyLimits bound the request bodies the node's API and every guest
	// HTTP service read (serve.BodyLimits; zero fields are serve's
	// defaults), so a client that stalls part way through a body does not
	// hold a connection, and what the handler opened for it, forever.
	BodyLimits serve.BodyLimits

	// ScratchRoot holds per-sandbox scratch directories (under a
	// per-node subdirectory); default a fresh temp directory.
	ScratchRoot string

	// Mesh supplies the gossip view; nil is a mesh of one.
	Mesh Mesh
	// Clock is the node's clock: lease deadlines, idle times and the
	// stamps of checkpoints and snapshots, and the waits of simulated work
	// (refill and provisioning delays, the reap period); nil is the real
	// clock. Tests inject a fake one to drive TTLs and delays by stepping
	// it. Zero delays never wait on it.
	Clock clock.WithTicker
	// Logger receives operational logs; default discards. Tokens are
	// never logged.
	Logger *slog.Logger
	// Usage, when set, receives the events of sandboxd's usage journal
	// that the simulator models: vmm_exit and vmm_failed (vmm.go). It is
	// called outside the node's lock, one event at a time per sandbox,
	// and must not block for long.
	Usage func(UsageEvent)
}

func (c *Config) applyDefaults() error {
	if c.Name == "" {
		return errors.New("node: Name is required")
	}
	if c.ListenAddr == "" {
		c.ListenAddr = "127.0.0.1:0"
	}
	if c.MaxForkCount <= 0 {
		c.MaxForkCount = sandbox.MaxForkCount
	}
	if c.RefillConcurrency <= 0 {
		c.RefillConcurrency = 8
	}
	if c.DefaultTTL <= 0 {
		c.DefaultTTL = sandboxd.DefaultTTL
	}
	if c.MaxTTL <= 0 {
		c.MaxTTL = sandboxd.MaxTTL
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = time.Second
	}
	if c.Sizes == nil {
		c.Sizes = sandbox.SizeTiers()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxClaims < 0 || c.RefillDelay < 0 || c.ColdProvisionDelay < 0 || c.ArchiveDeleteAfter < 0 {
		return errors.New("node: MaxClaims and delays must not be negative")
	}
	seen := map[string]bool{}
	for _, t := range c.Tenants {
		if t.Name == "" || t.Token == "" {
			return errors.New("node: every tenant needs a name and a token")
		}
		if seen[t.Name] {
			return fmt.Errorf("node: duplicate tenant %q", t.Name)
		}
		seen[t.Name] = true
	}
	if err := checkInitialTenants(c.RootToken, c.Tenants); err != nil {
		return err
	}
	if err := validateCatalog(c.Volumes); err != nil {
		return err
	}
	ports := map[int]bool{}
	for _, g := range c.Guests {
		if g.Port < 1 || g.Port > 65535 {
			return fmt.Errorf("node: guest port %d outside 1-65535", g.Port)
		}
		if (g.HTTP == nil) == (g.Stream == nil) {
			return fmt.Errorf("node: guest on port %d needs exactly one of HTTP and Stream", g.Port)
		}
		if ports[g.Port] {
			return fmt.Errorf("node: two guests on port %d", g.Port)
		}
		ports[g.Port] = true
	}
	if c.EnvdHandler != nil {
		if ports[sandboxd.EnvdPort] {
			return fmt.Errorf("node: EnvdHandler and a guest both claim port %d", sandboxd.EnvdPort)
		}
		c.Guests = append(append([]Guest(nil), c.Guests...), Guest{Port: sandboxd.EnvdPort, HTTP: c.EnvdHandler})
	}
	return nil
}
