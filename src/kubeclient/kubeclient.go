// Package kubeclient holds what the binaries that talk to Kubernetes
// share: where their client configuration comes from, and routing the
// client libraries' klog output into the process logger.
package kubeclient

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/cocoonstack/sandbox-operator/src/oplog"
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

// RouteKlog sends klog (client-go, and in sandbox-apiserver the generic
// apiserver library) into logger. klog's verbose levels map onto slog
// below info, so they appear only when level is debug.
func RouteKlog(logger *slog.Logger, level slog.Level) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	verbosity := "0"
	if level <= slog.LevelDebug {
		verbosity = "4"
	}
	_ = fs.Set("v", verbosity)
	klog.SetSlogLogger(logger)
}

// ProcessLogger is the logger of a binary that talks to Kubernetes: the
// level from OPERATOR_LOG_LEVEL (see package oplog), klog routed into it.
func ProcessLogger(w io.Writer) (*slog.Logger, error) {
	level, err := oplog.ParseLevel(os.Getenv(oplog.LevelEnv))
	if err != nil {
		return nil, err
	}
	logger := oplog.New(w, level)
	RouteKlog(logger, level)
	return logger, nil
}
