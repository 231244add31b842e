package buildsteps

import (
	"errors"
	"strings"
	"testing"
)

func asStepError(t *testing.T, err error) *StepError {
	t.Helper()
	var se *StepError
	if !errors.As(err, &se) {
		t.Fatalf("got %v (%T), want a *StepError", err, err)
	}
	return se
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
