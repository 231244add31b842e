package simfleet_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// BenchmarkCodeInterpreterFirstCell is a warm code-interpreter sandbox's
// claim and its first cell, runCode('1+1') through the node's ports relay
// to the guest's server and its already started kernel: what a create
// plus the first cell costs below the e2b surface. The pool is refilled
// outside the timer (a refill starts a kernel).
func BenchmarkCodeInterpreterFirstCell(b *testing.B) {
	f := startCodeInterpreterFleet(b)
	n := f.Node(0)
	root, err := sandboxd.New(n.Addr(), sandboxd.WithToken(rootToken))
	if err != nil {
		b.Fatal(err)
	}
	key := sandbox.PoolKey{Template: ciTemplate}.WithDefaults()
	b.StopTimer()
	for range b.N {
		if err := n.WaitWarm(ctxT(b), key, 1); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cl, err := root.Claim(ctxT(b), sandboxd.ClaimRequest{Template: ciTemplate})
		if err != nil {
			b.Fatal(err)
		}
		lines := newCIVia(b, root, cl, accessToken(cl.Token)).run(b, map[string]any{"code": "1+1"})
		b.StopTimer()
		if r, ok := mainResult(lines); !ok || r.Text != "2" {
			b.Fatalf("1+1 answered %+v", lines)
		}
		if err := root.Release(ctxT(b), cl.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCodeInterpreterCell is one cell's round trip, runCode('1+1'),
// in a sandbox that has run cells before: the relay, the server and the
// kernel's own execution. It also reports the kernel's own time for the
// same cell (kernel-ns/cell: a jupyter client inside the sandbox timing
// 1+1 against a kernel of its own, no HTTP, no relay) and the difference,
// the overhead of the path (overhead-ns/cell).
func BenchmarkCodeInterpreterCell(b *testing.B) {
	f := startCodeInterpreterFleet(b)
	root, err := sandboxd.New(f.Node(0).Addr(), sandboxd.WithToken(rootToken))
	if err != nil {
		b.Fatal(err)
	}
	cl, err := root.Claim(ctxT(b), sandboxd.ClaimRequest{Template: ciTemplate})
	if err != nil {
		b.Fatal(err)
	}
	ci := newCIVia(b, root, cl, accessToken(cl.Token))
	ci.run(b, map[string]any{"code": "1+1"})
	b.ResetTimer()
	began := time.Now()
	for range b.N {
		ci.run(b, map[string]any{"code": "1+1"})
	}
	perCell := time.Since(began) / time.Duration(b.N)
	b.StopTimer()
	kernel := kernelOwnTime(b, root.As(cl.Token), cl.ID)
	b.ReportMetric(float64(kernel.Nanoseconds()), "kernel-ns/cell")
	b.ReportMetric(float64((perCell - kernel).Nanoseconds()), "overhead-ns/cell")
}

// kernelTimer runs in the sandbox: it starts a kernel of its own and times
// 200 executions of 1+1 through jupyter_client, printing the mean in
// nanoseconds.
const kernelTimer = `
import time
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="python3")
try:
    for _ in range(20):
        kc.execute_interactive("1+1", timeout=60, output_hook=lambda m: None)
    n, t = 200, time.perf_counter()
    for _ in range(n):
        kc.execute_interactive("1+1", timeout=60, output_hook=lambda m: None)
    print(int((time.perf_counter() - t) / n * 1e9))
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=True)
`

// kernelOwnTime is the kernel's own time for one 1+1 cell, measured inside
// the sandbox (buffered exec) so nothing of the relay or the server is in
// it.
func kernelOwnTime(b *testing.B, own *sandboxd.Client, id string) time.Duration {
	b.Helper()
	res, err := own.Exec(ctxT(b), id, sandboxd.ExecRequest{Argv: []string{"python3", "-c", kernelTimer}, TimeoutSeconds: 120})
	if err != nil {
		b.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(res.Stdout), 10, 64)
	if res.ExitCode != 0 || err != nil {
		b.Fatalf("timing the kernel in the sandbox: exit %d, %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	return time.Duration(ns)
}
