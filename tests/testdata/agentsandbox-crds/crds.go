// Package agentsandboxcrds embeds, for tests, the CRD manifests of the
// upstream agent-sandbox types: the two the warm-pool driver reads, and the
// Sandbox and SandboxClaim of the Pod path it is compared with. They are
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

// SandboxesYAML is sandboxes.agents.x-k8s.io, the upstream Sandbox that
// the Pod path's controller reconciles into a Pod. A cluster where this
// project's APIService serves that group must not have it.
//
//go:embed agents.x-k8s.io_sandboxes.yaml
var SandboxesYAML []byte

// SandboxClaimsYAML is sandboxclaims.extensions.agents.x-k8s.io, which the
// Pod path's controller answers by adopting a warm pool's Sandbox.
//
//go:embed extensions.agents.x-k8s.io_sandboxclaims.yaml
var SandboxClaimsYAML []byte
