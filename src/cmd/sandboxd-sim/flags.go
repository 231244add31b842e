package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/internal/logging"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/gossip"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/envd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/publisher"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

const usageHeader = `sandboxd-sim runs simulated sandboxd nodes that speak the sandboxd HTTP API
(claims, warm pools, lifecycle verbs, checkpoints, the guest-port relay, peers,
drain, metrics). Nodes are peers of each other: a warm miss on one node
redirects to a node that has warm capacity. Nodes of separate sandboxd-sim
processes form one mesh with --join (as sandboxd's mesh.join): the processes
then gossip membership, warm counts and templates over the nodes' API every
--gossip-interval, and a member silent for three intervals is dead.

Every sandbox serves an envd-compatible guest on port 49983 (--envd), reached
through the node's port relay, so the e2b SDK can run commands and move files
in it. With --publish or --kubeconfig every node also publishes its
NodeInventory to a Kubernetes apiserver, as vk-sandbox does on a real node.

Every sandbox is its own machine: Linux namespaces (mount, PID, network with
its own loopback, UTS, IPC) over the base root filesystem that tools/bazel
provisions (SANDBOX_OPERATOR_BASE_ROOTFS), with cgroup limits and a freezer
for hibernate when run as root. Where that cannot run, sandboxd-sim refuses to
start unless --unisolated is given.

SECURITY: with --unisolated, the envd guest executes the commands it is sent
as ordinary processes on THIS HOST, as the user running sandboxd-sim; only its
file API is confined to the sandbox's scratch directory. Even isolated, a
sandbox is not a VM: root inside is host root with fewer capabilities. Nodes
bind 127.0.0.1 (loopback) unless --listen-host says otherwise; never expose
the simulator to a network.

Each node is printed on stdout as "NODE <name> <host:port>". SIGINT or SIGTERM
stops every node, kills every guest process and removes the scratch
directories it created. A bad flag exits with status 2.

Usage: sandboxd-sim [flags]

Flags (one or two dashes):
`

// options is a parsed and validated command line.
type options struct {
	fleet     simfleet.Config // Logger is left to run
	logLevel  slog.Level
	apiserver string // host publishing goes to, for the log
	// nonLoopback and openNodes are worth a warning once logging is set up.
	nonLoopback, openNodes bool
	// unisolated runs the guests in this process (--unisolated).
	unisolated bool
}

// newFlagSet declares every flag; parseFlags reads them and printUsage
// documents them, from this one list.
func newFlagSet() (*flag.FlagSet, *options, *rawFlags) {
	fs := flag.NewFlagSet("sandboxd-sim", flag.ContinueOnError)
	// Errors and help are printed by run, not by the flag package.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	o, r := &options{}, &rawFlags{}
	f := &o.fleet // most flags are fleet settings as they are
	fs.IntVar(&f.Nodes, "nodes", 1, "number of nodes in the fleet, each on its own port and named <name-prefix><index>")
	fs.StringVar(&f.ListenHost, "listen-host", "127.0.0.1", "address every node binds; keep it loopback (see SECURITY above)")
	fs.StringVar(&f.AdvertiseHost, "advertise-host", "", "host the nodes advertise (claims' owner_addr, redirects, peers, the published NodeInventory address), with each node's bound port; default the bound address")
	fs.IntVar(&f.BasePort, "base-port", 0, "node i listens on base-port+i; 0 picks free ports")
	fs.StringVar(&f.NamePrefix, "name-prefix", "sim-node-", "node name prefix")
	fs.StringVar(&r.apiToken, "api-token", "", "root api_token of every node; empty (with no --api-token-file) makes open nodes. Prefer --api-token-file")
	fs.StringVar(&r.apiTokenFile, "api-token-file", "", "file holding the root api_token; overrides --api-token")
	fs.StringVar(&r.tenantsFile, "tenant-tokens-file", "", "file of tenants, one per line: <name> <token> [max_claims]; '#' starts a comment")
	fs.Var(&r.volumes, "volume", "a dataset volume of every node's catalog, repeatable: <name>=<host dir>[,writable][,tenants=<a>+<b>…]. The host directory stands in for the disk image; an isolated sandbox that claims the volume sees it bind-mounted (read-only unless claimed rw, which needs writable). tenants= restricts the entry to those tenants (root always sees it). The directory may not contain ','")
	fs.StringVar(&r.pools, "pools", "", "initial pools of every node: comma-separated <template>:<net>:<size>=<warm>; net and size may be empty for none/small (e.g. base:24.04:none:small=4,py:3.12::=2)")
	fs.DurationVar(&f.RefillDelay, "refill-delay", 0, "time to clone one warm VM from a pool's golden; a warm miss on a pooled key provisions in the same time")
	fs.DurationVar(&f.ColdProvisionDelay, "cold-provision-delay", 0, "time to cold-boot: a claim for an unpooled key, and a new pool's golden")
	fs.IntVar(&f.RefillConcurrency, "refill-concurrency", 8, "warm VMs cloned at once per node")
	fs.BoolVar(&f.EgressAttachment, "egress-attachment", false, "serve the egress lane (net egress, the e2b SDK's default create) as if every node had an egress attachment; guests reach the network as this host does. Without it that lane answers 409")
	fs.IntVar(&f.MaxClaims, "max-claims", 0, "live claims per node before 429; 0 is unlimited")
	fs.IntVar(&f.MaxForkCount, "max-fork-count", sandbox.MaxForkCount, "largest count one fork may ask for")
	fs.DurationVar(&f.DefaultTTL, "default-ttl", sandboxd.DefaultTTL, "lease granted for ttl_seconds 0")
	fs.DurationVar(&f.MaxTTL, "max-ttl", sandboxd.MaxTTL, "longest lease granted; longer requests are clamped")
	fs.DurationVar(&f.ReapInterval, "reap-interval", time.Second, "how often expired leases are reaped")
	fs.DurationVar(&f.ArchiveDeleteAfter, "archive-delete-after", 0, "how long a sandbox archived at its lease's end (on_expire \"archive\") is kept before it is deleted; 0 keeps it until it is released (sandboxd's archive_delete_after_seconds)")
	fs.StringVar(&r.echoPorts, "echo-ports", strconv.Itoa(simfleet.DefaultEchoPort), "comma-separated guest ports serving the HTTP echo (HTTP/1.1 and h2c); empty for none")
	fs.StringVar(&r.tcpEchoPorts, "tcp-echo-ports", "", "comma-separated guest ports serving a raw TCP echo that honours half-close")
	fs.BoolVar(&r.envd, "envd", true, "serve the envd-compatible guest on guest port 49983 of every sandbox; it EXECUTES COMMANDS ON THIS HOST (see SECURITY above). --envd=false leaves the port closed (the relay answers 502)")
	fs.StringVar(&r.envdSecretFile, "envd-secret-file", "", "file holding the envd secret (surrounding whitespace trimmed): each guest then requires X-Access-Token = hex(HMAC-SHA256(secret, the sandbox's claim token)), as the e2b surface and envd proxy derive it. Without it the guests need no access token")
	fs.StringVar(&r.envdVersion, "envd-version", envd.DefaultVersion, "envd version the guests claim to be")
	fs.BoolVar(&r.publish, "publish", false, "publish every node's NodeInventory by server-side apply, using --kubeconfig or, without it, $KUBECONFIG, ~/.kube/config or the in-cluster service account")
	fs.StringVar(&r.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to publish NodeInventory objects to; implies --publish. $KUBECONFIG is read only with --publish and no --kubeconfig, so a developer's environment never makes the simulator write to a cluster by itself")
	fs.DurationVar(&r.publishInterval, "publish-interval", publisher.DefaultInterval, "time between NodeInventory publishes of each node (needs --publish or --kubeconfig)")
	fs.BoolVar(&o.unisolated, "unisolated", false, "run sandboxes as ordinary processes of this user on this host instead of isolated machines, for machines without namespaces or the base root filesystem; every start says so (see SECURITY above)")
	fs.StringVar(&f.ScratchRoot, "scratch-dir", "", "directory for per-sandbox scratch directories (the guests' homes); default a temp directory removed on exit")
	fs.StringVar(&r.join, "join", "", "comma-separated API addresses (host:port) of nodes of another sandboxd-sim process whose mesh to join; they must share --api-token")
	fs.DurationVar(&f.GossipInterval, "gossip-interval", gossip.DefaultInterval, "time between gossip rounds with the nodes of other processes")
	// OPERATOR_LOG_LEVEL sets the level as it does for every binary of
	// the project; the flag, when given, wins.
	fs.StringVar(&r.logLevel, "log-level", cmp.Or(os.Getenv(logging.LevelEnv), "info"), "log level: debug, info, warn or error (logs go to stderr and never contain tokens); default $"+logging.LevelEnv+" when set")
	return fs, o, r
}

// rawFlags holds the flag values that are parsed or read into the fleet's
// settings, before validation.
type rawFlags struct {
	apiToken, apiTokenFile, tenantsFile, pools string
	echoPorts, tcpEchoPorts                    string
	envd, publish                              bool
	envdSecretFile, envdVersion, kubeconfig    string
	publishInterval                            time.Duration
	logLevel                                   string
	join                                       string
	volumes                                    stringList
}

// printUsage writes --help: the header and every flag with its default.
func printUsage(w io.Writer) {
	fs, _, _ := newFlagSet()
	fs.SetOutput(w)
	fmt.Fprint(w, usageHeader)
	fs.PrintDefaults()
}

// parseFlags parses and validates args, reading the files they name. Its
// errors name the flag at fault; flag.ErrHelp asks for the usage.
func parseFlags(args []string) (*options, error) {
	fs, o, r := newFlagSet()
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if err := o.logLevel.UnmarshalText([]byte(r.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", r.logLevel)
	}
	if err := validateNumbers(&o.fleet); err != nil {
		return nil, err
	}
	if o.fleet.ListenHost == "" {
		return nil, errors.New("--listen-host: must not be empty")
	}
	if ip := net.ParseIP(o.fleet.ListenHost); o.fleet.ListenHost != "localhost" && (ip == nil || !ip.IsLoopback()) {
		o.nonLoopback = true
	}

	// The root token is read as every binary reads a sandboxd token.
	token, err := (&sandboxd.TokenOptions{Token: r.apiToken, File: r.apiTokenFile}).Load()
	if err != nil {
		return nil, fmt.Errorf("--api-token-file: %w", err)
	}
	o.openNodes = token == ""
	tenants, err := readTenants(r.tenantsFile)
	if err != nil {
		return nil, fmt.Errorf("--tenant-tokens-file: %w", err)
	}
	pools, err := parsePools(r.pools)
	if err != nil {
		return nil, fmt.Errorf("--pools: %w", err)
	}
	if o.fleet.Volumes, err = node.ParseVolumeSpecs(r.volumes); err != nil {
		return nil, fmt.Errorf("--volume: %w", err)
	}
	httpEcho, err := parsePorts(r.echoPorts)
	if err != nil {
		return nil, fmt.Errorf("--echo-ports: %w", err)
	}
	tcpEcho, err := parsePorts(r.tcpEchoPorts)
	if err != nil {
		return nil, fmt.Errorf("--tcp-echo-ports: %w", err)
	}

	if o.fleet.Join, err = parseJoin(r.join); err != nil {
		return nil, fmt.Errorf("--join: %w", err)
	}
	o.fleet.RootToken, o.fleet.Tenants, o.fleet.Pools = token, tenants, pools
	o.fleet.EchoPorts, o.fleet.TCPEchoPorts = httpEcho, tcpEcho
	if o.fleet.Envd, err = r.envdConfig(set); err != nil {
		return nil, err
	}
	if err := r.publishConfig(set, o); err != nil {
		return nil, err
	}
	return o, nil
}

func validateNumbers(f *simfleet.Config) error {
	switch {
	case f.Nodes < 1:
		return fmt.Errorf("--nodes: %d is not a positive number of nodes", f.Nodes)
	case f.BasePort < 0 || f.BasePort > 65535:
		return fmt.Errorf("--base-port: %d is not a port (0 picks free ports)", f.BasePort)
	case f.BasePort > 0 && f.BasePort+f.Nodes-1 > 65535:
		return fmt.Errorf("--base-port: %d leaves no room for %d nodes below port 65536", f.BasePort, f.Nodes)
	case f.GossipInterval <= 0:
		return fmt.Errorf("--gossip-interval: %v must be positive", f.GossipInterval)
	case f.RefillConcurrency < 1:
		return fmt.Errorf("--refill-concurrency: %d must be at least 1", f.RefillConcurrency)
	case f.MaxClaims < 0:
		return fmt.Errorf("--max-claims: %d must not be negative (0 is unlimited)", f.MaxClaims)
	case f.MaxForkCount < 1:
		return fmt.Errorf("--max-fork-count: %d must be at least 1", f.MaxForkCount)
	case f.RefillDelay < 0:
		return fmt.Errorf("--refill-delay: %v must not be negative", f.RefillDelay)
	case f.ColdProvisionDelay < 0:
		return fmt.Errorf("--cold-provision-delay: %v must not be negative", f.ColdProvisionDelay)
	case f.DefaultTTL <= 0:
		return fmt.Errorf("--default-ttl: %v must be positive", f.DefaultTTL)
	case f.MaxTTL < f.DefaultTTL:
		return fmt.Errorf("--max-ttl: %v is shorter than --default-ttl %v", f.MaxTTL, f.DefaultTTL)
	case f.ReapInterval <= 0:
		return fmt.Errorf("--reap-interval: %v must be positive", f.ReapInterval)
	case f.ArchiveDeleteAfter < 0:
		return fmt.Errorf("--archive-delete-after: %v must not be negative (0 keeps archives)", f.ArchiveDeleteAfter)
	}
	return nil
}

// envdConfig is the fleet's envd guest, nil with --envd=false. Flags that
// only configure the guest are refused when it is off, so a forgotten
// --envd=false never silently drops a secret.
func (r *rawFlags) envdConfig(set map[string]bool) (*simfleet.EnvdConfig, error) {
	if !r.envd {
		for _, name := range []string{"envd-secret-file", "envd-version"} {
			if set[name] {
				return nil, fmt.Errorf("--%s: has no effect with --envd=false", name)
			}
		}
		return nil, nil
	}
	if r.envdVersion == "" {
		return nil, errors.New("--envd-version: must not be empty")
	}
	cfg := &simfleet.EnvdConfig{Version: r.envdVersion}
	if set["envd-secret-file"] {
		// Read as the e2b surface and the envd proxy read it, so the
		// guests derive the same access tokens.
		secret, err := envdtoken.ReadSecretFile(r.envdSecretFile)
		if err != nil {
			return nil, fmt.Errorf("--envd-secret-file: %w", err)
		}
		cfg.Secret = secret
	}
	return cfg, nil
}

// publishConfig turns publishing on for --publish or --kubeconfig and
// builds the client, so a kubeconfig that cannot be loaded is a flag error.
func (r *rawFlags) publishConfig(set map[string]bool, o *options) error {
	if set["kubeconfig"] && r.kubeconfig == "" {
		return errors.New("--kubeconfig: must name a file (omit it to not publish)")
	}
	if !r.publish && r.kubeconfig == "" {
		if set["publish-interval"] {
			return errors.New("--publish-interval: has no effect without --publish or --kubeconfig")
		}
		return nil
	}
	if r.publishInterval <= 0 {
		return fmt.Errorf("--publish-interval: %v must be positive", r.publishInterval)
	}
	client, host, err := kubeClient(r.kubeconfig)
	if err != nil {
		if r.kubeconfig != "" {
			return fmt.Errorf("--kubeconfig: %w", err)
		}
		return fmt.Errorf("--publish: %w", err)
	}
	o.apiserver = host
	o.fleet.Publish = &simfleet.PublishConfig{Client: client, Interval: r.publishInterval}
	return nil
}

// warnings are the risky but legal choices, logged at startup.
func (o *options) warnings() []string {
	var out []string
	if o.nonLoopback {
		out = append(out, "listening beyond loopback: anyone who can reach these ports can claim sandboxes and, through the envd guest, run commands on this host")
	}
	if o.openNodes {
		out = append(out, "no api token: nodes are open")
	}
	if o.unisolated {
		out = append(out, "--unisolated: sandboxes are ordinary processes of this user on this host; the envd guest runs their commands here and nothing isolates them from the host or from each other")
	}
	if o.fleet.Envd != nil && len(o.fleet.Envd.Secret) == 0 {
		out = append(out, "no --envd-secret-file: envd guests take commands from anyone holding a sandbox's claim token, without an access token")
	}
	return out
}
