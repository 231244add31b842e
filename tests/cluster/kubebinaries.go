package cluster

import (
	"fmt"
	"os"
	"path"

	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// The node cluster's programs, each built from k8s.io/kubernetes at the
// version go.mod pins: under Bazel a test passes their runfiles locations
// (//tools/kube) in these variables; under plain go test they are built.
const (
	KubeletEnv               = "KUBELET"
	KubeControllerManagerEnv = "KUBE_CONTROLLER_MANAGER"
	KubeSchedulerEnv         = "KUBE_SCHEDULER"
	KubeProxyEnv             = "KUBE_PROXY"
	KubectlEnv               = "KUBECTL"
)

// kubeBinary returns the Kubernetes command name (kubelet, kubectl, ...):
// from env under Bazel, otherwise built from k8s.io/kubernetes/cmd/<name>
// and version-stamped as a release build is.
func kubeBinary(env, name string) (string, error) {
	var ldflags string
	if os.Getenv(env) == "" {
		version, err := kubernetesModuleVersion()
		if err != nil {
			return "", err
		}
		if ldflags, err = versionLDFlags(version); err != nil {
			return "", err
		}
	}
	p, err := testbin.Locate(env, path.Join("k8s.io/kubernetes/cmd", name), ldflags)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// KubectlBinary returns the kubectl built from k8s.io/kubernetes (see
// kubeBinary).
func KubectlBinary() (string, error) { return kubeBinary(KubectlEnv, "kubectl") }
