package fleet

import (
	"context"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// NodeTemplates is one node's promoted templates, or why they could not
// be read.
type NodeTemplates struct {
	// Addr is the node's sandboxd host:port.
	Addr      string
	Templates []sandboxd.TemplateInfo
	// Err is set when the node could not be read; Templates is empty then.
	Err error
}

// NodeTemplates reads every node's promoted templates (the templates of
// its GET /v1/info) in parallel, each node within NodeTimeout. It answers
// one entry per node that may take claims, a node that could not be read
// included with its Err, so the caller can tell a partial read from a
// whole one and decide what a template missing from it means.
func (f *Fleet) NodeTemplates(ctx context.Context) []NodeTemplates {
	read := eachNode(ctx, f, "read templates", func(ctx context.Context, c *sandboxd.Client) ([]sandboxd.TemplateInfo, error) {
		info, err := c.Info(ctx)
		if err != nil {
			return nil, err
		}
		return info.Templates, nil
	})
	out := make([]NodeTemplates, len(read))
	for i, r := range read {
		out[i] = NodeTemplates{Addr: r.addr, Templates: r.val, Err: r.err}
	}
	return out
}

// Promote publishes c's current state as the node-local template name on
// its node (sandboxd's promote, under the sandbox's own token); claims of
// the answered key clone it there. Promoting the same name again replaces
// the template.
func (f *Fleet) Promote(ctx context.Context, c Claimed, name string) (*sandboxd.PromoteResult, error) {
	var res *sandboxd.PromoteResult
	err := f.callCopying(ctx, c.Sandbox, "promote", func(ctx context.Context, cl *sandboxd.Client) error {
		var err error
		res, err = cl.Promote(ctx, c.ID, sandboxd.PromoteRequest{Token: c.Token, Template: name})
		return err
	})
	return res, err
}

// LabelTemplate replaces the labels of the promoted template key on the
// node at addr. A non-empty digest writes only while the template still
// has that content: a stale one is sandboxd.ErrPrecondition (Classify:
// KindPrecondition), so a writer that read an old build never relabels a
// newer one.
func (f *Fleet) LabelTemplate(ctx context.Context, addr string, key sandbox.PoolKey, labels map[string]string, digest string) error {
	return f.onNode(ctx, addr, "label template "+key.Template, func(ctx context.Context, c *sandboxd.Client) error {
		return c.SetTemplateLabels(ctx, key, labels, digest)
	})
}

// DeleteTemplate removes the promoted template key and its saved files
// from the node at addr (following the node's redirect to the holders it
// names). A non-empty digest deletes it only while it still has that
// content, sandboxd.ErrPrecondition otherwise; a template no node holds
// wraps sandboxd.ErrNotFound.
func (f *Fleet) DeleteTemplate(ctx context.Context, addr string, key sandbox.PoolKey, digest string) error {
	return f.onNode(ctx, addr, "delete template "+key.Template, func(ctx context.Context, c *sandboxd.Client) error {
		return c.DeleteTemplate(ctx, key, digest)
	})
}
