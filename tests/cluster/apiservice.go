package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"
)

// APIServiceSpec describes an aggregated API to route to a server the test
// runs on loopback.
type APIServiceSpec struct {
	// Group and Version of the API, e.g. "agents.x-k8s.io" and "v1beta1".
	// Required.
	Group, Version string
	// Namespace of the Service fronting the server; "default" when empty.
	// Created if missing.
	Namespace string
	// ServiceName of that Service; derived from Group when empty.
	ServiceName string
	// Port the server will listen on; a free one is chosen when zero.
	Port int32
	// CABundle is the PEM CA that signed the server's serving certificate.
	// When empty the aggregator skips verifying it, as for a server that
	// self-signs at start.
	CABundle []byte
	// GroupPriorityMinimum and VersionPriority order the API in discovery;
	// 1000 and 15 when zero.
	GroupPriorityMinimum, VersionPriority int32
}

// EndpointSliceAddress is the address in the EndpointSlice that
// RegisterAPIService creates. The aggregator never dials it (it dials the
// ClusterIP), but its availability check wants a ready endpoint, and
// validation refuses loopback addresses there; 198.51.100.1 is reserved
// for documentation (TEST-NET-2) and routes nowhere.
const EndpointSliceAddress = "198.51.100.1"

// endpointSliceManager marks the EndpointSlice as not the endpoint-slice
// controller's, should one ever run against this cluster.
const endpointSliceManager = "sandbox-operator-test-cluster"

// APIServiceName is the name of the APIService object for group and
// version.
func APIServiceName(group, version string) string { return version + "." + group }

// RegisterAPIService routes spec's group/version through the
// kube-apiserver's aggregator to a server on loopback. It picks a ClusterIP
// in ServiceIPRange that can be bound here, creates a Service with it and
// the port, an EndpointSlice for the availability check and the APIService,
// and returns a listener already bound at the Service's ClusterIP and port.
// On a node cluster (StartNodeCluster) the Service takes a ClusterIP of the
// node's range, which kube-proxy routes to the EndpointSlice's address, and
// the listener is bound at the node's address.
//
// The listener is handed to the aggregated server (testbin.StartProcess
// passes it to a child, which takes it through src/serve) or served on in
// the test, never closed and bound again: between a close and a bind
// another process may take the port. The caller closes it if it is not
// used. Wait for the API with WaitAPIServiceAvailable once the server
// serves.
func (c *Cluster) RegisterAPIService(ctx context.Context, spec APIServiceSpec) (*net.TCPListener, error) {
	if spec.Group == "" || spec.Version == "" {
		return nil, errors.New("register APIService: Group and Version are required")
	}
	if spec.Namespace == "" {
		spec.Namespace = metav1.NamespaceDefault
	}
	if spec.ServiceName == "" {
		spec.ServiceName = serviceNameFor(spec.Group)
	}
	if err := c.ensureNamespace(ctx, spec.Namespace); err != nil {
		return nil, err
	}
	create := c.createLoopbackService
	if c.nodeIP != "" {
		create = c.createNodeService
	}
	svc, ln, err := create(ctx, spec)
	if err != nil {
		return nil, err
	}
	registered := false
	defer func() {
		if !registered {
			_ = ln.Close()
		}
	}()
	port := svc.Spec.Ports[0].Port
	if err := c.createEndpointSlice(ctx, svc); err != nil {
		return nil, err
	}

	agg, err := aggregatorclient.NewForConfig(c.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("aggregator client: %w", err)
	}
	apiService := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: APIServiceName(spec.Group, spec.Version)},
		Spec: apiregistrationv1.APIServiceSpec{
			Service: &apiregistrationv1.ServiceReference{
				Namespace: spec.Namespace,
				Name:      spec.ServiceName,
				Port:      ptr.To(port),
			},
			Group:                 spec.Group,
			Version:               spec.Version,
			CABundle:              spec.CABundle,
			InsecureSkipTLSVerify: len(spec.CABundle) == 0,
			GroupPriorityMinimum:  cmp.Or(spec.GroupPriorityMinimum, 1000),
			VersionPriority:       cmp.Or(spec.VersionPriority, 15),
		},
	}
	if _, err := agg.ApiregistrationV1().APIServices().Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create APIService %s: %w", apiService.Name, err)
	}
	registered = true
	return ln, nil
}

// WaitAPIServiceAvailable waits until the named APIService (see
// APIServiceName) reports Available=True, which the aggregator sets once a
// discovery request through the Service succeeds, or until ctx ends; the
// error then carries the last reason the aggregator gave.
func (c *Cluster) WaitAPIServiceAvailable(ctx context.Context, name string) error {
	agg, err := aggregatorclient.NewForConfig(c.AdminConfig())
	if err != nil {
		return fmt.Errorf("aggregator client: %w", err)
	}
	last := "no status yet"
	err = wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		svc, err := agg.ApiregistrationV1().APIServices().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range svc.Status.Conditions {
			if cond.Type == apiregistrationv1.Available {
				last = fmt.Sprintf("%s: %s", cond.Reason, cond.Message)
				return cond.Status == apiregistrationv1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not available (%s): %w", name, last, err)
	}
	return nil
}

// serviceNameFor derives a DNS-label Service name from an API group.
func serviceNameFor(group string) string {
	name := "api-" + strings.ReplaceAll(group, ".", "-")
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	return name
}

func (c *Cluster) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// maxIPAttempts bounds the search for a ClusterIP that is neither taken
// by another Service nor bound by another process on this machine.
const maxIPAttempts = 20

// createLoopbackService creates spec's Service on a random loopback
// ClusterIP (127.0.0.10-250: .1 is the kubernetes Service's) where
// spec's port, or a free one, can be bound right now.
func (c *Cluster) createLoopbackService(ctx context.Context, spec APIServiceSpec) (*corev1.Service, *net.TCPListener, error) {
	var lastErr error
	for range maxIPAttempts {
		ip := fmt.Sprintf("127.0.0.%d", 10+rand.IntN(241))
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.ParseIP(ip), Port: int(spec.Port)})
		if err != nil {
			lastErr = fmt.Errorf("bind %s:%d: %w", ip, spec.Port, err)
			continue
		}
		port := int32(ln.Addr().(*net.TCPAddr).Port)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: spec.ServiceName, Namespace: spec.Namespace},
			Spec: corev1.ServiceSpec{
				Type:      corev1.ServiceTypeClusterIP,
				ClusterIP: ip,
				Ports: []corev1.ServicePort{{
					Name:       "https",
					Protocol:   corev1.ProtocolTCP,
					Port:       port,
					TargetPort: intstr.FromInt32(port),
				}},
			},
		}
		created, err := c.clientset.CoreV1().Services(spec.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		if err == nil {
			return created, ln, nil
		}
		_ = ln.Close()
		// Another Service of this cluster holds the IP: try another.
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "already allocated") {
			lastErr = err
			continue
		}
		return nil, nil, fmt.Errorf("create Service %s/%s: %w", spec.Namespace, spec.ServiceName, err)
	}
	return nil, nil, fmt.Errorf("no bindable ClusterIP in %s after %d attempts: %w", ServiceIPRange, maxIPAttempts, lastErr)
}

// createNodeService is createLoopbackService on a cluster with a node: the
// node's kube-proxy routes the Service's ClusterIP (allocated from the
// node's own service range) to the EndpointSlice's address, so the server
// listens at the node's address, where the slice points.
func (c *Cluster) createNodeService(ctx context.Context, spec APIServiceSpec) (*corev1.Service, *net.TCPListener, error) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.ParseIP(c.nodeIP), Port: int(spec.Port)})
	if err != nil {
		return nil, nil, fmt.Errorf("bind %s:%d: %w", c.nodeIP, spec.Port, err)
	}
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: spec.ServiceName, Namespace: spec.Namespace},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{
				Name: "https", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port),
			}},
		},
	}
	created, err := c.clientset.CoreV1().Services(spec.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		_ = ln.Close()
		return nil, nil, fmt.Errorf("create Service %s/%s: %w", spec.Namespace, spec.ServiceName, err)
	}
	return created, ln, nil
}

func (c *Cluster) createEndpointSlice(ctx context.Context, svc *corev1.Service) error {
	port := svc.Spec.Ports[0]
	address := EndpointSliceAddress
	if c.nodeIP != "" {
		address = c.nodeIP
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      svc.Name,
			Namespace: svc.Namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svc.Name,
				discoveryv1.LabelManagedBy:   endpointSliceManager,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{address},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{
			Name:     ptr.To(port.Name),
			Protocol: ptr.To(port.Protocol),
			Port:     ptr.To(port.Port),
		}},
	}
	if _, err := c.clientset.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create EndpointSlice %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}
