// Command sandbox-e2b serves the e2b-compatible REST surface, and
// optionally its envd data plane, on a sandboxd mesh without Kubernetes:
// it finds the nodes through sandboxd's own gossip, starting from seed
// addresses.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b/app"
	"github.com/cocoonstack/sandbox-operator/src/internal/logging"
	"github.com/cocoonstack/sandbox-operator/src/serve"
)

const usageHeader = `sandbox-e2b serves the e2b-compatible REST API (point the e2b SDK's
E2B_API_URL at --e2b-bind-address) on a sandboxd mesh, outside Kubernetes.
It starts from the --sandboxd seed nodes, learns the other members through
their gossip (GET /v1/peers), reads warm counts (GET /v1/info) and sandbox
owners (GET /v1/sandboxes) every --mesh-refresh-interval, and claims with
sandboxd's redirect protocol. With --envd-proxy-bind-address it also serves
the envd data plane in the same process.

Sandboxes are scoped by namespace exactly as in Kubernetes: each is claimed
with claim_ref <namespace>/<name>, the namespace of the API key that made it.

Logs go to stderr at OPERATOR_LOG_LEVEL (debug, info, warn, error; default
info) and never contain tokens, secrets or API keys. SIGINT or SIGTERM drains
in-flight requests and exits.

Usage: sandbox-e2b [flags]

Flags:
`

func main() {
	os.Exit(run(serve.SignalContext(), os.Args[1:], os.Stdout, os.Stderr))
}

func newFlagSet(o *options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("sandbox-e2b", pflag.ContinueOnError)
	o.addFlags(fs)
	return fs
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts := newOptions()
	if exit, ok := serve.ParseCommandLine(newFlagSet(opts), usageHeader, args, stdout, stderr); !ok {
		return exit
	}
	logger, err := logging.FromEnv(stderr, os.Getenv(logging.LevelEnv))
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-e2b: %v\n", err)
		return serve.ExitUsage
	}
	serve.LimitMemory(logger, "")
	cfg, err := opts.config()
	if err != nil {
		return serve.UsageError(stderr, "sandbox-e2b", err)
	}
	if cfg.E2B.AllowAnonymous {
		logger.Warn("--e2b-allow-anonymous: the e2b surface serves callers without an API key")
	}

	p, err := app.Start(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-e2b: %v\n", err)
		return serve.ExitFailure
	}
	if err := p.Run(ctx); err != nil {
		logger.Error("sandbox-e2b stopped", "err", err)
		return serve.ExitFailure
	}
	return serve.ExitOK
}
