// Command kube-apiserver is the upstream Kubernetes API server, built from the
// k8s.io/kubernetes module at the version go.mod pins, so integration tests
// run a real kube-apiserver without a downloaded release binary.
//
// It adds nothing to upstream: the test cluster (package
// tests/cluster) starts it as a process with the flags it needs. The version
// it reports comes from link-time stamping (-X on
// k8s.io/component-base/version.gitVersion, gitMajor and gitMinor), done by
// the Bazel target's x_defs and by the cluster package under plain go test.
package main

import (
	"os"
	_ "time/tzdata" // CronJob timeZone validation, as upstream embeds it

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json, as upstream registers it
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics, as upstream
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
