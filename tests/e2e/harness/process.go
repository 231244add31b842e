package harness

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// stopGrace is how long a server started by StartProcess gets to stop after
// SIGTERM before it is killed.
const stopGrace = 20 * time.Second

// StartProcess runs binary with args as a server named name, its output in
// dir/<name>.log and env added to the test's environment (plus
// OPERATOR_LOG_LEVEL=debug before env, so env may override it), handing
// it listeners (from Listen; their addresses go in args). It is stopped
// when the test ends; a server that had exited by then fails the test, and
// a failed test shows the end of its log.
func StartProcess(t testing.TB, name, binary, dir string, args, env []string, listeners ...*net.TCPListener) *testbin.Process {
	t.Helper()
	p, err := testbin.StartProcess(name, binary, filepath.Join(dir, name+".log"), args, append([]string{"OPERATOR_LOG_LEVEL=debug"}, env...), listeners...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", p.LogTail(80))
		}
		if err := p.Stop(stopGrace); err != nil {
			t.Errorf("stop %s: %v\n%s", name, err, p.LogTail(40))
		}
	})
	return p
}
