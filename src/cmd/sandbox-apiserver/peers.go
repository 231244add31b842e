package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/cocoonstack/sandbox-operator/src/peerwrites"
	"github.com/cocoonstack/sandbox-operator/src/serve"
	"github.com/cocoonstack/sandbox-operator/src/warmpool"
)

// podIPEnv names the replica's own pod IP (the chart sets it from the
// downward API), which EndpointSlice discovery leaves out of the peers.
const podIPEnv = "POD_IP"

// peerOptions share each replica's writes with the others.
type peerOptions struct {
	bindAddress string
	peers       []string
	service     string
	timeout     time.Duration
}

func (o *peerOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.bindAddress, "peer-bind-address", o.bindAddress,
		"Listen here for the other replicas' writes, so every replica answers what one replica has answered at once (docs/sandbox-apiserver.md, \"Read your writes across replicas\"). Empty turns sharing off, which only a single replica may do. The writes are signed with a key derived from the sandboxd token, so that token is required.")
	fs.StringSliceVar(&o.peers, "peers", o.peers,
		"The other replicas' --peer-bind-address as host:port, for replicas outside Kubernetes' service discovery; use --peer-service in a cluster.")
	fs.StringVar(&o.service, "peer-service", o.service,
		"The Service, in the pod's namespace, whose EndpointSlices list the replicas: each endpoint, ready or not, at --peer-bind-address's port, except the pod's own IP ($POD_IP).")
	fs.DurationVar(&o.timeout, "peer-timeout", peerwrites.DefaultTimeout,
		"How long a write waits for the other replicas to take it before it is answered; a replica that has not taken it by then shows it when the node publishes.")
}

func (o *peerOptions) validate() error {
	if o.bindAddress == "" && (len(o.peers) > 0 || o.service != "") {
		return errors.New("--peers and --peer-service need --peer-bind-address: a replica that sends its writes must take the others'")
	}
	if len(o.peers) > 0 && o.service != "" {
		return errors.New("--peers and --peer-service are alternatives; give one")
	}
	if o.timeout <= 0 {
		return fmt.Errorf("--peer-timeout must be positive, got %v", o.timeout)
	}
	for _, p := range o.peers {
		if _, _, err := net.SplitHostPort(p); err != nil {
			return fmt.Errorf("--peers: %q is not host:port: %w", p, err)
		}
	}
	return nil
}

// peerSharing is the sending and receiving half of write sharing, and the
// discovery behind them; nil when sharing is off.
type peerSharing struct {
	key       []byte
	sharer    *peerwrites.Sharer
	discovery *peerwrites.EndpointSlicePeers
}

func newPeerSharing(o *peerOptions, token string, kube kubernetes.Interface, logger *slog.Logger) (*peerSharing, error) {
	if o.bindAddress == "" {
		return nil, nil
	}
	key, err := peerwrites.DeriveKey(token)
	if err != nil {
		return nil, fmt.Errorf("--peer-bind-address: %w", err)
	}
	p := &peerSharing{key: key}
	peers := peerwrites.StaticPeers(o.peers)
	if o.service != "" {
		_, portText, err := net.SplitHostPort(o.bindAddress)
		if err != nil {
			return nil, fmt.Errorf("--peer-bind-address: %w", err)
		}
		port, err := strconv.Atoi(portText)
		if err != nil || port == 0 {
			return nil, fmt.Errorf("--peer-bind-address needs a fixed port with --peer-service, got %q", o.bindAddress)
		}
		self := os.Getenv(podIPEnv)
		if self == "" {
			logger.Warn("$POD_IP is not set: this replica also sends its writes to itself", "env", podIPEnv)
		}
		p.discovery, err = peerwrites.NewEndpointSlicePeers(kube, warmpool.DefaultLeaseNamespace(), o.service, port, self)
		if err != nil {
			return nil, err
		}
		peers = p.discovery.Peers
	}
	p.sharer, err = peerwrites.NewSharer(peerwrites.SharerConfig{
		Peers: peers, Key: key, Timeout: o.timeout, Logger: logger.With("component", "peerwrites"),
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// listen binds the receiving listener, so a taken port fails startup, and
// returns what serves it until ctx ends.
func (p *peerSharing) listen(o *peerOptions, apply func([]peerwrites.Write), logger *slog.Logger) (func(context.Context) error, error) {
	h, err := peerwrites.NewHandler(peerwrites.HandlerConfig{Key: p.key, Apply: apply, Logger: logger.With("component", "peerwrites")})
	if err != nil {
		return nil, err
	}
	srv, err := serve.Listen(serve.ServerConfig{Name: "peer writes", Addr: o.bindAddress, Handler: h, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("--peer-bind-address: %w", err)
	}
	return srv.Serve, nil
}
