package codeinterp_test

import (
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/codeinterp"
)

func TestIsTemplate(t *testing.T) {
	for name, want := range map[string]bool{
		"e2b-ci": true, "e2b-ci:latest": true, "e2b-ci:v2": true,
		"base:24.04": false, "e2b-cix": false, "my/e2b-ci:latest": false, "": false,
	} {
		if got := codeinterp.IsTemplate(name); got != want {
			t.Errorf("IsTemplate(%q) = %v, want %v", name, got, want)
		}
	}
}
