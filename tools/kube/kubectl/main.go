// Command kubectl is the upstream Kubernetes command-line client, built from the
// k8s.io/kubernetes module at the version go.mod pins, so the local cluster
// (tests/cluster) runs a real one without a downloaded release binary. It
// adds nothing to upstream; the Bazel target stamps the release version.
package main

import (
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // credential plugins, as upstream
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// Verbosity must be set before the command parses its flags.
	_, _ = logs.GlogSetter(cmd.GetLogVerbosity(os.Args))
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
