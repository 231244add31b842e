// Command sandboxd-sim runs a fleet of simulated sandboxd nodes on one
// machine, for development and tests of everything that talks to sandboxd.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cocoonstack/sandbox-operator/src/internal/logging"
	"github.com/cocoonstack/sandbox-operator/src/serve"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// Exit codes: 2 is the conventional one for a bad command line.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	isolate.Init() // a re-executed sandbox init runs here and never returns
	os.Exit(run(serve.SignalContext(), os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program: it parses args, starts the fleet, prints one
// "NODE <name> <host:port>" line per node to stdout and serves until ctx
// ends. Logs and errors go to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout)
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "sandboxd-sim: %v\nRun 'sandboxd-sim --help' for the flags.\n", err)
		return exitUsage
	}

	logger := logging.New(stderr, opts.logLevel)
	for _, w := range opts.warnings() {
		logger.Warn(w)
	}
	cfg := opts.fleet
	cfg.Logger = logger
	if cfg.Publish != nil {
		logger.Info("publishing NodeInventory objects", "apiserver", opts.apiserver, "interval", cfg.Publish.Interval)
	}

	if !opts.unisolated {
		iso, err := simfleet.NewIsolation(cfg.ScratchRoot, fmt.Sprintf("sandbox-operator-sim-%d", os.Getpid()), logger)
		if err != nil {
			fmt.Fprintf(stderr, "sandboxd-sim: sandboxes cannot be isolated on this machine: %v\nPass --unisolated to run them as processes of this user instead.\n", err)
			return exitFailure
		}
		defer func() { _ = iso.Close() }()
		cfg.Isolation = iso
	}

	f, err := simfleet.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd-sim: %v\n", err)
		return exitFailure
	}
	// Every node is bound: a socket handed over for no node's address is
	// closed, and said so, rather than left accepting into nothing.
	serve.CloseUnclaimedListeners(logger)
	for _, n := range f.Nodes() {
		fmt.Fprintf(stdout, "NODE %s %s\n", n.Name(), n.Addr())
	}
	g := serve.NewGroup(ctx, logger)
	g.Go("simulated fleet", func(ctx context.Context) error { <-ctx.Done(); return f.Close() })
	if err := g.Wait(); err != nil {
		fmt.Fprintf(stderr, "sandboxd-sim: shutting down: %v\n", err)
		return exitFailure
	}
	return exitOK
}
