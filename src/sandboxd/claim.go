package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// maxRedirectTargets bounds how many peers one redirect answer makes the
// client try; a node names at most a handful.
const maxRedirectTargets = 8

// Claim grants a sandbox from the node's warm pool.
//
// On a warm miss a node may answer 200 {"redirect": [addr…]} instead of a
// claim. Claim then retries the same body with no_redirect set (and
// require_promoted carried over when the answer set it) at each named peer
// in order until one grants it. A target that refuses (capacity, an
// unknown token mid-rotation, a stale template view, a dead node) is
// skipped; when every target refused, the claim falls back to the node it
// entered at, which already authorized it and now provisions locally. A
// 400 stops the walk, because the body is wrong everywhere.
//
// The returned Claim's OwnerAddr is the owner's advertised address, or the
// address of the node that granted it when the answer named none.
func (c *Client) Claim(ctx context.Context, req ClaimRequest) (*Claim, error) {
	return c.claimFollowing(ctx, req.RequirePromoted, func(target *Client, noRedirect, requirePromoted bool) (*ClaimResponse, error) {
		r := req
		r.NoRedirect = r.NoRedirect || noRedirect
		r.RequirePromoted = requirePromoted
		return target.ClaimNoFollow(ctx, r)
	})
}

// ClaimNoFollow sends POST /v1/claim once and returns the raw answer, which
// may be a redirect.
func (c *Client) ClaimNoFollow(ctx context.Context, req ClaimRequest) (*ClaimResponse, error) {
	var out ClaimResponse
	if err := c.do(ctx, http.MethodPost, "/v1/claim", nil, req, &out, "POST /v1/claim"); err != nil {
		return nil, err
	}
	return &out, nil
}

// ClaimCheckpoint claims a fresh sandbox branched from a checkpoint,
// following the same redirect protocol as Claim.
func (c *Client) ClaimCheckpoint(ctx context.Context, checkpointID string, req CheckpointClaimRequest) (*Claim, error) {
	return c.claimFollowing(ctx, false, func(target *Client, noRedirect, _ bool) (*ClaimResponse, error) {
		r := req
		r.NoRedirect = r.NoRedirect || noRedirect
		return target.ClaimCheckpointNoFollow(ctx, checkpointID, r)
	})
}

// ClaimCheckpointNoFollow sends POST /v1/checkpoints/{id}/claim once.
func (c *Client) ClaimCheckpointNoFollow(ctx context.Context, checkpointID string, req CheckpointClaimRequest) (*ClaimResponse, error) {
	var out ClaimResponse
	path := "/v1/checkpoints/" + url.PathEscape(checkpointID) + "/claim"
	if err := c.do(ctx, http.MethodPost, path, nil, req, &out, "POST /v1/checkpoints/{id}/claim"); err != nil {
		return nil, err
	}
	return &out, nil
}

type claimCall func(target *Client, noRedirect, requirePromoted bool) (*ClaimResponse, error)

func (c *Client) claimFollowing(ctx context.Context, requirePromoted bool, call claimCall) (*Claim, error) {
	first, err := call(c, false, requirePromoted)
	if err != nil {
		return nil, err
	}
	if !first.IsRedirect() {
		return c.granted(first)
	}
	requirePromoted = requirePromoted || first.RequirePromoted

	targets := first.Redirect
	if len(targets) > maxRedirectTargets {
		targets = targets[:maxRedirectTargets]
	}
	var skipped int
	for _, addr := range targets {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sandboxd: follow claim redirect: %w", err)
		}
		target, err := c.At(addr)
		if err != nil {
			skipped++
			continue
		}
		resp, err := call(target, true, requirePromoted)
		switch {
		case err == nil && !resp.IsRedirect():
			return target.granted(resp)
		case errors.Is(err, ErrBadRequest):
			return nil, err
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("sandboxd: follow claim redirect: %w", ctx.Err())
		}
		skipped++
	}

	// Every target refused: the entry node authorized the claim, so let it
	// provision locally.
	resp, err := call(c, true, requirePromoted)
	if err != nil {
		return nil, fmt.Errorf("%w (%d targets refused, entry node: %w)", ErrNoRedirectTarget, skipped, err)
	}
	if resp.IsRedirect() {
		return nil, fmt.Errorf("%w: entry node redirected a no_redirect retry", ErrNoRedirectTarget)
	}
	return c.granted(resp)
}

// granted converts a non-redirect answer into a Claim, defaulting the owner
// to the node that answered.
func (c *Client) granted(resp *ClaimResponse) (*Claim, error) {
	if resp.ID == "" || resp.Token == "" {
		return nil, fmt.Errorf("sandboxd: claim answer from %s carries no id or token", c.base.Host)
	}
	cl := &Claim{
		ID:             resp.ID,
		Token:          resp.Token,
		Deadline:       resp.Deadline,
		OwnerAddr:      resp.OwnerAddr,
		TemplateDigest: resp.TemplateDigest,
		FromCheckpoint: resp.FromCheckpoint,
		NetRoute:       resp.NetRoute,
		Volumes:        resp.Volumes,
	}
	if cl.OwnerAddr == "" {
		cl.OwnerAddr = c.addr
	}
	return cl, nil
}
