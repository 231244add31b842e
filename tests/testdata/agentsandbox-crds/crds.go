// Package agentsandboxcrds embeds, for tests, the CRD manifests of the two
// upstream agent-sandbox types the warm-pool driver reads. They are
// generated from the Go types of sigs.k8s.io/agent-sandbox (the version in
// go.mod) by tools/agentsandbox-crds.sh; nothing here is shipped.
package agentsandboxcrds

import _ "embed"

// SandboxTemplatesYAML is sandboxtemplates.extensions.agents.x-k8s.io.
//
//go:embed extensions.agents.x-k8s.io_sandboxtemplates.yaml
var SandboxTemplatesYAML []byte

// SandboxWarmPoolsYAML is sandboxwarmpools.extensions.agents.x-k8s.io.
//
//go:embed extensions.agents.x-k8s.io_sandboxwarmpools.yaml
var SandboxWarmPoolsYAML []byte
