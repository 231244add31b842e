package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b/app"
	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/mesh"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// options are sandbox-e2b's command-line flags.
type options struct {
	// E2B are the --e2b-* flags the surface shares with sandbox-apiserver.
	E2B *e2b.Options

	Sandboxd      []string
	SandboxdToken sandboxd.TokenOptions

	MeshRefreshInterval time.Duration
	MeshNodeTimeout     time.Duration

	EnvdProxyBindAddress string
	EnvdProxyTLSCertFile string
	EnvdProxyTLSKeyFile  string
	EnvdProxyLimits      envdproxy.Limits
	GuestHTTP2           bool

	MetricsBindAddress string
}

// newOptions returns the flag defaults.
func newOptions() *options {
	return &options{
		E2B:                 e2b.NewOptions(),
		MeshRefreshInterval: mesh.DefaultRefreshInterval,
		MeshNodeTimeout:     mesh.DefaultNodeTimeout,
		EnvdProxyLimits:     envdproxy.DefaultLimits(),
	}
}

// addFlags registers every sandbox-e2b flag on fs.
func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.Sandboxd, "sandboxd", o.Sandboxd,
		"Seed sandboxd node address (host:port or http(s)://host:port), repeated or comma-separated; at least one. The other mesh members are found through the nodes' own gossip (GET /v1/peers); give each seed as the nodes advertise themselves. Seeds are retried for as long as the process runs.")
	o.SandboxdToken.AddFlags(fs)
	fs.DurationVar(&o.MeshRefreshInterval, "mesh-refresh-interval", o.MeshRefreshInterval,
		"Time between two refreshes of the mesh view: members through GET /v1/peers, warm counts through GET /v1/info, sandbox owners through GET /v1/sandboxes. A node that fails a refresh or a call leaves the view until it answers again.")
	fs.DurationVar(&o.MeshNodeTimeout, "mesh-node-timeout", o.MeshNodeTimeout,
		"Bound on every call to one node made for the whole mesh (a refresh probe, one node's share of a list or an owner lookup), so one dead or hung node never stalls the others.")
	o.E2B.AddFlags(fs)
	fs.StringVar(&o.EnvdProxyBindAddress, "envd-proxy-bind-address", o.EnvdProxyBindAddress,
		"Address the e2b data plane (the envd proxy, {port}-{sandboxID}.{--e2b-domain} hosts or E2b-Sandbox-Id/E2b-Sandbox-Port headers) listens on in this process; empty serves no data plane (run sandbox-envd-proxy elsewhere).")
	fs.StringVar(&o.EnvdProxyTLSCertFile, "envd-proxy-tls-cert-file", o.EnvdProxyTLSCertFile,
		"Wildcard certificate for *.{--e2b-domain} served by the data plane. Omit to serve cleartext (HTTP/1.1 and h2c) behind an edge that terminates TLS. Set together with --envd-proxy-tls-private-key-file.")
	fs.StringVar(&o.EnvdProxyTLSKeyFile, "envd-proxy-tls-private-key-file", o.EnvdProxyTLSKeyFile,
		"Private key for --envd-proxy-tls-cert-file.")
	o.EnvdProxyLimits.AddFlags(fs, "envd-proxy-")
	fs.BoolVar(&o.GuestHTTP2, "guest-http2", o.GuestHTTP2,
		"Forward data-plane requests to the guest over cleartext HTTP/2. Off by default: envd 0.8.0 serves HTTP/1.1 only. Clients still reach the data plane over HTTP/2.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		"Address of a separate listener serving the process's metrics (Go runtime, process, and the sandbox_operator_ claim metrics) at /metrics for Prometheus, without authentication; empty (the default) serves none.")
}

// config validates the options and reads the files they name. Each error
// names the flag that fixes it.
func (o *options) config() (app.Config, error) {
	var seeds []string
	for _, s := range o.Sandboxd {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return app.Config{}, errors.New("--sandboxd: at least one seed node address is required")
	}
	token, err := o.SandboxdToken.Load()
	if err != nil {
		return app.Config{}, fmt.Errorf("--sandboxd-token-file: %w", err)
	}
	if token == "" {
		return app.Config{}, errors.New("set --sandboxd-token-file (or --sandboxd-token): the surface reads claim tokens and runs lifecycle verbs with the nodes' root api_token")
	}
	if o.MeshRefreshInterval <= 0 {
		return app.Config{}, fmt.Errorf("--mesh-refresh-interval: %v must be positive", o.MeshRefreshInterval)
	}
	if o.MeshNodeTimeout <= 0 {
		return app.Config{}, fmt.Errorf("--mesh-node-timeout: %v must be positive", o.MeshNodeTimeout)
	}
	if (o.EnvdProxyTLSCertFile == "") != (o.EnvdProxyTLSKeyFile == "") {
		return app.Config{}, errors.New("--envd-proxy-tls-cert-file and --envd-proxy-tls-private-key-file must be set together")
	}
	if o.EnvdProxyBindAddress == "" {
		switch {
		case o.EnvdProxyTLSCertFile != "":
			return app.Config{}, errors.New("--envd-proxy-tls-cert-file: has no effect without --envd-proxy-bind-address")
		case o.GuestHTTP2:
			return app.Config{}, errors.New("--guest-http2: has no effect without --envd-proxy-bind-address")
		}
	}
	if err := o.EnvdProxyLimits.Validate("envd-proxy-"); err != nil {
		return app.Config{}, err
	}
	e2bCfg, err := o.E2B.Config()
	if err != nil {
		return app.Config{}, err
	}
	return app.Config{
		E2B:             e2bCfg,
		APIAddress:      o.E2B.BindAddress,
		Seeds:           seeds,
		Token:           token,
		RefreshInterval: o.MeshRefreshInterval,
		NodeTimeout:     o.MeshNodeTimeout,
		ProxyAddress:    o.EnvdProxyBindAddress,
		TLSCertFile:     o.EnvdProxyTLSCertFile,
		TLSKeyFile:      o.EnvdProxyTLSKeyFile,
		GuestHTTP2:      o.GuestHTTP2,
		ProxyLimits:     o.EnvdProxyLimits,
		MetricsAddress:  o.MetricsBindAddress,
	}, nil
}
