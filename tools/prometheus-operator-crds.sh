#!/usr/bin/env bash
# Copies, for tests only, prometheus-operator's CRD manifests for the kinds
# the chart's monitoring values render (ServiceMonitor and PrometheusRule,
# monitoring.coreos.com/v1) into tests/testdata/prometheus-operator-crds/, so
# tests/integration/monitoring can install them in its own kube-apiserver
# without fetching anything while it runs.
#
# The source is the Go module github.com/prometheus-operator/prometheus-operator,
# whose example/prometheus-operator-crd directory holds the generated CRDs
# (the ones the project's bundle.yaml installs). `go mod download` fetches the
# module through the usual module proxy and checksum database, from a scratch
# directory, so this repository's go.mod and go.sum stay as they are. The
# module's LICENSE and NOTICE travel with the manifests; VERSION records the
# module version and its go.sum hash.
#
# Usage: tools/prometheus-operator-crds.sh            refresh in place
#        tools/prometheus-operator-crds.sh --verify   fail when the files drift
set -euo pipefail

PROMETHEUS_OPERATOR_MODULE=github.com/prometheus-operator/prometheus-operator
PROMETHEUS_OPERATOR_VERSION=v0.85.0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

out_dir="tests/testdata/prometheus-operator-crds"
crd_dir="example/prometheus-operator-crd"
# One CRD per kind the chart renders; list another here when a template
# starts rendering it (a PodMonitor, a Probe, ...).
keep=(monitoring.coreos.com_prometheusrules.yaml monitoring.coreos.com_servicemonitors.yaml)
# The module's own files that go with the copies.
legal=(LICENSE NOTICE)

# module_info prints the module's directory in the module cache and, on a
# second line, its go.sum hash; it downloads the module when it is missing.
module_info() {
	local scratch json
	scratch="$(mktemp -d)"
	# No go.mod in the scratch directory: the download neither reads nor
	# records anything of this repository.
	json="$(cd "${scratch}" && GOWORK=off GOFLAGS='' go mod download -json "${PROMETHEUS_OPERATOR_MODULE}@${PROMETHEUS_OPERATOR_VERSION}")"
	rm -rf "${scratch}"
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"${json}"
	sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p' <<<"${json}"
}

generate() {
	local out="$1" info dir sum f
	info="$(module_info)"
	dir="$(sed -n 1p <<<"${info}")"
	sum="$(sed -n 2p <<<"${info}")"
	if [[ -z "${dir}" || -z "${sum}" || ! -d "${dir}/${crd_dir}" ]]; then
		echo "no ${crd_dir} in ${PROMETHEUS_OPERATOR_MODULE}@${PROMETHEUS_OPERATOR_VERSION} (module dir: '${dir}')" >&2
		exit 1
	fi
	for f in "${keep[@]}"; do
		# Files in the module cache are read-only; install writes a copy
		# with ordinary permissions.
		install -m 0644 "${dir}/${crd_dir}/${f}" "${out}/${f}"
	done
	for f in "${legal[@]}"; do
		install -m 0644 "${dir}/${f}" "${out}/${f}"
	done
	printf '%s %s %s\n' "${PROMETHEUS_OPERATOR_MODULE}" "${PROMETHEUS_OPERATOR_VERSION}" "${sum}" >"${out}/VERSION"
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
	for f in "${keep[@]}" "${legal[@]}" VERSION; do
		diff -u "${out_dir}/${f}" "${tmp}/${f}" || status=1
	done
	if [[ ${status} -ne 0 ]]; then
		echo "prometheus-operator test CRDs are out of date: run tools/prometheus-operator-crds.sh" >&2
	fi
	exit "${status}"
	;;
*)
	echo "usage: $0 [--verify]" >&2
	exit 2
	;;
esac
