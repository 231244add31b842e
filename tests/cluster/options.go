package cluster

import (
	"net"
	"time"
)

// DefaultStartTimeout bounds a cluster's start-up: etcd, the kube-apiserver
// answering /readyz and the aggregation layer's ConfigMap being published.
// Generous because a loaded two-core machine can be several times slower
// than the usual 10-15 s.
const DefaultStartTimeout = 90 * time.Second

// Option configures a cluster at start.
type Option func(*options)

type options struct {
	binary       string
	extraFlags   []string
	users        userTable
	startTimeout time.Duration
	servingIPs   []net.IP
}

func newOptions(opts []Option) options {
	o := options{users: defaultUsers(), startTimeout: DefaultStartTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithAPIServerBinary runs the kube-apiserver at path instead of the one
// from APIServerEnv or go build.
func WithAPIServerBinary(path string) Option {
	return func(o *options) { o.binary = path }
}

// WithAPIServerFlags appends flags to the kube-apiserver command line, after
// the cluster's own so they take precedence (for example
// "--feature-gates=...").
func WithAPIServerFlags(flags ...string) Option {
	return func(o *options) { o.extraFlags = append(o.extraFlags, flags...) }
}

// WithUser adds a token-authenticated user in groups (replacing a user of
// the same name), for UserConfig.
func WithUser(name string, groups ...string) Option {
	return func(o *options) { o.users = o.users.add(name, groups) }
}

// WithStartTimeout replaces DefaultStartTimeout.
func WithStartTimeout(d time.Duration) Option {
	return func(o *options) { o.startTimeout = d }
}

// WithServingIPs adds IP addresses to the kube-apiserver's serving
// certificate, for clients that reach it at an address other than loopback
// (pods dialling the kubernetes Service, say).
func WithServingIPs(ips ...net.IP) Option {
	return func(o *options) { o.servingIPs = append(o.servingIPs, ips...) }
}
