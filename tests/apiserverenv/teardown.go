package apiserverenv

import (
	"errors"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// Teardown stops the server, then the fleet, then the cluster: each is a
// client of the next (the server reads the nodes' inventories from the
// cluster and claims from the nodes; the nodes publish to the cluster), so
// stopping them in that order leaves none of them complaining about a peer
// that went first. A nil part was never started and is skipped, so a
// caller that failed half way through starting can tear down what it has.
func Teardown(s *Server, f *simfleet.Fleet, c *cluster.Cluster) error {
	var errs []error
	if s != nil {
		errs = append(errs, s.Stop())
	}
	if f != nil {
		errs = append(errs, f.Close())
	}
	if c != nil {
		errs = append(errs, c.Stop())
	}
	return errors.Join(errs...)
}

// LogTails is the end of the server's log (its last serverLines lines) and
// of the cluster's kube-apiserver and etcd logs, for a failure to show. A
// nil part is skipped.
func LogTails(s *Server, serverLines int, c *cluster.Cluster) string {
	var b strings.Builder
	if s != nil {
		b.WriteString(s.LogTail(serverLines))
	}
	if c != nil {
		b.WriteString(c.LogTail())
	}
	return b.String()
}
