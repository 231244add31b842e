// Command kubelet is the upstream Kubernetes node agent, built from the
// k8s.io/kubernetes module at the version go.mod pins, so the local cluster
// (tests/cluster) runs a real one without a downloaded release binary. It
// adds nothing to upstream; the Bazel target stamps the release version.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json, as upstream registers it
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
