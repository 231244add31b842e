package buildsteps

import (
	"os"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// TestMain lets the test binary be the init of the isolated sandboxes the
// build tests run in, and stops the shared fleet after them.
func TestMain(m *testing.M) {
	isolate.Init() // a re-executed sandbox init runs here and never returns
	code := m.Run()
	stopFleet()
	os.Exit(code)
}
