// Package kubeclient holds where the binaries that talk to Kubernetes get
// their client configuration.
package kubeclient

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig is the kubeconfig at path, else the one $KUBECONFIG names,
// else the in-cluster service account.
func RESTConfig(path string) (*rest.Config, error) {
	if path == "" {
		path = os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	}
	if path != "" {
		c, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
		}
		return c, nil
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no in-cluster config (outside a cluster set KUBECONFIG or --kubeconfig): %w", err)
	}
	return c, nil
}
