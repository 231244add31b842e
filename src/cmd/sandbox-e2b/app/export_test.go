package app

import "github.com/cocoonstack/sandbox-operator/src/e2b"

// Surface is the process's e2b surface, so tests can list the routes the
// assembled process serves rather than those of a surface built apart.
func Surface(p *Process) *e2b.Server { return p.surface }
