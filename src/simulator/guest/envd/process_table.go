package envd

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
)

// closeWait bounds how long Close waits for killed processes to be reaped.
const closeWait = 10 * time.Second

var (
	errGuestClosed     = errors.New("the sandbox guest is shutting down")
	errProcessNotFound = errors.New("process not found")
)

// processTable holds the processes still running, by pid, as envd lists
// them: an ended process leaves the table.
type processTable struct {
	mu     sync.Mutex
	closed bool
	byPID  map[uint32]*process
	// lingering are process groups whose leader ended while other members
	// lived on: a shell's background jobs ("sleep 300 &"). envd loses them
	// with its VM; here Close kills them, so they do not outlive the
	// sandbox.
	lingering map[int]struct{}
}

func newProcessTable() *processTable {
	return &processTable{byPID: map[uint32]*process{}, lingering: map[int]struct{}{}}
}

// start launches req and registers it; a guest that is closing refuses.
func (t *processTable) start(req spawnRequest) (*process, *subscription, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, nil, errGuestClosed
	}
	p, sub, err := startProcess(req, t.remove)
	if err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-p.done:
		// Ended before we got here: nothing to list, but its stream still
		// gets the whole story from sub.
		return p, sub, nil
	default:
	}
	if t.closed {
		// Close ran while this one was starting and did not see it.
		p.detachAll()
		_ = p.signal(syscall.SIGKILL)
		return nil, nil, errGuestClosed
	}
	t.byPID[p.pid] = p
	return p, sub, nil
}

func (t *processTable) remove(p *process) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byPID[p.pid] == p {
		delete(t.byPID, p.pid)
	}
	// The leader is reaped, but while any member lives the kernel keeps
	// its pid pinned as the group id, so the group is still ours.
	for g := range t.lingering {
		if !groupAlive(g) {
			delete(t.lingering, g)
		}
	}
	if g := int(p.pid); groupAlive(g) {
		if t.closed {
			// Close has run or is running its sweep: do not leave this
			// one behind.
			_ = syscall.Kill(-g, syscall.SIGKILL)
			return
		}
		t.lingering[g] = struct{}{}
	}
}

// groupAlive reports whether process group g has a member.
func groupAlive(g int) bool {
	return syscall.Kill(-g, 0) == nil
}

// killLingering kills the groups whose leader ended earlier. A group id is
// a leader's pid and can be reused only once the group is empty; a live
// process with that pid then means reuse, and that group is left alone.
func (t *processTable) killLingering() {
	t.mu.Lock()
	groups := t.lingering
	t.lingering = map[int]struct{}{}
	t.mu.Unlock()
	for g := range groups {
		if errors.Is(syscall.Kill(g, 0), syscall.ESRCH) {
			_ = syscall.Kill(-g, syscall.SIGKILL)
		}
	}
}

// find resolves a selector to a running process.
func (t *processTable) find(sel *processpb.ProcessSelector) (*process, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *processpb.ProcessSelector_Pid:
		if p, ok := t.byPID[s.Pid]; ok {
			return p, nil
		}
		return nil, fmt.Errorf("process with pid %d: %w", s.Pid, errProcessNotFound)
	case *processpb.ProcessSelector_Tag:
		for _, p := range t.byPID {
			if p.tag != nil && *p.tag == s.Tag {
				return p, nil
			}
		}
		return nil, fmt.Errorf("process with tag %q: %w", s.Tag, errProcessNotFound)
	default:
		return nil, errors.New("no process selector given")
	}
}

// list returns the running processes, ordered by pid.
func (t *processTable) list() []*process {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*process, 0, len(t.byPID))
	for _, p := range t.byPID {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// closeAll refuses new processes, kills every running process group and
// waits for each to be reaped, then kills what lingers of groups whose
// leader had ended (those the guest did not start cannot be waited for).
func (t *processTable) closeAll() error {
	t.mu.Lock()
	t.closed = true
	procs := make([]*process, 0, len(t.byPID))
	for _, p := range t.byPID {
		procs = append(procs, p)
	}
	t.mu.Unlock()
	defer t.killLingering()

	var errs []error
	for _, p := range procs {
		p.detachAll()
		if err := p.signal(syscall.SIGKILL); err != nil {
			errs = append(errs, err)
		}
	}
	deadline := time.NewTimer(closeWait)
	defer deadline.Stop()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline.C:
			return errors.Join(append(errs, fmt.Errorf("envd: processes still running %s after kill", closeWait))...)
		}
	}
	return errors.Join(errs...)
}
