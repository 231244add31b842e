package harness

import (
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/simulator/faultlink"
)

// StartLink starts a faultlink.Link from listen to target that the test's
// cleanup closes.
func StartLink(t testing.TB, listen, target string) *faultlink.Link {
	t.Helper()
	l, err := faultlink.Start(listen, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}
