// Package codeinterp_test runs the code-interpreter suite (tests/e2e/js/
// codeinterp.test.mjs) with the unmodified npm @e2b/code-interpreter
// against the README's main job, sandbox-e2b-local, whose
// code-interpreter-v1 alias is a pool of isolated e2b-ci sandboxes.
package codeinterp_test

import (
	"context"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
	"github.com/cocoonstack/sandbox-operator/tests/nodejs"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

func TestCodeInterpreterThroughTheSDK(t *testing.T) {
	project := nodejs.Setup(t, "tests/e2e/js")
	project.Copy(t, "lib.mjs", "codeinterp.test.mjs")
	binary := testbin.Path(t, "SANDBOX_E2B_LOCAL", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b-local")
	// Fewer nodes than the default: each warm code-interpreter sandbox
	// holds a kernel.
	env := harness.StartLocal(t, binary, "--nodes=2", "--cold-nodes=0", "--warm=1", "--code-interpreter-warm=2")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	project.Run(t, ctx, env, "--test", "--test-reporter=spec", "--test-concurrency=1", "codeinterp.test.mjs")
}
