package cluster

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The ConfigMap through which the kube-apiserver tells aggregated servers
// how to authenticate the requests it forwards. An aggregated server built
// on k8s.io/apiserver reads it with its --authentication-kubeconfig.
const (
	ExtensionAuthNamespace = "kube-system"
	ExtensionAuthConfigMap = "extension-apiserver-authentication"
	// ExtensionAuthFrontProxyCAKey holds the front-proxy CA (PEM) in it.
	ExtensionAuthFrontProxyCAKey = "requestheader-client-ca-file"
)

// pollInterval paces every wait in this package: quick enough not to add
// noticeable latency, slow enough not to load a busy apiserver.
const pollInterval = 200 * time.Millisecond

// waitBootstrapped waits for what /readyz does not cover but every test
// relies on: the default namespace, which a controller creates after the
// server is ready, and the published front-proxy settings that aggregated
// servers read.
func (c *Cluster) waitBootstrapped(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		if _, err := c.clientset.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
			return false, ignoreNotFound(err)
		}
		cm, err := c.clientset.CoreV1().ConfigMaps(ExtensionAuthNamespace).Get(ctx, ExtensionAuthConfigMap, metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		return cm.Data[ExtensionAuthFrontProxyCAKey] != "", nil
	})
	if err != nil {
		return fmt.Errorf("wait for the default namespace and %s/%s: %w", ExtensionAuthNamespace, ExtensionAuthConfigMap, err)
	}
	return nil
}

// ignoreNotFound turns NotFound into "not yet" for a poll; other errors end
// it.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
