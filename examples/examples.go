// Package examples embeds the example manifests and values files, so tests
// read the very bytes a user applies, under `go test` and under Bazel alike.
//
//   - l3/template-warmpool.yaml: a SandboxTemplate and a SandboxWarmPool
//     (extensions.agents.x-k8s.io/v1beta1) that fill the nodes' warm pools;
//   - l3/sandbox.yaml: a Sandbox (agents.x-k8s.io/v1beta1) claiming from
//     that pool through sandbox-apiserver;
//   - e2b/base-warmpool.yaml: a SandboxTemplate and a SandboxWarmPool that
//     fill the egress-lane pool the e2b SDK's default template claims from;
//   - e2b/code-interpreter-warmpool.yaml: the same for the code
//     interpreter's alias (sandboxd's e2b-ci image);
//   - e2b-values.yaml: the chart values that turn on the e2b surface.
package examples

import "embed"

// Files holds the examples at their paths under examples/.
//
//go:embed l3/*.yaml e2b/*.yaml e2b-values.yaml
var Files embed.FS

// Manifests are the Kubernetes manifests among Files, in apply order.
var Manifests = []string{
	"l3/template-warmpool.yaml",
	"l3/sandbox.yaml",
	"e2b/base-warmpool.yaml",
	"e2b/code-interpreter-warmpool.yaml",
}

// E2BValues is the values file that turns on the e2b surface.
const E2BValues = "e2b-values.yaml"
