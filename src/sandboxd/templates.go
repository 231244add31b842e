package sandboxd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// Promote publishes the sandbox's current state as a node-local template
// under (req.Template, the sandbox's net, its size); later claims of that
// key clone it. Promoting the same name again replaces the template. The
// client's token is the node token; req.Token is the sandbox's own token.
func (c *Client) Promote(ctx context.Context, id string, req PromoteRequest) (*PromoteResult, error) {
	var out PromoteResult
	if err := c.do(ctx, http.MethodPost, sandboxPath(id, "promote"), nil, req, &out, "POST /v1/sandboxes/{id}/promote"); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteTemplate removes a promoted template and its saved files. A
// non-empty digest deletes it only while it still has that content
// (ErrPrecondition otherwise), so a caller that read an old build cannot
// delete a newer one.
//
// A node that does not hold the template may name the mesh members that do
// (the claim redirect shape). DeleteTemplate then asks each named node in
// turn, with no_redirect, until one deletes it. A 400 stops the walk,
// because the request is wrong everywhere; any other refusal is that
// node's (a 412 means its build is not the one digest names, and a later
// holder's may be). When no node deleted it, the error is the last refusal
// other than a 404: ErrNotFound only when every node answered 404.
func (c *Client) DeleteTemplate(ctx context.Context, key sandbox.PoolKey, digest string) error {
	redirect, err := c.deleteTemplateOnce(ctx, key, digest, false)
	if err != nil || redirect == nil {
		return err
	}
	targets := redirect.Redirect
	if len(targets) > maxRedirectTargets {
		targets = targets[:maxRedirectTargets]
	}
	var notFound, refused error
	for _, addr := range targets {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sandboxd: follow template delete redirect: %w", err)
		}
		target, err := c.At(addr)
		if err != nil {
			refused = err
			continue
		}
		again, err := target.deleteTemplateOnce(ctx, key, digest, true)
		switch {
		case err == nil && again == nil:
			return nil
		case err == nil:
			refused = fmt.Errorf("sandboxd: DELETE /v1/templates at %s: redirected a no_redirect request", target.base.Host)
		case errors.Is(err, ErrBadRequest):
			return err
		case ctx.Err() != nil:
			return fmt.Errorf("sandboxd: follow template delete redirect: %w", ctx.Err())
		case errors.Is(err, ErrNotFound):
			notFound = err
		default:
			refused = err
		}
	}
	if refused == nil {
		return notFound // nobody holds it (any more): a single node's answer
	}
	return fmt.Errorf("sandboxd: no node named by the template delete redirect deleted it: %w", refused)
}

// deleteTemplateOnce sends DELETE /v1/templates once: nil, nil when the
// node deleted it (204), the redirect answer when it names holders.
func (c *Client) deleteTemplateOnce(ctx context.Context, key sandbox.PoolKey, digest string, noRedirect bool) (*ClaimResponse, error) {
	const op = "DELETE /v1/templates"
	key = key.WithDefaults()
	q := url.Values{"template": {key.Template}, "net": {key.Net}, "size": {key.Size}}
	if digest != "" {
		q.Set("digest", digest)
	}
	if noRedirect {
		q.Set("no_redirect", "1")
	}
	var raw []byte
	if err := c.do(ctx, http.MethodDelete, "/v1/templates", q, nil, &raw, op); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil // 204
	}
	var out ClaimResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("sandboxd: %s: decode body: %w", op, err)
	}
	if !out.IsRedirect() {
		return nil, fmt.Errorf("sandboxd: %s at %s: a 200 answer without a redirect", op, c.base.Host)
	}
	return &out, nil
}
