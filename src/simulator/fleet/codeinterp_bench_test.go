package fleet_test

import (
	"testing"

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
// kernel's own execution.
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
	for range b.N {
		ci.run(b, map[string]any{"code": "1+1"})
	}
}
