package node

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// handleTemplateLabels serves PUT /v1/templates/labels: it replaces a
// promoted template's labels on this node under the claim metadata rules.
// The key defaults like a claim's; the call follows no redirect, since
// labels describe the export this node holds.
func (n *Node) handleTemplateLabels(w http.ResponseWriter, r *http.Request) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	key, ok := templateKeyOf(w, q)
	if !ok {
		return
	}
	var body struct {
		Labels json.RawMessage `json:"labels"`
	}
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	// "labels" must be an object: {} clears, but a missing or null map
	// is more likely a mistake than a request to drop every label.
	if len(body.Labels) == 0 || bytes.Equal(body.Labels, []byte("null")) {
		writeError(w, errorf(http.StatusBadRequest, "labels must be an object"))
		return
	}
	labels, aerr := decodeMetadata(body.Labels)
	if aerr != nil {
		writeError(w, errorf(aerr.status, "labels: %s", aerr.msg))
		return
	}
	respondEmpty(w, n.setTemplateLabels(c, key, labels, q.Get("digest")))
}

// setTemplateLabels replaces the labels of the template at key. A tenant
// reaches only templates it promoted: another's answers the same 404 as
// none at all.
func (n *Node) setTemplateLabels(c caller, key sandbox.PoolKey, labels map[string]string, digest string) *apiError {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pools[key] != nil {
		return errorf(http.StatusConflict, "template %s is a configured pool", key)
	}
	tp := n.templates[key]
	if tp == nil || (c.kind == callerTenant && tp.rec.Tenant != c.tenant) {
		return errUnknownTemplate
	}
	if digest != "" && digest != tp.rec.ContentDigest {
		return errorf(http.StatusPreconditionFailed, "template %s has another digest", key)
	}
	// A fresh map, never written afterwards: GET /v1/info rows share it.
	tp.rec.Labels = labels
	return nil
}
