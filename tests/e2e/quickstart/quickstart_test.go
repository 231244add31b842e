// Package quickstart_test runs the README's quickstart the way a new user
// does: start the one-command local system (sandbox-e2b-local), take the
// `export` lines it prints, and run tools/quickstart/quickstart.mjs with the
// unmodified e2b SDK against it.
package quickstart_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
	"github.com/cocoonstack/sandbox-operator/tests/nodejs"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const runTimeout = 3 * time.Minute

func TestQuickstartAgainstLocalSystem(t *testing.T) {
	project := nodejs.Setup(t, "tools/quickstart")
	project.Copy(t, "quickstart.mjs")
	binary := testbin.Path(t, "SANDBOX_E2B_LOCAL", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b-local")
	env := harness.StartLocal(t, binary)
	for _, name := range []string{"E2B_API_URL", "E2B_DOMAIN", "E2B_SANDBOX_URL"} {
		if !hasVar(env, name) {
			t.Fatalf("sandbox-e2b-local did not export %s (got %q)", name, env)
		}
	}

	runCtx, runCancel := context.WithTimeout(context.Background(), runTimeout)
	defer runCancel()
	out := project.Run(t, runCtx, env, "quickstart.mjs")
	for _, want := range []string{"created sandbox sb-", "command said: hello from the sandbox",
		"inside the sandbox: cwd /home/user, user user, hostname sb-", "holds: written by the quickstart",
		"port 8000 served: hello from a web server in the sandbox", "killed sandbox sb-",
		"paused at its timeout", `a request woke it: the file holds "kept while paused", the sandbox is running`,
		"built template quickstart (", "sandbox from the template holds: hello from a template / HELLO FROM A TEMPLATE",
		"deleted template quickstart",
		"the code interpreter printed: six times seven is 42", "and returned a chart: a "} {
		if !strings.Contains(out, want) {
			t.Errorf("quickstart output lacks %q:\n%s", want, out)
		}
	}
}

func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}
