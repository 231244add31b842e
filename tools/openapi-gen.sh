#!/usr/bin/env bash
# Regenerates src/apiserver/api/openapi/zz_generated.openapi.go: the OpenAPI
# definitions sandbox-apiserver publishes at /openapi/v2 and /openapi/v3, so
# `kubectl explain sandboxes` and server-side field management know the
# Sandbox schema.
#
# The definitions cover the upstream Sandbox types (sigs.k8s.io/agent-sandbox
# api/v1beta1), this project's subresource kinds, and the Kubernetes types
# they embed (core/v1 for the pod template, apimachinery meta types).
#
# openapi-gen only emits types whose package carries a `+k8s:openapi-gen=true`
# tag, and the upstream api/v1beta1 package carries none. Rather than fork the
# upstream types, this script generates against a scratch copy of that module
# whose api/v1beta1/doc.go gains the tag, put in place by a scratch go.work
# next to this module. The import path is unchanged, so the generated code
# refers to the real upstream package. (A -modfile replace would be simpler,
# but the generator's package loader runs one `go list` with GO111MODULE=off,
# which rejects -modfile in GOFLAGS.)
#
# The subresource package also gets OpenAPIModelName methods
# (zz_generated.model_name.go, from its +k8s:openapi-model-package tag); every
# other input is read-only, since it lives in the module cache.
#
# openapi-gen is built at the kube-openapi version go.mod pins.
#
# Usage: tools/openapi-gen.sh            regenerate in place
#        tools/openapi-gen.sh --verify   regenerate into a temp dir and fail on drift
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

module="$(go list -m -f '{{.Path}}')"
out_pkg="${module}/src/apiserver/api/openapi"
out_dir="src/apiserver/api/openapi"
out_file="zz_generated.openapi.go"
# OpenAPIModelName methods for this project's own API packages.
model_dir="src/apiserver/api/subresources"
model_file="zz_generated.model_name.go"
header="tools/boilerplate.go.txt"

input_pkgs=(
	sigs.k8s.io/agent-sandbox/api/v1beta1
	"${module}/src/apiserver/api/subresources"
	k8s.io/api/core/v1
	k8s.io/apimachinery/pkg/apis/meta/v1
	k8s.io/apimachinery/pkg/runtime
	k8s.io/apimachinery/pkg/version
	k8s.io/apimachinery/pkg/api/resource
	k8s.io/apimachinery/pkg/util/intstr
)

scratch="$(mktemp -d)"
trap 'chmod -R u+w "${scratch}" 2>/dev/null; rm -rf "${scratch}"' EXIT

# openapi-gen at the pinned kube-openapi version.
kube_openapi_version="$(go list -m -f '{{.Version}}' k8s.io/kube-openapi)"
GOBIN="${scratch}/bin" GOFLAGS='' go install "k8s.io/kube-openapi/cmd/openapi-gen@${kube_openapi_version}"

# A tagged copy of the upstream API package (go.mod plus api/ is all the
# generator loads from that module).
upstream_dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)"
copy="${scratch}/agent-sandbox"
mkdir -p "${copy}"
cp "${upstream_dir}/go.mod" "${upstream_dir}/go.sum" "${copy}/"
cp -R "${upstream_dir}/api" "${copy}/api"
chmod -R u+w "${copy}"
cat >"${copy}/api/v1beta1/doc.go" <<'DOC'
// +k8s:openapi-gen=true
// +groupName=agents.x-k8s.io
package v1beta1
DOC

go_version="$(go list -m -f '{{.GoVersion}}')"
cat >"${scratch}/go.work" <<WORK
go ${go_version}

use (
	${root}
	${copy}
)
WORK

readonly_pkgs="$(printf '%s,' "${input_pkgs[@]}" | sed -e "s|${module}/src/apiserver/api/subresources,||" -e 's/,$//')"

generate() {
	local dir="$1" model_name_file="$2"
	mkdir -p "${dir}"
	GOWORK="${scratch}/go.work" "${scratch}/bin/openapi-gen" \
		--output-dir "${dir}" \
		--output-pkg "${out_pkg}" \
		--output-file "${out_file}" \
		--output-model-name-file "${model_name_file}" \
		--readonly-pkg "${readonly_pkgs}" \
		--go-header-file "${header}" \
		--report-filename "${scratch}/api-rule-violations.list" \
		"${input_pkgs[@]}"
}

case "${1:-}" in
"")
	generate "${out_dir}" "${model_file}"
	;;
--verify)
	# The model-name file is always written next to its package, so verify
	# it by content under a scratch name and compare.
	generate "${scratch}/out" "zz_verify.model_name.go"
	status=0
	diff -u "${out_dir}/${out_file}" "${scratch}/out/${out_file}" || status=1
	diff -u "${model_dir}/${model_file}" "${model_dir}/zz_verify.model_name.go" || status=1
	rm -f "${model_dir}/zz_verify.model_name.go"
	if [[ ${status} -ne 0 ]]; then
		echo "generated OpenAPI files are out of date: run tools/openapi-gen.sh" >&2
	fi
	exit "${status}"
	;;
*)
	echo "usage: $0 [--verify]" >&2
	exit 2
	;;
esac
