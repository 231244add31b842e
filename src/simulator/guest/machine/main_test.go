package machine_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
)

// baseRootFS is the real base template root filesystem every test sandbox
// runs on, so the tests see what a user's sandbox sees.
var baseRootFS string

// The test binary is also every sandbox's init and program (isolate
// re-executes it); Init takes those roles over before the tests run.
func TestMain(m *testing.M) {
	isolate.Init()
	var err error
	baseRootFS, err = rootfs.Base()
	if err != nil {
		// Missing is a broken setup, not a reason to pass without testing.
		fmt.Fprintln(os.Stderr, "machine tests need the base root filesystem:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
