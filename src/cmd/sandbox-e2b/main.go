// Command sandbox-e2b will serve the e2b-compatible REST surface and its data plane on a
// sandboxd mesh, without Kubernetes.
//
// The server itself is not part of this build yet; the binary exists so the
// build layout (src/cmd/<name>) and its Bazel targets are in place. It exits
// non-zero so no deployment can mistake it for a working server.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "sandbox-e2b: not implemented in this build yet (see docs/roadmap.md)")
	os.Exit(2)
}
