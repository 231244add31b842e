package e2b

import (
	"context"
	"errors"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/e2b/catalog"
	"github.com/cocoonstack/sandbox-operator/src/e2b/records"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// errNoTemplate is a template reference that names nothing: no alias, no
// template a build published in the caller's namespace, no snapshot of
// it, and no pool image.
var errNoTemplate = errors.New("template not found")

// source is what a create or a build's base claims from.
type source struct {
	// Key is the pool key; Net is left for the caller to choose unless
	// Promoted or Checkpoint fixes it.
	Key   sandbox.PoolKey
	Alias string
	// Promoted is a template a build published; At are its holders.
	Promoted *catalog.Published
	// Checkpoint is a snapshot to branch from.
	Checkpoint *sandboxd.Checkpoint
	// CheckpointNode is the address of the node that lists Checkpoint.
	CheckpointNode string
}

// resolveSource maps a template reference to what it claims from, in
// order: an alias of the alias file, a snapshot of the namespace, a
// template a build published in the namespace (by name or id), and an
// image some node keeps a pool of. Anything else is errNoTemplate, so a
// mistyped name fails instead of cold-booting an image nobody serves.
func (s *Server) resolveSource(ctx context.Context, namespace, ref string) (source, error) {
	if t, ok := s.cfg.Aliases[ref]; ok {
		if d, isDefault := DefaultAliases[ref]; isDefault && d == t && !s.fleet.Serves(t.Image) {
			// A built-in alias of an image no node pools names nothing.
			return source{}, errNoTemplate
		}
		return source{Key: sandbox.PoolKey{Template: t.Image, Size: t.Size}, Alias: ref}, nil
	}
	if strings.HasPrefix(ref, checkpointPrefix) {
		ck, node, err := s.findCheckpoint(ctx, namespace, ref)
		if err != nil {
			return source{}, err
		}
		return source{Key: ck.Key.WithDefaults(), Checkpoint: &ck, CheckpointNode: node}, nil
	}
	p, ok, err := s.catalog.Lookup(ctx, namespace, ref)
	switch {
	case ok:
		return source{Key: p.Key, Alias: p.Name, Promoted: p}, nil
	case s.fleet.Serves(ref):
		// A pool image, whether or not every node could be read.
		return source{Key: sandbox.PoolKey{Template: ref, Size: sandbox.DefaultSize}}, nil
	case err != nil:
		return source{}, err
	}
	return source{}, errNoTemplate
}

// findCheckpoint finds the namespace's checkpoint id on the nodes, with
// the address of a node that lists it. Not found while some node could
// not be read is that node's error, not a miss: the checkpoint may be on
// it.
func (s *Server) findCheckpoint(ctx context.Context, namespace, id string) (sandboxd.Checkpoint, string, error) {
	var unread error
	for _, n := range s.fleet.NodeCheckpoints(ctx) {
		if n.Err != nil {
			if unread == nil {
				unread = n.Err
			}
			continue
		}
		for _, ck := range n.Checkpoints {
			if ck.ID == id && strings.HasPrefix(ck.Name, namespace+":") {
				return ck, n.Addr, nil
			}
		}
	}
	if unread != nil {
		return sandboxd.Checkpoint{}, "", unread
	}
	return sandboxd.Checkpoint{}, "", errNoTemplate
}

// claimTerms are what a create chooses of the claim besides its source:
// what the node does at the timeout, and whether the sandbox may reach
// out at all.
type claimTerms struct {
	// onExpire is sandboxd.ExpireArchive for e2b's onTimeout "pause";
	// empty is the node's default, destroy.
	onExpire string
	// noEgress is allowInternetAccess false: sandboxd's "egress": false.
	noEgress bool
	// volumes are the catalog volumes the node mounts (volumeMounts).
	volumes []sandboxd.VolumeMount
}

// claimSource claims a sandbox of src under ref: a branch of its
// snapshot, a clone of its published template at the nodes that hold it,
// or a warm VM of its pool at key.
func (s *Server) claimSource(ctx context.Context, ref sandbox.ClaimRef, src source, key sandbox.PoolKey, ttl int, labels map[string]string, terms claimTerms) (fleet.Claimed, error) {
	switch {
	case src.Checkpoint != nil:
		return s.fleet.ClaimCheckpoint(ctx, fleet.CheckpointClaimRequest{
			Ref: ref, Checkpoint: src.Checkpoint.ID, NodeAddr: src.CheckpointNode, TTLSeconds: ttl, Metadata: labels, OnExpire: terms.onExpire,
		})
	case src.Promoted != nil:
		cl, err := s.fleet.Claim(ctx, fleet.ClaimRequest{
			Ref: ref, Key: key, TTLSeconds: ttl, Metadata: labels, Promoted: true, At: src.Promoted.Holders, Front: metrics.FrontE2B,
			OnExpire: terms.onExpire, NoEgress: terms.noEgress, Volumes: terms.volumes,
		})
		if errors.Is(err, fleet.ErrNoTemplate) {
			// Deleted or replaced since the catalog was read.
			s.catalog.Invalidate()
		}
		return cl, err
	default:
		return s.fleet.Claim(ctx, fleet.ClaimRequest{
			Ref: ref, Key: key, TTLSeconds: ttl, Metadata: labels, OnExpire: terms.onExpire, NoEgress: terms.noEgress, Volumes: terms.volumes,
			Front: metrics.FrontE2B,
		})
	}
}

// reportedTemplate is the templateID a sandbox of key reports: a
// published template's e2b id, else the pool image.
func (s *Server) reportedTemplate(key sandbox.PoolKey) string {
	if ns, name, _, ok := build.ParsePublished(key.Template); ok {
		return build.TemplateID(ns, name)
	}
	return key.Template
}

// aliasOf is the alias a sandbox of key reports: a published template's
// name, else the alias it was created through (see aliasFor).
func (s *Server) aliasOf(key sandbox.PoolKey, rec *records.Record) string {
	if _, name, _, ok := build.ParsePublished(key.Template); ok {
		return name
	}
	return s.aliasFor(key, rec)
}
