// Command sandbox-apiserver will serve sandboxes.agents.x-k8s.io/v1beta1 as a
// storeless aggregated apiserver over per-node NodeInventory objects.
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
	fmt.Fprintln(os.Stderr, "sandbox-apiserver: not implemented in this build yet (see docs/roadmap.md)")
	os.Exit(2)
}
