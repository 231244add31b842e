package main

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

const usageHeader = `sandbox-e2b-local starts the whole e2b-compatible system on this machine
with nothing else installed: a simulated sandboxd mesh (--nodes nodes on
127.0.0.1 that gossip with each other, each sandbox serving an
envd-compatible guest), a warm pool behind the e2b SDK's default template
alias "base", the e2b REST surface (--port) and its data plane (--data-plane-port).
The first --cold-nodes nodes hold no warm VMs, so a claim that enters there
is redirected by sandboxd to a warm peer.

On stdout it prints shell export lines for the e2b SDK, then "# ready":

  export E2B_API_URL='http://127.0.0.1:3000'
  ...
  # ready

Paste the export lines into the shell that runs the SDK (they are valid
input for eval), and leave this command running.

E2B_API_URL, E2B_API_KEY, E2B_DOMAIN and E2B_SANDBOX_URL are exported;
E2B_SANDBOX_URL makes the SDK reach every sandbox's envd through the data
plane with E2b-Sandbox-Id/E2b-Sandbox-Port headers over plain http. Leave
E2B_DEBUG unset: the SDK's debug mode skips the API altogether.

Each request is logged to stderr on one line (listener, method, path, status,
duration). SIGINT or SIGTERM stops everything: servers, simulated nodes,
every guest process, and the temporary directories.

Every sandbox is its own machine: Linux namespaces (mount, PID, network with
its own loopback, UTS, IPC) over a Debian root filesystem (the base template
tools/bazel provisions), /home/user its writable home, hibernate a cgroup
freeze. Where that cannot run it refuses to start unless --unisolated is given.

SECURITY: with --unisolated the simulated envd guests execute the commands
they are sent as ordinary processes on THIS HOST, as the user running
sandbox-e2b-local. Isolated, a sandbox is still not a VM. Everything binds 127.0.0.1 by default, and only because of that the API
serves without an API key (--anonymous, on by default); with any other --host
pass --anonymous=false, which generates a key and exports it.

Usage: sandbox-e2b-local [flags]

Flags:
`

// options is the parsed command line.
type options struct {
	unisolated      bool
	host            string
	port, dataPort  int
	metricsPort     int // -1: no metrics listener
	nodes           int
	coldNodes       int
	warm            int
	template        string
	domain          string
	anonymous       bool
	refillDelay     time.Duration
	coldDelay       time.Duration
	refreshInterval time.Duration
	defaultTimeout  int
	dataPlaneLimits envdproxy.Limits
	builds          bool
	buildDir        string
	buildParallel   int
	buildUploadMax  int64
	volumes         []string
	// codeInterpreterWarm is the warm code-interpreter sandboxes each warm
	// node keeps per lane; 0 serves no code interpreter.
	codeInterpreterWarm int
	// volumeCatalog is volumes parsed by validate.
	volumeCatalog []node.Volume
}

func newFlagSet(o *options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("sandbox-e2b-local", pflag.ContinueOnError)
	fs.StringVar(&o.host, "host", "127.0.0.1", "address the e2b API and the data plane bind (the simulated nodes always bind 127.0.0.1). Anything but loopback lets others run commands on this host")
	fs.IntVar(&o.port, "port", 3000, "port of the e2b REST API (E2B_API_URL); 0 picks a free one")
	fs.IntVar(&o.dataPort, "data-plane-port", 3001, "port of the envd data plane (E2B_SANDBOX_URL); 0 picks a free one")
	fs.IntVar(&o.metricsPort, "metrics-port", 3002, "port of the Prometheus metrics listener (/metrics); 0 picks a free one, -1 serves none")
	fs.IntVar(&o.nodes, "nodes", 3, "simulated sandboxd nodes in the mesh")
	fs.IntVar(&o.coldNodes, "cold-nodes", 1, "how many of the nodes hold no warm VMs for the pool (a claim entering there is redirected); fewer than --nodes")
	fs.IntVar(&o.warm, "warm", 3, "warm VMs each other node keeps for the pool")
	fs.StringVar(&o.template, "template", "e2b-base:latest", `pool image the SDK's default alias "base" claims from`)
	fs.StringVar(&o.domain, "domain", "sandbox.localhost", "e2b domain (E2B_DOMAIN); sandbox hosts are {port}-{sandboxID}.{domain}")
	fs.BoolVar(&o.unisolated, "unisolated", false, "run sandboxes as ordinary processes of this user on this host instead of isolated machines, where namespaces or the base root filesystem are not available; every start says so")
	fs.BoolVar(&o.anonymous, "anonymous", true, "serve the API without an API key, which is allowed only because everything binds loopback (E2B_API_KEY is then a placeholder the SDK insists on); --anonymous=false generates a key and exports it, and is required with a non-loopback --host")
	fs.DurationVar(&o.refillDelay, "refill-delay", 50*time.Millisecond, "simulated time to clone one warm VM")
	fs.DurationVar(&o.coldDelay, "cold-provision-delay", 500*time.Millisecond, "simulated time to cold-boot a VM (an unpooled template, a pool's first golden)")
	fs.DurationVar(&o.refreshInterval, "mesh-refresh-interval", time.Second, "time between refreshes of the mesh view")
	fs.IntVar(&o.defaultTimeout, "default-timeout", 300, "lease in seconds of a create that names no timeout")
	fs.BoolVar(&o.builds, "builds", true, "serve the e2b template build API (Template.build), keeping uploaded files in --build-dir")
	fs.StringVar(&o.buildDir, "build-dir", "", "directory that keeps the files template builds upload (default e2b-builds in the user's cache, next to the base root filesystem)")
	fs.IntVar(&o.buildParallel, "build-parallel", 2, "template builds that run at once; a start beyond them answers 429 and waits")
	fs.Int64Var(&o.buildUploadMax, "build-upload-max", 1<<30, "largest archive in bytes a template build's upload may be")
	fs.IntVar(&o.codeInterpreterWarm, "code-interpreter-warm", 1, "warm code-interpreter sandboxes (template alias "+e2b.CodeInterpreterAlias+", the @e2b/code-interpreter SDK's default; image "+e2b.CodeInterpreterImage+") each warm node keeps per lane; each runs an IPython kernel. 0 serves no code interpreter; --unisolated serves none")
	fs.StringArrayVar(&o.volumes, "volume", nil, "a volume of the nodes' catalog, repeatable: <name>=<host dir>[,writable]. Volume.list lists it; a create's volumeMounts bind-mount the host directory into the sandbox (read-write when writable)")
	o.dataPlaneLimits = envdproxy.DefaultLimits()
	o.dataPlaneLimits.AddFlags(fs, "data-plane-")
	return fs
}

// validate refuses values the local system cannot run with.
func (o *options) validate() error {
	switch {
	case o.host == "":
		return errors.New("--host: must not be empty")
	case o.port < 0 || o.port > 65535:
		return fmt.Errorf("--port: %d is not a port", o.port)
	case o.dataPort < 0 || o.dataPort > 65535:
		return fmt.Errorf("--data-plane-port: %d is not a port", o.dataPort)
	case o.port != 0 && o.port == o.dataPort:
		return errors.New("--data-plane-port: must differ from --port")
	case o.metricsPort < -1 || o.metricsPort > 65535:
		return fmt.Errorf("--metrics-port: %d is not a port (or -1 for none)", o.metricsPort)
	case o.metricsPort > 0 && (o.metricsPort == o.port || o.metricsPort == o.dataPort):
		return errors.New("--metrics-port: must differ from --port and --data-plane-port")
	case o.nodes < 1:
		return fmt.Errorf("--nodes: %d must be at least 1", o.nodes)
	case o.coldNodes < 0 || o.coldNodes >= o.nodes:
		return fmt.Errorf("--cold-nodes: %d must be at least 0 and fewer than --nodes (%d)", o.coldNodes, o.nodes)
	case o.warm < 1:
		return fmt.Errorf("--warm: %d must be at least 1", o.warm)
	case o.template == "":
		return errors.New("--template: must not be empty")
	case o.domain == "":
		return errors.New("--domain: must not be empty")
	case o.refillDelay < 0 || o.coldDelay < 0:
		return errors.New("--refill-delay and --cold-provision-delay must not be negative")
	case o.refreshInterval <= 0:
		return fmt.Errorf("--mesh-refresh-interval: %v must be positive", o.refreshInterval)
	case o.defaultTimeout < 1:
		return fmt.Errorf("--default-timeout: %d must be at least 1", o.defaultTimeout)
	case o.buildParallel < 1:
		return fmt.Errorf("--build-parallel: %d must be at least 1", o.buildParallel)
	case o.codeInterpreterWarm < 0:
		return fmt.Errorf("--code-interpreter-warm: %d must not be negative", o.codeInterpreterWarm)
	case o.buildUploadMax < 1:
		return fmt.Errorf("--build-upload-max: %d must be at least 1", o.buildUploadMax)
	}
	if err := o.dataPlaneLimits.Validate("data-plane-"); err != nil {
		return err
	}
	vols, err := node.ParseVolumeSpecs(o.volumes)
	if err != nil {
		return fmt.Errorf("--volume: %w", err)
	}
	o.volumeCatalog = vols
	if o.anonymous && !isLoopback(o.host) {
		return fmt.Errorf("--host %s: anonymous access is allowed on loopback only; pass --anonymous=false to require the generated API key", o.host)
	}
	return nil
}

// isLoopback reports whether host names only the loopback interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
