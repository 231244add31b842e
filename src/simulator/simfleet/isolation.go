package simfleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/codeinterp"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/envd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/machine"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
)

// IsolationConfig runs every sandbox of the fleet as its own machine:
// Linux namespaces over RootFS, with the envd and echo guests as ordinary
// programs inside (src/simulator/guest/machine). docs/simulator.md states
// the model and its limits.
type IsolationConfig struct {
	// Runtime starts the machines; the caller owns it and closes it after
	// the fleet.
	Runtime *isolate.Runtime
	// RootFS is the base root filesystem (src/simulator/rootfs.Base).
	RootFS string
	// CodeInterpreter is the code-interpreter layer
	// (src/simulator/rootfs.CodeInterpreter), which sandboxes of the
	// code-interpreter template (codeinterp.IsTemplate: "e2b-ci:latest")
	// boot over RootFS, with e2b's code-interpreter server on port
	// 49999. Empty refuses that template: its pools never fill and its
	// claims fail, the node logging why (CodeInterpreterErr, when set).
	CodeInterpreter    string
	CodeInterpreterErr error

	stateDir string // made by NewIsolation, removed by Close
}

// nodeIsolation is the node setting for cfg's isolated guests: the machine
// program configured with the fleet's envd and echo settings.
func nodeIsolation(cfg Config) (*node.Isolation, error) {
	iso := cfg.Isolation
	if iso.Runtime == nil || iso.RootFS == "" {
		return nil, errors.New("fleet: Isolation needs a Runtime and a RootFS")
	}
	if cfg.EnvdHandler != nil || len(cfg.Guests) > 0 {
		return nil, errors.New("fleet: custom guests (EnvdHandler, Guests) run in this process and cannot be isolated")
	}
	mc := machine.Config{EchoPorts: cfg.EchoPorts, TCPEchoPorts: cfg.TCPEchoPorts}
	if mc.EchoPorts == nil {
		mc.EchoPorts = []int{DefaultEchoPort}
	}
	user := envd.DefaultUser
	if e := cfg.Envd; e != nil {
		mc.Envd, mc.EnvdVersion, mc.EnvdSecret = true, e.Version, e.Secret
		mc.MaxUploadBytes, mc.Envs = e.MaxUploadBytes, e.Envs
		if e.User != "" {
			user = e.User
		}
	}
	raw, err := json.Marshal(mc)
	if err != nil {
		return nil, fmt.Errorf("fleet: machine config: %w", err)
	}
	image, err := codeInterpreterImage(iso, mc)
	if err != nil {
		return nil, err
	}
	return &node.Isolation{
		Runtime: iso.Runtime, RootFS: iso.RootFS, User: user,
		Program: machine.Program, Config: raw, ControlPort: machine.ControlPort,
		Image: image,
		Deliver: func(ctx context.Context, dial func(context.Context, int) (net.Conn, error), id, token string) error {
			return machine.Deliver(ctx, dial, machine.Claim{ID: id, Token: token})
		},
		Ready: machine.WaitReady,
		Exec:  machine.Exec,
	}, nil
}

// codeInterpreterImage is the node's Image hook: templates of the code
// interpreter boot the code-interpreter layer and start its server; the
// others boot the default.
func codeInterpreterImage(iso *IsolationConfig, mc machine.Config) (func(string) (*node.MachineImage, error), error) {
	mc.CodeInterpreter = true
	raw, err := json.Marshal(mc)
	if err != nil {
		return nil, fmt.Errorf("fleet: machine config: %w", err)
	}
	return func(template string) (*node.MachineImage, error) {
		if !codeinterp.IsTemplate(template) {
			return nil, nil
		}
		if iso.CodeInterpreter == "" {
			why := iso.CodeInterpreterErr
			if why == nil {
				why = errors.New("no code-interpreter layer configured (fleet.IsolationConfig.CodeInterpreter)")
			}
			return nil, fmt.Errorf("the code-interpreter template needs the code-interpreter layer: %w", why)
		}
		return &node.MachineImage{Layers: []string{iso.CodeInterpreter}, Config: raw}, nil
	}, nil
}

// stateDirPrefix starts the name of each runtime's state directory under
// the state root.
const stateDirPrefix = "machines-"

// NewIsolation prepares isolation for a simulator binary: the base root
// filesystem (rootfs.Base) and a runtime whose machines live in a fresh
// directory under stateRoot ("" is the system's temp directory), with
// cgroup limits and the freezer under cgroupParent when running as root.
// Its error says what the machine lacks; the binaries then refuse to start
// unless told to accept unisolated sandboxes. Close removes what it made.
func NewIsolation(stateRoot, cgroupParent string, logger *slog.Logger) (*IsolationConfig, error) {
	if err := isolate.Available(); err != nil {
		return nil, err
	}
	base, err := rootfs.Base()
	if err != nil {
		return nil, err
	}
	if stateRoot != "" {
		if err := os.MkdirAll(stateRoot, 0o700); err != nil {
			return nil, fmt.Errorf("fleet: machine state directory: %w", err)
		}
	}
	// What a simulator stopped uncleanly left here (state directories,
	// bounded disks still mounted) goes before this one starts.
	stateGlob := filepath.Join(cmp.Or(stateRoot, os.TempDir()), stateDirPrefix+"*")
	if _, err := isolate.ReclaimStateDirs(stateGlob, logger); err != nil && logger != nil {
		logger.Warn("could not reclaim the machine state of an earlier run", "err", err)
	}
	dir, err := os.MkdirTemp(stateRoot, stateDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("fleet: machine state directory: %w", err)
	}
	if os.Geteuid() != 0 {
		cgroupParent = "" // cgroups need delegation a user rarely has
	}
	rt, err := isolate.New(isolate.Config{StateDir: dir, CgroupParent: cgroupParent, Logger: logger})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	cfg := &IsolationConfig{Runtime: rt, RootFS: base, stateDir: dir}
	// The code interpreter is optional: without its layer every other
	// template still runs, and its own claims say what is missing.
	if cfg.CodeInterpreter, cfg.CodeInterpreterErr = rootfs.CodeInterpreter(base); cfg.CodeInterpreterErr != nil && logger != nil {
		logger.Warn("the code-interpreter template (e2b-ci) is unavailable", "err", cfg.CodeInterpreterErr)
	}
	return cfg, nil
}

// Close stops every machine still running and removes the state directory
// NewIsolation made.
func (c *IsolationConfig) Close() error {
	err := c.Runtime.Close()
	if c.stateDir != "" {
		err = errors.Join(err, os.RemoveAll(c.stateDir))
	}
	return err
}
