package main

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeClient builds the client NodeInventory publishing uses. explicit is
// --kubeconfig; when it is empty client-go's usual rules apply: the files
// in $KUBECONFIG, else ~/.kube/config, else the in-cluster service account.
// It also returns the apiserver host, for the startup log.
func kubeClient(explicit string) (dynamic.Interface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = explicit
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.UserAgent = "sandboxd-sim"
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return client, cfg.Host, nil
}
