package warmpool

import (
	"os"
	"strings"
)

// serviceAccountNamespaceFile holds the pod's namespace inside a cluster.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// NamespaceEnv names the pod's namespace when set (the downward API's
// metadata.namespace); it wins over the service account file.
const NamespaceEnv = "POD_NAMESPACE"

// DefaultLeaseNamespace is where the lease lives: $POD_NAMESPACE, else the
// namespace of the pod's service account, else "default" (outside a
// cluster).
func DefaultLeaseNamespace() string {
	return leaseNamespace(os.Getenv, serviceAccountNamespaceFile)
}

func leaseNamespace(getenv func(string) string, saFile string) string {
	if ns := strings.TrimSpace(getenv(NamespaceEnv)); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(saFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "default"
}
