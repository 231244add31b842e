package apiserverenv

import "testing"

// A start that failed before anything ran leaves every part nil; tearing
// down and showing logs must still work.
func TestTeardownNothingStarted(t *testing.T) {
	if err := Teardown(nil, nil, nil); err != nil {
		t.Errorf("Teardown = %v, want nil", err)
	}
	if tail := LogTails(nil, 10, nil); tail != "" {
		t.Errorf("LogTails = %q, want empty", tail)
	}
}
