package proxybench_test

import (
	"os"
	"testing"

	"github.com/cocoonstack/sandbox-operator/tools/scale/proxybench"
)

// TestMain lets Run start this test binary again as its client process.
func TestMain(m *testing.M) {
	proxybench.RunClientIfChild()
	os.Exit(m.Run())
}
