package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Volumes is the volume catalog of the fleet: every node's GET /v1/volumes
// merged by name. A volume is Available when some node declares it with
// its image present, and Nodes counts the nodes that do; Writable when a
// node declares it writable. The nodes are read in parallel, each within
// NodeTimeout; a node that does not answer leaves its entries out, and
// only when no node answers is it an error.
func (f *Fleet) Volumes(ctx context.Context) ([]sandboxd.Volume, error) {
	nodes := eachNode(ctx, f, "read volumes", func(ctx context.Context, c *sandboxd.Client) ([]sandboxd.Volume, error) {
		return c.Volumes(ctx)
	})
	byName := map[string]*sandboxd.Volume{}
	var last error
	answered := 0
	for _, n := range nodes {
		if n.err != nil {
			last = n.err
			continue
		}
		answered++
		for _, v := range n.val {
			m := byName[v.Name]
			if m == nil {
				m = &sandboxd.Volume{Name: v.Name, DefaultMount: v.DefaultMount}
				byName[v.Name] = m
			}
			m.SizeBytes = max(m.SizeBytes, v.SizeBytes)
			m.Writable = m.Writable || v.Writable
			if v.Available {
				m.Available = true
				m.Nodes++
			}
		}
	}
	if answered == 0 && last != nil {
		return nil, fmt.Errorf("fleet: no node answered the volume catalog read, the last: %w", last)
	}
	out := make([]sandboxd.Volume, 0, len(byName))
	for _, v := range byName {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b sandboxd.Volume) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
