package sandboxd

import (
	"context"
	"net/http"
	"net/url"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// TemplateLabelsRequest is the body of PUT /v1/templates/labels.
type TemplateLabelsRequest struct {
	Labels map[string]string `json:"labels"`
}

// SetTemplateLabels replaces the labels of the promoted template key on
// this node (ValidateMetadata holds the bounds); an empty map clears them.
// A non-empty digest writes only while the template still has that
// content, and ErrPrecondition answers otherwise, so a writer that read an
// old build never relabels a newer one. The call speaks only for the node
// it reaches: it follows no redirect.
func (c *Client) SetTemplateLabels(ctx context.Context, key sandbox.PoolKey, labels map[string]string, digest string) error {
	key = key.WithDefaults()
	q := url.Values{"template": {key.Template}, "net": {key.Net}, "size": {key.Size}}
	if digest != "" {
		q.Set("digest", digest)
	}
	if labels == nil {
		labels = map[string]string{} // "labels": {} clears; null is no map
	}
	return c.do(ctx, http.MethodPut, "/v1/templates/labels", q, TemplateLabelsRequest{Labels: labels}, nil, "PUT /v1/templates/labels")
}
