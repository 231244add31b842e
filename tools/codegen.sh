#!/usr/bin/env bash
# Regenerates everything derived from the Go API types:
#   - zz_generated.deepcopy.go next to each API package (controller-gen "object")
#   - the CRD manifests in the chart's crds/ folder (controller-gen "crd")
#
# controller-gen runs through `go run pkg@version`, so its own dependencies
# never enter this module's go.mod and every machine uses the same pinned
# release. v0.21.x is the line built against k8s.io v0.36.
#
# Usage: tools/codegen.sh            regenerate in place
#        tools/codegen.sh --verify   regenerate into a temp dir and fail on drift
set -euo pipefail

CONTROLLER_TOOLS_VERSION=v0.21.0
CONTROLLER_GEN="sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

api_paths="./src/apis/..."
api_dir="src/apis/nodeinventory/v1beta1"
crd_dir="charts/sandbox-operator/crds"
header="tools/boilerplate.go.txt"

generate() {
	local object_out="$1" crd_out="$2"
	go run "${CONTROLLER_GEN}" \
		object:headerFile="${header}" \
		crd:crdVersions=v1 \
		paths="${api_paths}" \
		output:object:dir="${object_out}" \
		output:crd:dir="${crd_out}"
}

case "${1:-}" in
"")
	generate "${api_dir}" "${crd_dir}"
	;;
--verify)
	tmp="$(mktemp -d)"
	trap 'rm -rf "${tmp}"' EXIT
	mkdir -p "${tmp}/object" "${tmp}/crd"
	generate "${tmp}/object" "${tmp}/crd"
	status=0
	diff -u "${api_dir}/zz_generated.deepcopy.go" "${tmp}/object/zz_generated.deepcopy.go" || status=1
	for f in "${tmp}"/crd/*.yaml; do
		diff -u "${crd_dir}/$(basename "${f}")" "${f}" || status=1
	done
	if [[ ${status} -ne 0 ]]; then
		echo "generated files are out of date: run tools/codegen.sh" >&2
	fi
	exit "${status}"
	;;
*)
	echo "usage: $0 [--verify]" >&2
	exit 2
	;;
esac
