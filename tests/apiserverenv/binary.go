package apiserverenv

import "github.com/cocoonstack/sandbox-operator/tests/testbin"

// BinaryEnv names the environment variable holding the sandbox-apiserver
// binary's runfiles location under Bazel (the caller lists
// //src/cmd/sandbox-apiserver in its data).
const BinaryEnv = "SANDBOX_APISERVER"

// binaryPkg is what Binary builds when BinaryEnv is unset.
const binaryPkg = "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-apiserver"

// Binary returns the sandbox-apiserver executable: from BinaryEnv under
// Bazel, otherwise built (and cached) by testbin.Locate. A first build
// takes minutes, so callers locate it before any start-up deadline begins.
func Binary() (string, error) {
	return testbin.Locate(BinaryEnv, binaryPkg, "")
}
