#!/usr/bin/env bash
# Copies, for tests only, cert-manager's CRD manifests for the kinds the
# chart renders (Issuer and Certificate, cert-manager.io/v1) into
# tests/testdata/cert-manager-crds/, so that a test can install them in its
# API server without reaching outside at test time.
#
# They come from the Go module github.com/cert-manager/cert-manager, which
# carries the generated manifests in deploy/crds (the schemas cert-manager's
# own Helm chart installs). The module is fetched with `go mod download`
# through the Go toolchain's usual module proxy and checksum database, in a
# scratch directory, so this repository's go.mod and go.sum are untouched.
# The module's LICENSE is copied next to the manifests, and VERSION records
# the module version and its go.sum hash.
#
# Usage: tools/cert-manager-crds.sh            refresh in place
#        tools/cert-manager-crds.sh --verify   fail when the files drift
set -euo pipefail

CERT_MANAGER_MODULE=github.com/cert-manager/cert-manager
CERT_MANAGER_VERSION=v1.21.2

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

out_dir="tests/testdata/cert-manager-crds"
# The CRDs of the kinds templates/cert-manager.yaml renders. Add a file
# here when the chart starts rendering another cert-manager kind.
keep=(cert-manager.io_certificates.yaml cert-manager.io_issuers.yaml)

# module_info prints the module cache directory of the pinned module and,
# on the second line, its go.sum hash, downloading it if needed.
module_info() {
	local scratch json
	scratch="$(mktemp -d)"
	# Outside any module: nothing in this repository is read or changed.
	json="$(cd "${scratch}" && GOWORK=off GOFLAGS='' go mod download -json "${CERT_MANAGER_MODULE}@${CERT_MANAGER_VERSION}")"
	rm -rf "${scratch}"
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"${json}"
	sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p' <<<"${json}"
}

generate() {
	local out="$1" info dir sum f
	info="$(module_info)"
	dir="$(sed -n 1p <<<"${info}")"
	sum="$(sed -n 2p <<<"${info}")"
	if [[ -z "${dir}" || -z "${sum}" || ! -d "${dir}/deploy/crds" ]]; then
		echo "no deploy/crds in ${CERT_MANAGER_MODULE}@${CERT_MANAGER_VERSION} (module dir: '${dir}')" >&2
		exit 1
	fi
	for f in "${keep[@]}"; do
		# The module cache is read-only; install gives the copy normal modes.
		install -m 0644 "${dir}/deploy/crds/${f}" "${out}/${f}"
	done
	install -m 0644 "${dir}/LICENSE" "${out}/LICENSE"
	printf '%s %s %s\n' "${CERT_MANAGER_MODULE}" "${CERT_MANAGER_VERSION}" "${sum}" >"${out}/VERSION"
}

case "${1:-}" in
"")
	mkdir -p "${out_dir}"
	generate "${out_dir}"
	;;
--verify)
	tmp="$(mktemp -d)"
	trap 'rm -rf "${tmp}"' EXIT
	generate "${tmp}"
	status=0
	for f in "${keep[@]}" LICENSE VERSION; do
		diff -u "${out_dir}/${f}" "${tmp}/${f}" || status=1
	done
	if [[ ${status} -ne 0 ]]; then
		echo "cert-manager test CRDs are out of date: run tools/cert-manager-crds.sh" >&2
	fi
	exit "${status}"
	;;
*)
	echo "usage: $0 [--verify]" >&2
	exit 2
	;;
esac
