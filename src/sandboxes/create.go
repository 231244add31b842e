package sandboxes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apis/sandbox/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// candidate is a node that advertises warm capacity for the pool key.
type candidate struct {
	node, addr string
	warm       int32
}

// candidates ranks the fresh nodes with warm VMs for key: most warm first,
// then by name, so equal nodes are tried in the same order everywhere.
func (s *Service) candidates(key sandbox.PoolKey) []candidate {
	var out []candidate
	for _, n := range s.inv.Nodes() {
		if n.Address == "" {
			continue
		}
		for _, p := range n.Pools {
			pk := sandbox.PoolKey{Template: p.Template, Net: p.Net, Size: p.Size}.WithDefaults()
			if pk == key && p.Warm > 0 {
				out = append(out, candidate{node: n.Name, addr: n.Address, warm: p.Warm})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(b.warm, a.warm), strings.Compare(a.node, b.node))
	})
	return out
}

// Create implements sandbox.Backend: it resolves the pool key and lease
// (refusing a bad object before any VM is spent), then claims from the
// best fresh node with warm capacity, moving on when a node refuses or
// does not answer.
func (s *Service) Create(ctx context.Context, in *agentsv1beta1.Sandbox) (*agentsv1beta1.Sandbox, error) {
	if in == nil {
		return nil, apierrors.NewBadRequest("no sandbox in the request")
	}
	sb := in.DeepCopy()
	if sb.Name == "" && sb.GenerateName != "" {
		sb.Name = sb.GenerateName + utilrand.String(5)
	}
	if errs := validation.IsDNS1123Label(sb.Namespace); len(errs) > 0 {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid namespace %q: %s", sb.Namespace, strings.Join(errs, "; ")))
	}
	if errs := validation.IsDNS1123Subdomain(sb.Name); len(errs) > 0 {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid name %q: %s", sb.Name, strings.Join(errs, "; ")))
	}
	key, err := poolKeyFor(sb)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	now := s.cfg.Clock.Now()
	ttl, err := leaseFor(sb, now)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}

	ref := sandbox.ClaimRef{Namespace: sb.Namespace, Name: sb.Name}.String()
	s.mu.Lock()
	_, exists := s.currentLocked(ref)
	_, inFlight := s.creating[ref]
	if exists || inFlight {
		s.mu.Unlock()
		return nil, apierrors.NewAlreadyExists(Resource, sb.Name)
	}
	s.creating[ref] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.creating, ref)
		s.mu.Unlock()
	}()

	cands := s.candidates(key)
	if len(cands) == 0 {
		return nil, s.noCapacity(fmt.Sprintf("no node has a warm sandbox for template %q (net %s, size %s) now", key.Template, key.Net, key.Size))
	}
	req := sandboxd.ClaimRequest{
		Template: key.Template, Net: key.Net, Size: key.Size, TTLSeconds: ttl,
		ClaimRef: ref, NoRedirect: true, // this server chose the node
	}
	claim, node, err := s.claimFrom(ctx, cands, req)
	if err != nil {
		return nil, err
	}

	sb.Annotations = cloneMap(sb.Annotations)
	sb.Annotations[sandbox.AnnotationNet] = key.Net
	sb.Annotations[sandbox.AnnotationSize] = key.Size
	id, _ := sandbox.CanonicalID(claim.ID)
	dns, _ := sandbox.DNSID(claim.ID)
	e := inventory.Entry{
		Node: node, Address: claim.OwnerAddr, Name: ref, Phase: v1beta1.SandboxPhaseRunning,
		ID: cmp.Or(id, claim.ID), DNSID: dns, ClaimRef: ref, Template: key.Template,
		Deadline: claim.Deadline, ClaimedAt: now, Namespace: sb.Namespace, ObjectName: sb.Name,
	}
	return s.remember(view{entry: e, obj: sb}, false), nil
}

// claimFrom tries each candidate in turn, each call bounded by NodeTimeout
// within ctx. It returns the claim and the node that granted it.
func (s *Service) claimFrom(ctx context.Context, cands []candidate, req sandboxd.ClaimRequest) (*sandboxd.Claim, string, error) {
	var capacity, other int
	for _, c := range cands {
		if err := ctx.Err(); err != nil {
			return nil, "", s.statusError(err, "claim", req.ClaimRef)
		}
		cl, err := s.client(c.addr)
		if err != nil {
			klog.ErrorS(err, "Skipping node with an unusable address", "node", c.node)
			other++
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, s.cfg.NodeTimeout)
		resp, err := cl.ClaimNoFollow(callCtx, req)
		cancel()
		switch {
		case err == nil && !resp.IsRedirect() && resp.ID != "" && resp.Token != "":
			claim := &sandboxd.Claim{ID: resp.ID, Token: resp.Token, Deadline: resp.Deadline, OwnerAddr: cmp.Or(resp.OwnerAddr, c.addr)}
			return claim, c.node, nil
		case err == nil:
			// A node must not redirect a no_redirect claim; treat it as
			// a refusal rather than follow it.
			klog.InfoS("Node answered a no_redirect claim without a grant", "node", c.node)
			other++
		case errors.Is(err, sandboxd.ErrBadRequest):
			// The request itself is wrong (say, an unknown size); no
			// other node will take it either.
			return nil, "", s.statusError(err, "claim", req.ClaimRef)
		case errors.Is(err, sandboxd.ErrCapacity):
			capacity++
		default:
			// No answer, a timeout or a server error: the node may still
			// have granted the claim. Release whatever it holds under
			// this claim ref so a retry elsewhere leaves no twin behind.
			klog.InfoS("Claim failed on node, trying the next", "node", c.node, "err", err)
			other++
			s.releaseOrphans(c.addr, req.ClaimRef)
			if ctx.Err() != nil {
				return nil, "", s.statusError(ctx.Err(), "claim", req.ClaimRef)
			}
		}
	}
	if capacity == 0 && other > 0 {
		return nil, "", apierrors.NewServiceUnavailable("no node with warm capacity could be reached for the claim")
	}
	return nil, "", s.noCapacity("every node with warm capacity refused the claim; retry later")
}

// releaseOrphans releases, in the background and bounded by NodeTimeout,
// every sandbox the node at addr holds under claimRef.
func (s *Service) releaseOrphans(addr, claimRef string) {
	cl, err := s.client(addr)
	if err != nil {
		return
	}
	s.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.NodeTimeout)
		defer cancel()
		list, err := cl.Sandboxes(ctx, claimRef)
		if err != nil {
			klog.V(2).InfoS("Could not check a node for an orphaned claim", "claimRef", claimRef, "err", err)
			return
		}
		for _, sb := range list {
			if sb.ClaimRef != claimRef {
				continue
			}
			if err := cl.Release(ctx, sb.ID); err != nil && !errors.Is(err, sandboxd.ErrNotFound) {
				klog.InfoS("Could not release an orphaned claim", "claimRef", claimRef, "err", err)
			}
		}
	})
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+6)
	for k, v := range m {
		out[k] = v
	}
	return out
}
