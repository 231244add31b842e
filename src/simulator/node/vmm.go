package node

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// Usage-journal event names of a sandbox whose VMM died (sandboxd's
// usage.jsonl `ev`).
const (
	EventVMMExit   = "vmm_exit"
	EventVMMFailed = "vmm_failed"
)

// UsageEvent is one line of sandboxd's usage journal, as far as the
// simulator writes it: the vmm_* events of a sandbox whose machine died.
type UsageEvent struct {
	T  time.Time `json:"t"`
	Ev string    `json:"ev"`
	ID string    `json:"id"`
	VM string    `json:"vm"`
	// Ref is a vmm_failed event's reason.
	Ref string `json:"ref,omitempty"`
}

// watchMachine notices the death of sb's machine m the moment its init
// exits (isolate.Sandbox.Done), so a sandbox whose machine is killed (its
// memory limit reached by a full /dev/shm, a kill from the host) is
// failed within the instant, not at its lease's end. A machine closed by
// a release or reap is no longer sb's by then, and nothing happens.
// Called under n.mu, right after m is attached to sb.
func (n *Node) watchMachine(sb *claimed, m *isolate.Sandbox) {
	if n.ctx == nil { // a node that never started serves no machines
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		select {
		case <-m.Done():
		case <-n.ctx.Done():
			return
		}
		n.failVMM(sb, m, "vmm exited ("+exitReason(m.Err())+")")
	}()
}

// exitReason says how a machine's init ended ("signal: killed", "exit
// status 1").
func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// failVMM parks sb as failed with reason when m is still its machine (nil
// for an in-process guest set): sandboxd's failed state, for a VMM that
// exited and was not restarted. The simulator restarts no VMM, so an exit
// is at once a failure. The claim stays (listed, counted in claimed and
// against max_claims, its lease running) until it is released, woken or
// reaped; its relays are cut and the verbs that need the guest answer 409.
func (n *Node) failVMM(sb *claimed, m *isolate.Sandbox, reason string) bool {
	n.mu.Lock()
	if n.sandboxes[sb.id] != sb || sb.guests.machine != m || sb.failed != "" {
		n.mu.Unlock()
		return false
	}
	sb.failed = reason
	n.closeRelaysLocked(sb)
	vm := sb.vm
	n.mu.Unlock()
	if m == nil {
		// In-process guests stop as a dead VM's would; their scratch
		// directory is the disk a wake boots again.
		sb.guests.stop()
	}
	n.stats.vmmExits.Add(1)
	n.stats.vmmFailures.Add(1)
	n.log.Warn("sandbox failed: its VMM is down", "node", n.cfg.Name, "sandbox", sb.id, "vm", vm, "reason", reason)
	now := n.cfg.Clock.Now().UTC()
	n.usage(UsageEvent{T: now, Ev: EventVMMExit, ID: sb.id, VM: vm})
	n.usage(UsageEvent{T: now, Ev: EventVMMFailed, ID: sb.id, VM: vm, Ref: reason})
	return true
}

func (n *Node) usage(ev UsageEvent) {
	if n.cfg.Usage != nil {
		n.cfg.Usage(ev)
	}
}

// KillVMM kills the VMM of the live sandbox id, as a crash or the kernel's
// OOM killer would: an isolated machine's init gets SIGKILL from the host
// (and the watcher fails the sandbox when it exits), in-process guests are
// failed at once. For tests.
func (n *Node) KillVMM(id string) error {
	n.mu.Lock()
	sb := n.sandboxes[id]
	n.mu.Unlock()
	if sb == nil {
		return fmt.Errorf("node %s: kill the VMM of %s: no such sandbox", n.cfg.Name, id)
	}
	m := sb.guests.machine
	if m == nil {
		n.failVMM(sb, nil, "vmm exited (signal: killed)")
		return nil
	}
	if pid := m.PID(); pid > 0 {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("node %s: kill the VMM of %s (pid %d): %w", n.cfg.Name, id, pid, err)
		}
	}
	return nil
}

// refuseFailed answers the verbs that need a running guest (relay, exec,
// a guest env change) and those that snapshot one (hibernate, fork,
// checkpoint, promote) for a failed sandbox: 409 naming why it failed.
func refuseFailed(sb *claimed, verb string) *apiError {
	if sb.failed != "" {
		return errorf(http.StatusConflict, "%s: the sandbox failed (%s); wake it to boot it again from its disk, or release it", verb, sb.failed)
	}
	return nil
}

// rebootFailed is a wake of a failed sandbox: sandboxd cold-boots it from
// its own disk (memory is lost). An isolated sandbox gets a fresh machine
// over a copy of the dead one's writable layer, as a fork child does;
// in-process guests start again on their next dial over the scratch
// directory they kept. A failed egress-lane or volume sandbox answers 409,
// as sandboxd's does.
func (n *Node) rebootFailed(sb *claimed) *apiError {
	n.mu.Lock()
	if aerr := staysLive(sb, "wake of a failed sandbox"); aerr != nil {
		n.mu.Unlock()
		return aerr
	}
	if sb.rebooting {
		n.mu.Unlock()
		return errorf(http.StatusConflict, "wake: the failed sandbox is being booted again")
	}
	old := sb.guests.machine
	if old == nil {
		sb.failed = ""
		sb.hibernated = false
		sb.lastActive = n.cfg.Clock.Now()
		n.stats.wakes.Add(1)
		n.mu.Unlock()
		return nil
	}
	sb.rebooting = true
	n.mu.Unlock()

	m, err := n.bootFromDisk(sb, old)
	n.mu.Lock()
	sb.rebooting = false
	if err == nil && n.sandboxes[sb.id] != sb {
		err = fmt.Errorf("node %s: sandbox %s was released while it booted", n.cfg.Name, sb.id)
	}
	if err != nil {
		n.mu.Unlock()
		if m != nil {
			_ = m.Close()
		}
		n.log.Warn("wake: booting the failed sandbox again failed", "node", n.cfg.Name, "sandbox", sb.id, "err", err)
		return errorf(http.StatusInternalServerError, "wake: the cold boot failed")
	}
	sb.guests.attach(m, n.cfg.Isolation.ControlPort)
	n.watchMachine(sb, m)
	sb.failed = ""
	sb.hibernated = false
	sb.lastActive = n.cfg.Clock.Now()
	n.stats.wakes.Add(1)
	n.mu.Unlock()
	if err := n.deliver(n.ctx, sb); err != nil {
		n.log.Warn("wake: the booted machine did not take the claim", "node", n.cfg.Name, "sandbox", sb.id, "err", err)
		return errorf(http.StatusInternalServerError, "wake: the cold boot failed")
	}
	return nil
}

// bootFromDisk starts a fresh machine for sb over the writable layer of
// its dead machine old, which it closes. Never under n.mu.
func (n *Node) bootFromDisk(sb *claimed, old *isolate.Sandbox) (*isolate.Sandbox, error) {
	dir, err := os.MkdirTemp(n.scratch, "reboot-")
	if err != nil {
		return nil, fmt.Errorf("node %s: boot %s again: %w", n.cfg.Name, sb.id, err)
	}
	defer os.RemoveAll(dir)
	layer := filepath.Join(dir, "layer")
	if err := old.SaveLayer(layer); err != nil {
		return nil, fmt.Errorf("node %s: boot %s again: save its disk: %w", n.cfg.Name, sb.id, err)
	}
	// The dead machine's id is the new one's (its hostname), so it goes
	// first.
	_ = old.Close()
	ctx, cancel := context.WithTimeout(n.ctx, machineReadyTimeout)
	defer cancel()
	return n.startMachine(ctx, sb.id, sb.key, layer)
}

// MachinePID is the host pid of the init of sandbox id's machine, 0 for a
// sandbox without one. For tests.
func (n *Node) MachinePID(id string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if sb := n.sandboxes[id]; sb != nil && sb.guests.machine != nil {
		return sb.guests.machine.PID()
	}
	return 0
}
