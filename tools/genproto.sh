#!/usr/bin/env bash
# Regenerates the Go code for the envd wire contracts under src/envd/ from
# the .proto files in src/envd/proto/. Run from anywhere; the output is
# deterministic for the pinned plugin versions below, so a diff after running
# it means someone hand-edited generated code or changed a .proto.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.11
PROTOC_GEN_CONNECT_GO_VERSION=v1.21.1

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
module="github.com/cocoonstack/sandbox-operator"
proto_dir="${repo_root}/src/envd/proto"

if ! command -v protoc >/dev/null 2>&1; then
	echo "protoc not found; installing protobuf-compiler via apt-get" >&2
	sudo_cmd=""
	if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
	${sudo_cmd} apt-get update -qq
	${sudo_cmd} apt-get install -y -qq protobuf-compiler
fi

# The well-known types (google/protobuf/timestamp.proto) ship with protoc's
# packaging; find their include root instead of assuming one layout.
wkt_include=""
for dir in /usr/include /usr/local/include; do
	if [ -f "${dir}/google/protobuf/timestamp.proto" ]; then
		wkt_include="${dir}"
		break
	fi
done
if [ -z "${wkt_include}" ]; then
	echo "google/protobuf/timestamp.proto not found (install libprotobuf-dev)" >&2
	exit 1
fi

# Plugins go to a throwaway GOBIN so nothing lands in the repository or in
# the caller's PATH.
gobin="$(mktemp -d)"
trap 'rm -rf "${gobin}"' EXIT
GOBIN="${gobin}" GOFLAGS='' go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
GOBIN="${gobin}" GOFLAGS='' go install "connectrpc.com/connect/cmd/protoc-gen-connect-go@${PROTOC_GEN_CONNECT_GO_VERSION}"

cd "${repo_root}"
# -I proto_dir keeps the registered file names "process/process.proto" and
# "filesystem/filesystem.proto", the same names the SDK's descriptors use.
PATH="${gobin}:${PATH}" protoc \
	-I "${proto_dir}" \
	-I "${wkt_include}" \
	--go_out=. --go_opt=module="${module}" \
	--connect-go_out=. --connect-go_opt=module="${module}" \
	process/process.proto \
	filesystem/filesystem.proto

echo "generated: src/envd/processpb src/envd/filesystempb" >&2
