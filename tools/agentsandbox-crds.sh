#!/usr/bin/env bash
# Generates, for tests only, the CRD manifests of the upstream agent-sandbox
# types from the Go types of the module version in go.mod, into
# tests/testdata/agentsandbox-crds/: the two the warm-pool driver reads
# (SandboxTemplate and SandboxWarmPool, extensions.agents.x-k8s.io/v1beta1),
# and for the Pod path this project is compared with (the upstream
# controller, //tools/agent-sandbox-controller) Sandbox
# (agents.x-k8s.io/v1beta1) and SandboxClaim. Only v1beta1 is generated: the
# tests speak v1beta1 alone, so no conversion webhook is needed.
# Nothing upstream is copied: controller-gen derives the schema from the
# types. The chart ships no upstream CRD; clusters apply upstream's own.
#
# Usage: tools/agentsandbox-crds.sh            regenerate in place
#        tools/agentsandbox-crds.sh --verify   fail when the files drift
set -euo pipefail

CONTROLLER_TOOLS_VERSION=v0.21.0
CONTROLLER_GEN="sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

out_dir="tests/testdata/agentsandbox-crds"
keep=(
	extensions.agents.x-k8s.io_sandboxtemplates.yaml
	extensions.agents.x-k8s.io_sandboxwarmpools.yaml
	extensions.agents.x-k8s.io_sandboxclaims.yaml
	agents.x-k8s.io_sandboxes.yaml
)

generate() {
	local out="$1" tmp
	tmp="$(mktemp -d)"
	go run "${CONTROLLER_GEN}" crd:crdVersions=v1 \
		paths=sigs.k8s.io/agent-sandbox/extensions/api/v1beta1 \
		paths=sigs.k8s.io/agent-sandbox/api/v1beta1 \
		output:crd:dir="${tmp}"
	for f in "${keep[@]}"; do
		cp "${tmp}/${f}" "${out}/${f}"
	done
	rm -rf "${tmp}"
}

case "${1:-}" in
"")
	generate "${out_dir}"
	;;
--verify)
	tmp="$(mktemp -d)"
	trap 'rm -rf "${tmp}"' EXIT
	generate "${tmp}"
	status=0
	for f in "${keep[@]}"; do
		diff -u "${out_dir}/${f}" "${tmp}/${f}" || status=1
	done
	if [[ ${status} -ne 0 ]]; then
		echo "agent-sandbox test CRDs are out of date: run tools/agentsandbox-crds.sh" >&2
	fi
	exit "${status}"
	;;
*)
	echo "usage: $0 [--verify]" >&2
	exit 2
	;;
esac
