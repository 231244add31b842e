// Command sandboxd-sim runs a fleet of simulated sandboxd nodes on one
// machine, for development and tests of everything that talks to sandboxd.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/fleet"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

const usageHeader = `sandboxd-sim runs simulated sandboxd nodes that speak the sandboxd HTTP API
(claims, warm pools, lifecycle verbs, checkpoints, the guest-port relay, peers,
drain, metrics). Nodes are peers of each other: a warm miss on one node
redirects to a node that has warm capacity.

SECURITY: simulated guests serve real loopback listeners and a guest plugged
in later may run commands on this host. Nodes bind 127.0.0.1 unless
--listen-host says otherwise; never expose the simulator to a network.

Each node is printed on startup as "NODE <name> <host:port>". SIGINT or
SIGTERM stops every node and removes their scratch directories.

Usage: sandboxd-sim [flags]

Flags:
`

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "sandboxd-sim:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("sandboxd-sim", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHeader)
		fs.PrintDefaults()
	}
	var (
		nodes        = fs.Int("nodes", 1, "number of nodes in the fleet, each on its own port and named <name-prefix><index>")
		listenHost   = fs.String("listen-host", "127.0.0.1", "address every node binds; keep it loopback (see SECURITY above)")
		basePort     = fs.Int("base-port", 0, "node i listens on base-port+i; 0 picks free ports")
		namePrefix   = fs.String("name-prefix", "sim-node-", "node name prefix")
		apiToken     = fs.String("api-token", "", "root api_token of every node; empty (with no --api-token-file) makes open nodes. Prefer --api-token-file")
		apiTokenFile = fs.String("api-token-file", "", "file holding the root api_token; overrides --api-token")
		tenantsFile  = fs.String("tenant-tokens-file", "", "file of tenants, one per line: <name> <token> [max_claims]; '#' starts a comment")
		pools        = fs.String("pools", "", "initial pools of every node: comma-separated <template>:<net>:<size>=<warm>; net and size may be empty for none/small (e.g. base:24.04:none:small=4,py:3.12::=2)")
		refillDelay  = fs.Duration("refill-delay", 0, "time to clone one warm VM from a pool's golden; a warm miss on a pooled key provisions in the same time")
		coldDelay    = fs.Duration("cold-provision-delay", 0, "time to cold-boot: a claim for an unpooled key, and a new pool's golden")
		refillConc   = fs.Int("refill-concurrency", 8, "warm VMs cloned at once per node")
		maxClaims    = fs.Int("max-claims", 0, "live claims per node before 429; 0 is unlimited")
		maxFork      = fs.Int("max-fork-count", 16, "largest count one fork may ask for")
		defaultTTL   = fs.Duration("default-ttl", sandboxd.DefaultTTL, "lease granted for ttl_seconds 0")
		maxTTL       = fs.Duration("max-ttl", sandboxd.MaxTTL, "longest lease granted; longer requests are clamped")
		reapInterval = fs.Duration("reap-interval", time.Second, "how often expired leases are reaped")
		echoPorts    = fs.String("echo-ports", strconv.Itoa(fleet.DefaultEchoPort), "comma-separated guest ports serving the HTTP echo (HTTP/1.1 and h2c); empty for none")
		tcpEchoPorts = fs.String("tcp-echo-ports", "", "comma-separated guest ports serving a raw TCP echo that honours half-close")
		scratchDir   = fs.String("scratch-dir", "", "directory for per-sandbox scratch directories; default a temp directory removed on exit")
		logLevel     = fs.String("log-level", "info", "log level: debug, info, warn or error (logs go to stderr and never contain tokens)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	token := *apiToken
	if *apiTokenFile != "" {
		t, err := readSecret(*apiTokenFile)
		if err != nil {
			return fmt.Errorf("--api-token-file: %w", err)
		}
		token = t
	}
	tenants, err := readTenants(*tenantsFile)
	if err != nil {
		return fmt.Errorf("--tenant-tokens-file: %w", err)
	}
	poolSpecs, err := parsePools(*pools)
	if err != nil {
		return fmt.Errorf("--pools: %w", err)
	}
	httpEcho, err := parsePorts(*echoPorts)
	if err != nil {
		return fmt.Errorf("--echo-ports: %w", err)
	}
	tcpEcho, err := parsePorts(*tcpEchoPorts)
	if err != nil {
		return fmt.Errorf("--tcp-echo-ports: %w", err)
	}
	if ip := net.ParseIP(*listenHost); *listenHost != "localhost" && (ip == nil || !ip.IsLoopback()) {
		logger.Warn("listening beyond loopback: anyone who can reach these ports can claim sandboxes", "listen_host", *listenHost)
	}
	if token == "" {
		logger.Warn("no api token: nodes are open")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	f, err := fleet.Start(ctx, fleet.Config{
		Nodes:              *nodes,
		ListenHost:         *listenHost,
		BasePort:           *basePort,
		NamePrefix:         *namePrefix,
		RootToken:          token,
		Tenants:            tenants,
		Pools:              poolSpecs,
		MaxClaims:          *maxClaims,
		MaxForkCount:       *maxFork,
		RefillDelay:        *refillDelay,
		ColdProvisionDelay: *coldDelay,
		RefillConcurrency:  *refillConc,
		DefaultTTL:         *defaultTTL,
		MaxTTL:             *maxTTL,
		ReapInterval:       *reapInterval,
		EchoPorts:          httpEcho,
		TCPEchoPorts:       tcpEcho,
		ScratchRoot:        *scratchDir,
		Logger:             logger,
	})
	if err != nil {
		return err
	}
	for _, n := range f.Nodes() {
		fmt.Printf("NODE %s %s\n", n.Name(), n.Addr())
	}
	<-ctx.Done()
	logger.Info("shutting down")
	return f.Close()
}

// readSecret reads a token file, trimming surrounding whitespace.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

func readTenants(path string) ([]node.Tenant, error) {
	if path == "" {
		return nil, nil
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var out []node.Tenant
	sc := bufio.NewScanner(file)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 2 || len(fields) > 3 {
			// Never echo the line: it holds a token.
			return nil, fmt.Errorf("line %d: want <name> <token> [max_claims]", line)
		}
		t := node.Tenant{Name: fields[0], Token: fields[1]}
		if len(fields) == 3 {
			n, err := strconv.Atoi(fields[2])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("line %d: max_claims must be a non-negative integer", line)
			}
			t.MaxClaims = n
		}
		out = append(out, t)
	}
	return out, sc.Err()
}

// parsePools parses <template>:<net>:<size>=<warm>,… . The template may
// itself contain colons (base:24.04), so net and size are the last two
// colon-separated fields.
func parsePools(spec string) ([]sandboxd.PoolSpec, error) {
	var out []sandboxd.PoolSpec
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		keyPart, warmPart, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q: missing =<warm>", item)
		}
		warm, err := strconv.Atoi(warmPart)
		if err != nil || warm < 0 {
			return nil, fmt.Errorf("%q: warm must be a non-negative integer", item)
		}
		parts := strings.Split(keyPart, ":")
		if len(parts) < 3 {
			return nil, fmt.Errorf("%q: want <template>:<net>:<size>=<warm>", item)
		}
		size, netName := parts[len(parts)-1], parts[len(parts)-2]
		template := strings.Join(parts[:len(parts)-2], ":")
		if template == "" {
			return nil, fmt.Errorf("%q: empty template", item)
		}
		out = append(out, sandboxd.PoolSpec{Template: template, Net: netName, Size: size, Warm: warm})
	}
	return out, nil
}

func parsePorts(spec string) ([]int, error) {
	out := []int{} // non-nil: an empty flag means no echo guest
	for _, p := range strings.Split(spec, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q is not a port", p)
		}
		out = append(out, n)
	}
	return out, nil
}
