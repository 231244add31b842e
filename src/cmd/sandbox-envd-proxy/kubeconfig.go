package main

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeClientConfig is --kubeconfig, else $KUBECONFIG, else the in-cluster
// service account — the lookup sandbox-apiserver does.
func kubeClientConfig(path string) (*rest.Config, error) {
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
