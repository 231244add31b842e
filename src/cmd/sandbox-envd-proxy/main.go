// Command sandbox-envd-proxy will carry the e2b data plane (envd traffic) to the
// owning node's guest-port relay.
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
	fmt.Fprintln(os.Stderr, "sandbox-envd-proxy: not implemented in this build yet (see docs/roadmap.md)")
	os.Exit(2)
}
