package harness

import (
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/simulator/link"
)

// StartLink starts a link.Link from listen to target that the test's
// cleanup closes.
func StartLink(t testing.TB, listen, target string) *link.Link {
	t.Helper()
	l, err := link.Start(listen, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}
