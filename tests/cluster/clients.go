package cluster

import (
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Client rate limits: tests create objects in bursts, and client-go's
// defaults (5 QPS) would make them wait on the client rather than on the
// server.
const (
	clientQPS   = 200
	clientBurst = 400
)

// AdminConfig returns a new client configuration for AdminUser, who is in
// system:masters. Callers may modify it.
func (c *Cluster) AdminConfig() *rest.Config { return c.UserConfig(AdminUser) }

// UserConfig returns a new client configuration that authenticates as the
// named user: AdminUser, UnprivilegedUser or one added with WithUser. It
// panics for any other name, which is a mistake in the test.
func (c *Cluster) UserConfig(name string) *rest.Config {
	u, ok := c.users.lookup(name)
	if !ok {
		panic(fmt.Sprintf("cluster: no user %q; add it with WithUser", name))
	}
	return &rest.Config{
		Host:            c.host,
		BearerToken:     u.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData()},
		QPS:             clientQPS,
		Burst:           clientBurst,
		UserAgent:       "sandbox-operator-test-cluster/" + name,
	}
}

// Kubeconfig is the path of a kubeconfig file for AdminUser, for processes
// the test starts (kubectl, or an aggregated apiserver's --kubeconfig,
// --authentication-kubeconfig and --authorization-kubeconfig).
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// Clientset is a typed client for AdminUser.
func (c *Cluster) Clientset() kubernetes.Interface { return c.clientset }

// Dynamic is a dynamic client for AdminUser.
func (c *Cluster) Dynamic() dynamic.Interface { return c.dynamic }

// writeKubeconfig writes a kubeconfig for the named user into the cluster's
// directory and returns its path.
func (c *Cluster) writeKubeconfig(name string) (string, error) {
	cfg := c.UserConfig(name)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name, Namespace: "default"}
	kc.CurrentContext = "test"
	path := filepath.Join(c.dir, name+".kubeconfig")
	// WriteToFile writes with mode 0600: the file holds a bearer token.
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("write kubeconfig for %s: %w", name, err)
	}
	return path, nil
}

// RESTMapping maps a kind to its resource through the cluster's discovery
// (asked afresh each call, so CRDs and aggregated APIs installed since are
// known).
func (c *Cluster) RESTMapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", gvk, err)
	}
	return m, nil
}
