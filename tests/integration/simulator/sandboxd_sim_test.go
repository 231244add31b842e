// Package simulator_test runs the sandboxd-sim binary as a user would and
// drives the fleet it starts through the sandboxd client.
package simulator_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const simPkg = "github.com/cocoonstack/sandbox-operator/src/cmd/sandboxd-sim"

type simNode struct{ name, addr string }

// startSim starts sandboxd-sim with args and returns its nodes once it has
// printed them, plus a stop function that sends SIGTERM and returns the exit
// error.
func startSim(t *testing.T, args ...string) ([]simNode, func() error) {
	t.Helper()
	bin := testbin.Path(t, "SANDBOXD_SIM", simPkg)
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sandboxd-sim: %v", err)
	}
	waited := make(chan error, 1)
	var (
		stopOnce sync.Once
		stopErr  error
	)
	// stop is called by the test and again by its cleanup; only the first
	// call signals and waits.
	stop := func() error {
		stopOnce.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case stopErr = <-waited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				stopErr = errors.New("sandboxd-sim did not stop within 30s of SIGTERM")
			}
		})
		return stopErr
	}

	want := 1
	for i, a := range args {
		if a == "--nodes" && i+1 < len(args) {
			n, err := strconv.Atoi(args[i+1])
			if err != nil {
				t.Fatalf("bad --nodes %q", args[i+1])
			}
			want = n
		}
	}
	found := make(chan []simNode, 1)
	go func() {
		var nodes []simNode
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "NODE" {
				nodes = append(nodes, simNode{name: f[1], addr: f[2]})
				if len(nodes) == want {
					found <- nodes
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { waited <- cmd.Wait() }()

	select {
	case nodes := <-found:
		t.Cleanup(func() { _ = stop() })
		return nodes, stop
	case err := <-waited:
		t.Fatalf("sandboxd-sim exited before printing its nodes: %v", err)
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("sandboxd-sim printed no nodes within 60s")
	}
	return nil, nil
}

func TestBinaryFleetServesTheContract(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("root-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(dir, "scratch")
	nodes, stop := startSim(t,
		"--nodes", "3",
		"--api-token-file", tokenFile,
		"--pools", "base:none:small=2",
		"--scratch-dir", scratch,
	)
	if len(nodes) != 3 {
		t.Fatalf("got %d nodes, want 3", len(nodes))
	}
	names := map[string]bool{}
	for _, n := range nodes {
		names[n.name] = true
	}
	if len(names) != 3 {
		t.Fatalf("node names are not distinct: %v", nodes)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Every node sees the other two as peers.
	for _, n := range nodes {
		c, err := sandboxd.New(n.addr, sandboxd.WithToken("root-token"))
		if err != nil {
			t.Fatal(err)
		}
		peers, err := c.Peers(ctx)
		if err != nil {
			t.Fatalf("%s: peers: %v", n.name, err)
		}
		if len(peers) != 2 {
			t.Errorf("%s: peers = %v, want the 2 other nodes", n.name, peers)
		}
	}

	c, err := sandboxd.New(nodes[0].addr, sandboxd.WithToken("root-token"))
	if err != nil {
		t.Fatal(err)
	}
	// A wrong token is refused before anything is claimed.
	if _, err := c.As("wrong").Claim(ctx, sandboxd.ClaimRequest{Template: "base"}); !errors.Is(err, sandboxd.ErrUnauthorized) {
		t.Fatalf("claim with a wrong token: err = %v, want ErrUnauthorized", err)
	}

	// Wait for the pool to fill, then claim through the binary's API.
	poll.UntilNil(t, "the base pool to reach 2 warm VMs", func() error {
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatalf("info: %v", err)
		}
		if p, ok := info.Pool(sandbox.PoolKey{Template: "base", Net: "none", Size: "small"}); ok && p.Warm >= 2 {
			return nil
		}
		return fmt.Errorf("pools %+v", info.Pools)
	})
	claim, err := c.Claim(ctx, sandboxd.ClaimRequest{Template: "base", ClaimRef: "default/it", TTLSeconds: 60})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if !strings.HasPrefix(claim.ID, "sb_") || claim.Token == "" {
		t.Fatalf("claim = %+v, want an sb_ id and a token", claim)
	}
	list, err := c.Sandboxes(ctx, "default/it")
	if err != nil {
		t.Fatalf("sandboxes: %v", err)
	}
	if len(list) != 1 || list[0].ID != claim.ID {
		t.Fatalf("sandboxes?claim_ref=default/it = %+v, want just %s", list, claim.ID)
	}
	if err := c.Release(ctx, claim.ID); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, err := c.Sandbox(ctx, claim.ID); !errors.Is(err, sandboxd.ErrNotFound) {
		t.Fatalf("sandbox after release: err = %v, want ErrNotFound", err)
	}

	// SIGTERM stops the whole fleet cleanly.
	if err := stop(); err != nil {
		t.Fatalf("sandboxd-sim exit after SIGTERM: %v", err)
	}
	if _, err := c.Info(ctx); err == nil {
		t.Fatal("node still answers after the binary stopped")
	}
}

func TestBinaryRejectsBadFlags(t *testing.T) {
	bin := testbin.Path(t, "SANDBOXD_SIM", simPkg)
	for _, args := range [][]string{
		{"--pools", "base:none:small=lots"},
		{"--api-token-file", filepath.Join(t.TempDir(), "missing")},
		{"--echo-ports", "70000"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("sandboxd-sim %v: err = %v, want a non-zero exit", args, err)
			continue
		}
		flagName := strings.TrimPrefix(args[0], "--")
		if !strings.Contains(string(out), flagName) {
			t.Errorf("sandboxd-sim %v: message %q does not name the flag", args, out)
		}
	}
}
