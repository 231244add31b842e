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
}

func newProcessTable() *processTable {
	return &processTable{byPID: map[uint32]*process{}}
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
// waits for each to be reaped.
func (t *processTable) closeAll() error {
	t.mu.Lock()
	t.closed = true
	procs := make([]*process, 0, len(t.byPID))
	for _, p := range t.byPID {
		procs = append(procs, p)
	}
	t.mu.Unlock()

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
