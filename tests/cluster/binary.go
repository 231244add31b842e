package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const (
	// APIServerEnv names the environment variable that gives the
	// kube-apiserver binary's runfiles location under Bazel (the test's
	// data and env attributes set it).
	APIServerEnv = "KUBE_APISERVER"
	// APIServerPackage is the main package built when APIServerEnv is
	// unset.
	APIServerPackage = "github.com/cocoonstack/sandbox-operator/tests/cluster/cmd/kube-apiserver"
)

// versionPackage is where Kubernetes binaries keep their version, filled
// in at link time.
const versionPackage = "k8s.io/component-base/version"

var binaryCache struct {
	sync.Mutex
	path string
}

// APIServerBinary returns the kube-apiserver a cluster runs unless
// WithAPIServerBinary names another: the Bazel-built one when APIServerEnv
// is set, otherwise one built with go build (see testbin.Locate) and
// stamped with the version of k8s.io/kubernetes that go.mod selects. The
// result is kept for the life of the process, so only the first cluster
// pays for the build; a TestMain or benchmark may call it up front to keep
// the build out of its measurements.
func APIServerBinary() (string, error) {
	binaryCache.Lock()
	defer binaryCache.Unlock()
	if binaryCache.path != "" {
		return binaryCache.path, nil
	}
	var ldflags string
	if os.Getenv(APIServerEnv) == "" {
		version, err := kubernetesModuleVersion()
		if err != nil {
			return "", err
		}
		ldflags, err = versionLDFlags(version)
		if err != nil {
			return "", err
		}
	}
	path, err := testbin.Locate(APIServerEnv, APIServerPackage, ldflags)
	if err != nil {
		return "", err
	}
	binaryCache.path = path
	return path, nil
}

// kubernetesModuleVersion asks the go command which k8s.io/kubernetes the
// module builds, so the stamp never disagrees with go.mod.
func kubernetesModuleVersion() (string, error) {
	out, err := exec.Command(testbin.GoTool(), "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes").Output()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			return "", fmt.Errorf("go list -m k8s.io/kubernetes: %w: %s", err, ee.Stderr)
		}
		return "", fmt.Errorf("go list -m k8s.io/kubernetes: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// versionLDFlags stamps version (vMAJOR.MINOR.PATCH) into the binary the way
// the Kubernetes release build does; without it the server reports
// v0.0.0-master.
func versionLDFlags(version string) (string, error) {
	major, rest, ok := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, ok2 := strings.Cut(rest, ".")
	if !strings.HasPrefix(version, "v") || !ok || !ok2 || major == "" || minor == "" {
		return "", fmt.Errorf("k8s.io/kubernetes version %q is not vMAJOR.MINOR.PATCH", version)
	}
	return fmt.Sprintf("-X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=%[3]s -X %[1]s.gitMinor=%[4]s -X %[1]s.gitTreeState=clean",
		versionPackage, version, major, minor), nil
}
