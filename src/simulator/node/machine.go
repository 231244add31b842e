package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// Isolation runs every sandbox of a node as its own machine: Linux
// namespaces over a root filesystem (src/simulator/isolate), with the
// guest services running inside as ordinary programs. Warm VMs are machines
// already started, so a warm claim only hands the claim to the program.
type Isolation struct {
	// Runtime starts the machines; the node does not close it.
	Runtime *isolate.Runtime
	// RootFS is the root filesystem every template boots (read-only lower
	// layer shared by all machines).
	RootFS string
	// User is the user commands run as inside ("user").
	User string
	// Program and Config are the init program every machine runs.
	Program string
	Config  []byte
	// Image, when set, gives a template its own machine: read-only layers
	// over RootFS and its own program config (the code interpreter's
	// packages and server). It returns nil for a template that boots the
	// default, and an error for one this node cannot boot, which fails
	// the pool's refill and the claim.
	Image func(template string) (*MachineImage, error)
	// ControlPort is the program's port for Deliver; the relay never lets
	// a client reach it.
	ControlPort int
	// Deliver hands a claim (the sandbox id and its token) to a started
	// machine's program.
	Deliver func(ctx context.Context, dial func(context.Context, int) (net.Conn, error), id, token string) error
	// Ready, when set, waits until a started machine serves what it serves
	// before a claim (a code interpreter's kernel): a warm VM counts as
	// warm only after it.
	Ready func(ctx context.Context, dial func(context.Context, int) (net.Conn, error)) error
	// Exec runs a buffered exec inside a claimed machine (its token is the
	// claim's) and returns the result, or an *sandboxd.APIError carrying
	// the status the node answers. Nil answers the buffered exec 502.
	Exec func(ctx context.Context, dial func(context.Context, int) (net.Conn, error), token string, req sandboxd.ExecRequest) (*sandboxd.ExecResult, error)
}

// MachineImage is what a template's machines boot instead of the default.
type MachineImage struct {
	// Layers lie over Isolation.RootFS, the first on top
	// (isolate.Spec.Layers).
	Layers []string
	// Config replaces Isolation.Config.
	Config []byte
}

// deliverTimeout bounds handing a claim to a machine's program.
const deliverTimeout = 10 * time.Second

// warmMachine is a started machine waiting in a pool, with the sandbox id
// it was started under (its hostname says it before the claim).
type warmMachine struct {
	id string
	m  *isolate.Sandbox
}

// startMachine starts a machine for sandbox id of key, seeded from the
// disk state in from ("" for a fresh one), with mounts bound in (a claim's
// volumes). It blocks for the start, so never under n.mu.
func (n *Node) startMachine(ctx context.Context, id string, key sandbox.PoolKey, from string, mounts ...isolate.Mount) (*isolate.Sandbox, error) {
	iso := n.cfg.Isolation
	spec := isolate.Spec{
		ID: id, RootFS: iso.RootFS, From: from, User: iso.User,
		Program: iso.Program, Config: iso.Config, Mounts: mounts,
	}
	if iso.Image != nil {
		img, err := iso.Image(key.Template)
		if err != nil {
			return nil, fmt.Errorf("node %s: start machine %s of template %s: %w", n.cfg.Name, id, key.Template, err)
		}
		if img != nil {
			spec.Layers, spec.Config = img.Layers, img.Config
		}
	}
	if dns, ok := sandbox.DNSID(id); ok {
		spec.Hostname = dns
	}
	if tier, ok := n.cfg.Sizes[key.WithDefaults().Size]; ok {
		spec.CPUCount, spec.MemoryMiB, spec.DiskMiB = tier.CPUCount, tier.MemoryMiB, tier.DiskMiB
		spec.DiskBytesPerSec, spec.DiskIOPS = tier.DiskBytesPerSec, tier.DiskIOPS
	}
	m, err := iso.Runtime.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("node %s: start machine %s: %w", n.cfg.Name, id, err)
	}
	return m, nil
}

// machineReadyTimeout bounds a warm machine's way to ready (a code
// interpreter's kernel start and imports on a loaded machine).
const machineReadyTimeout = 2 * time.Minute

// prepareWarm starts a machine for a pool's warm VM.
func (n *Node) prepareWarm(key sandbox.PoolKey) (*warmMachine, error) {
	id := newSandboxID()
	m, err := n.startMachine(n.ctx, id, key, "")
	if err != nil {
		return nil, err
	}
	if ready := n.cfg.Isolation.Ready; ready != nil {
		ctx, cancel := context.WithTimeout(n.ctx, machineReadyTimeout)
		err := ready(ctx, m.Dial)
		cancel()
		if err != nil {
			_ = m.Close()
			return nil, fmt.Errorf("node %s: machine %s of %s did not become ready: %w", n.cfg.Name, id, key.Template, err)
		}
	}
	return &warmMachine{id: id, m: m}, nil
}

// discardWarmLocked stops the machines behind warm VMs that leave a pool
// (scale down, drain, retire) without a claim; the stop runs outside the
// lock.
func (n *Node) discardWarmLocked(vms []string) {
	for _, vm := range vms {
		wm := n.warmMachines[vm]
		if wm == nil {
			continue
		}
		delete(n.warmMachines, vm)
		n.wg.Add(1)
		go func() { defer n.wg.Done(); _ = wm.m.Close() }()
	}
}

// deliver hands sb's claim to its machine's program and marks the hand-over
// done for the relay; a no-op for sandboxes without a machine. Never under
// n.mu.
func (n *Node) deliver(ctx context.Context, sb *claimed) error {
	g := sb.guests
	if g.machine == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	defer cancel()
	err := n.cfg.Isolation.Deliver(ctx, g.machine.Dial, sb.id, sb.token)
	if err != nil {
		err = fmt.Errorf("node %s: hand the claim to machine %s: %w", n.cfg.Name, sb.id, err)
	}
	g.handOverErr = err
	close(g.handedOver)
	return err
}

// handOver delivers sb's claim in the background, so a warm claim answers
// as fast as an unisolated one; the relay waits for the hand-over. A
// machine that does not take its claim is released.
func (n *Node) handOver(sb *claimed) {
	if sb.guests.machine == nil {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.deliver(n.ctx, sb); err != nil {
			n.log.Warn("claim: the machine did not take the claim; releasing it", "node", n.cfg.Name, "sandbox", sb.id, "err", err)
			n.mu.Lock()
			_, live := n.sandboxes[sb.id]
			if live {
				n.removeLocked(sb)
			}
			n.mu.Unlock()
			if live {
				n.destroy(sb)
			}
		}
	}()
}

// forkMachines starts each child's machine from a copy of the parent's
// disk taken now (fork keeps files, not processes or memory) and hands it
// its claim. Never under n.mu.
func (n *Node) forkMachines(ctx context.Context, parent *guestSet, children []*claimed) error {
	dir, err := os.MkdirTemp(n.scratch, "fork-")
	if err != nil {
		return fmt.Errorf("node %s: fork: %w", n.cfg.Name, err)
	}
	defer os.RemoveAll(dir)
	layer := filepath.Join(dir, "layer")
	if err := parent.saveDisk(layer); err != nil {
		return fmt.Errorf("node %s: fork: save the parent's disk: %w", n.cfg.Name, err)
	}
	for _, ch := range children {
		m, err := n.startMachine(ctx, ch.id, ch.key, layer)
		if err != nil {
			return err
		}
		n.mu.Lock()
		ch.guests.attach(m, n.cfg.Isolation.ControlPort)
		n.watchMachine(ch, m)
		n.mu.Unlock()
		if err := n.deliver(ctx, ch); err != nil {
			return err
		}
	}
	return nil
}
