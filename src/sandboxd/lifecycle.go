package sandboxd

import (
	"context"
	"net/http"
	"time"
)

// Expiry actions a claim, renew or fork may name in on_expire.
const (
	// ExpireDestroy removes the sandbox when its lease ends (the default).
	ExpireDestroy = "destroy"
	// ExpireArchive hibernates and archives the sandbox when its lease
	// ends; the next call that reaches the guest (or a wake) restores it
	// with a fresh lease of the last granted length.
	ExpireArchive = "archive"
)

// ValidOnExpire reports whether v is an expiry action a node accepts; ""
// means the default (a claim's destroy, a renew's "keep the current one").
func ValidOnExpire(v string) bool {
	return v == "" || v == ExpireDestroy || v == ExpireArchive
}

// RenewWith resets the lease as Renew does and, when req.OnExpire is set,
// switches the expiry action. It returns the deadline the node granted; an
// archived sandbox is refused with ErrConflict (wake it first).
func (c *Client) RenewWith(ctx context.Context, id string, req RenewRequest) (time.Time, error) {
	var out RenewResponse
	err := c.do(ctx, http.MethodPost, sandboxPath(id, "renew"), nil, req, &out, "POST /v1/sandboxes/{id}/renew")
	return out.Deadline, err
}
