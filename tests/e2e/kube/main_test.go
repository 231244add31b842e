package kube_test

import (
	"os"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// TestMain lets the test binary be the init of the code-interpreter
// node's isolated machines (see startCodeInterpreterNode).
func TestMain(m *testing.M) {
	isolate.Init()
	os.Exit(m.Run())
}
