package peerwrites

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// StaticPeers is a fixed list of peers.
func StaticPeers(addrs []string) func() []string {
	addrs = slices.Clone(addrs)
	return func() []string { return addrs }
}

// EndpointSlicePeers finds the replicas from the EndpointSlices of their
// Service. Every endpoint counts, ready or not: a replica that is starting
// is told about writes before it is ready to take traffic, and one that is
// terminating still answers reads while it drains. Each peer is its
// address and port; self, the replica's own pod IP, is left out.
type EndpointSlicePeers struct {
	informer cache.SharedIndexInformer
	factory  informers.SharedInformerFactory
	port     string
	self     string
}

// NewEndpointSlicePeers watches the EndpointSlices of service in
// namespace. Start it with Run.
func NewEndpointSlicePeers(client kubernetes.Interface, namespace, service string, port int, self string) (*EndpointSlicePeers, error) {
	if service == "" || namespace == "" {
		return nil, fmt.Errorf("peerwrites: the Service and its namespace are required")
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: service}).String()
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	inf := f.Discovery().V1().EndpointSlices().Informer()
	return &EndpointSlicePeers{informer: inf, factory: f, port: strconv.Itoa(port), self: self}, nil
}

// Run watches until ctx ends.
func (p *EndpointSlicePeers) Run(ctx context.Context) {
	p.factory.Start(ctx.Done())
	<-ctx.Done()
	p.factory.Shutdown()
}

// HasSynced reports whether the first list arrived.
func (p *EndpointSlicePeers) HasSynced() bool { return p.informer.HasSynced() }

// Peers is every other replica's host:port.
func (p *EndpointSlicePeers) Peers() []string {
	var out []string
	for _, obj := range p.informer.GetStore().List() {
		es, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		for _, ep := range es.Endpoints {
			for _, a := range ep.Addresses {
				if a == p.self {
					continue
				}
				hp := net.JoinHostPort(a, p.port)
				if !slices.Contains(out, hp) {
					out = append(out, hp)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
