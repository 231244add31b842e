package apiserverenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// StackOptions configures StartStack.
type StackOptions struct {
	// DirPrefix names the stack's temporary directory.
	DirPrefix string
	// Fleet configures the simulated nodes; StartStack sets RootToken
	// and publishes to the cluster every PublishInterval.
	Fleet           simfleet.Config
	PublishInterval time.Duration
	// Server configures sandbox-apiserver; StartStack sets Binary, Dir and
	// SandboxdTokenFile.
	Server Options
	// MinPools is how many pools every node must have published before
	// StartStack returns (WaitFleetPublished).
	MinPools int
	// SetupTimeout bounds the start, which begins once the binaries are
	// located (under plain go test: built, minutes the first time).
	SetupTimeout time.Duration
}

// Stack is a test cluster with the NodeInventory CRD, a simulated fleet
// publishing its NodeInventory to it, and sandbox-apiserver behind its
// aggregator, with their files in one directory.
type Stack struct {
	Dir     string
	Cluster *cluster.Cluster
	Fleet   *simfleet.Fleet
	Server  *Server
	// RootToken is the fleet's sandboxd root token.
	RootToken string
}

// StartStack starts a Stack, or on error stops what it started and
// returns the error with the tails of the logs.
func StartStack(o StackOptions) (_ *Stack, err error) {
	binary, err := Binary()
	if err != nil {
		return nil, err
	}
	if _, err := cluster.APIServerBinary(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", o.DirPrefix)
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	s := &Stack{Dir: dir}
	defer func() {
		if err != nil {
			tail := s.LogTail(80)
			if stopErr := s.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
			err = fmt.Errorf("%w\n%s", err, tail)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), o.SetupTimeout)
	defer cancel()
	clusterDir := filepath.Join(dir, "cluster")
	if err := os.Mkdir(clusterDir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster dir: %w", err)
	}
	if s.Cluster, err = cluster.StartContext(ctx, clusterDir); err != nil {
		return nil, err
	}
	if err := s.Cluster.InstallCRDs(ctx, crds.NodeInventoryYAML); err != nil {
		return nil, err
	}
	tokenFile, token, err := WriteSandboxdToken(dir)
	if err != nil {
		return nil, err
	}
	s.RootToken = token
	fc := o.Fleet
	fc.RootToken = token
	fc.Publish = &simfleet.PublishConfig{Client: s.Cluster.Dynamic(), Interval: o.PublishInterval}
	if s.Fleet, err = simfleet.Start(context.Background(), fc); err != nil {
		return nil, fmt.Errorf("start fleet: %w", err)
	}
	so := o.Server
	so.Binary, so.Dir, so.SandboxdTokenFile = binary, dir, tokenFile
	if s.Server, err = Start(ctx, s.Cluster, so); err != nil {
		return nil, err
	}
	if err := s.Server.WaitReady(ctx); err != nil {
		return nil, err
	}
	if err := WaitFleetPublished(ctx, s.Cluster.Dynamic(), s.Fleet, o.MinPools); err != nil {
		return nil, err
	}
	return s, nil
}

// Stop stops the server, the fleet and the cluster, and removes the
// directory.
func (s *Stack) Stop() error {
	return errors.Join(Teardown(s.Server, s.Fleet, s.Cluster), os.RemoveAll(s.Dir))
}

// LogTail is the end of the sandbox-apiserver's log (serverLines lines),
// the kube-apiserver's and etcd's.
func (s *Stack) LogTail(serverLines int) string { return LogTails(s.Server, serverLines, s.Cluster) }
