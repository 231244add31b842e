package e2b

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/e2b/catalog"
	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Template tags. Each tag of a template is its own promoted template on
// sandboxd (build.PublishedName), labelled with the build it holds
// (catalog.BuildLabel). Assigning a tag re-promotes a clone of the target
// under the tag's name, so the tag moves in one step on the node, which
// sandboxd makes atomic: a create of "name:tag" gets the old build or the
// new one, never a missing template.

// tagCopyClaimPrefix names the short-lived claim a tag assignment clones
// the target through.
const tagCopyClaimPrefix = "e2b-tag-"

// tagCopyTTL bounds that claim's lease: a process that dies mid-copy
// leaves nothing claimed past it.
const tagCopyTTL = 5 * time.Minute

// checkTags validates the tags of a request for the namespace's template
// name, without repeats; msg says what is wrong.
func checkTags(namespace, name string, tags []string) (out []string, msg string) {
	if len(tags) == 0 {
		return nil, "name at least one tag"
	}
	for _, t := range tags {
		if err := build.ValidTag(t); err != nil {
			return nil, fmt.Sprintf("invalid template tag %q: %v", t, err)
		}
		if err := build.CheckPublished(namespace, name, t); err != nil {
			return nil, err.Error()
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) > maxBuildTags {
		return nil, fmt.Sprintf("at most %d tags at once", maxBuildTags)
	}
	return out, ""
}

// assignTags is POST /templates/tags: the tags now hold the build the
// target ("name:tag", or "name" for its default tag) holds.
func (s *Server) assignTags(w http.ResponseWriter, r *http.Request, c caller) {
	var req wire.AssignTagsRequest
	if !decodeBody(w, r, &req, false) {
		return
	}
	name, _ := build.SplitRef(req.Target)
	if _, ok := s.cfg.Aliases[name]; ok {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%q is an alias of the server's alias file; only templates built through this API have tags", name))
		return
	}
	if err := build.ValidName(name); err != nil {
		writeError(w, http.StatusBadRequest, "invalid target template name: "+err.Error())
		return
	}
	tags, msg := checkTags(c.namespace, name, req.Tags)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	target, ok, err := s.catalog.Lookup(r.Context(), c.namespace, req.Target)
	if err != nil {
		s.fleetError(w, err, "look the target up")
		return
	}
	if !ok {
		// The target is not quoted: a 404 says nothing of which names
		// exist in other namespaces, and the same for every caller.
		writeError(w, http.StatusNotFound, "template not found")
		return
	}
	if err := s.copyTags(r.Context(), target, tags); err != nil {
		s.fleetError(w, err, "assign the tags")
		return
	}
	writeJSON(w, http.StatusCreated, wire.AssignedTags{BuildID: target.BuildID, Tags: tags})
}

// copyTags publishes target's content under each of tags: a clone of it
// claimed at a node that holds it, promoted once per tag, then released.
func (s *Server) copyTags(ctx context.Context, target *catalog.Published, tags []string) error {
	defer s.catalog.Invalidate()
	ref := sandbox.ClaimRef{Namespace: target.Namespace, Name: tagCopyClaimPrefix + strings.ToLower(rand.Text()[:16])}
	src := source{Key: target.Key, Alias: target.Name, Promoted: target}
	claimed, err := s.claimSource(ctx, ref, src, target.Key, int(tagCopyTTL/time.Second), nil, claimTerms{})
	if err != nil {
		return fmt.Errorf("clone %s: %w", target.Key.Template, err)
	}
	defer s.releaseQuietly(claimed.Sandbox)
	for _, tag := range tags {
		if tag == target.Tag {
			continue // it holds the build already
		}
		res, err := s.publishTag(ctx, claimed, target.Namespace, target.Name, tag, target.BuildID)
		if err != nil {
			return fmt.Errorf("publish tag %s: %w", tag, err)
		}
		s.dropOtherCopies(ctx, res.Key, res.ContentDigest, claimed.NodeAddr, func(err error) {
			s.log.Warn("e2b: removing a moved tag's earlier copy failed", "template", res.Key.Template, "err", err)
		})
	}
	return nil
}

// removeTags is DELETE /templates/tags: the tags of the named template
// are removed, all of them or, when one is missing, none.
func (s *Server) removeTags(w http.ResponseWriter, r *http.Request, c caller) {
	var req wire.DeleteTagsRequest
	if !decodeBody(w, r, &req, false) {
		return
	}
	if strings.Contains(req.Name, ":") {
		writeError(w, http.StatusBadRequest, "name the template without a tag; the tags to remove go in tags")
		return
	}
	if err := build.ValidName(req.Name); err != nil {
		writeError(w, http.StatusBadRequest, "invalid template name: "+err.Error())
		return
	}
	tags, msg := checkTags(c.namespace, req.Name, req.Tags)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	found := make([]*catalog.Published, 0, len(tags))
	for _, t := range tags {
		p, ok, err := s.catalog.Lookup(r.Context(), c.namespace, req.Name+":"+t)
		if err != nil {
			s.fleetError(w, err, "look the tag up")
			return
		}
		if !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("template not found, or it has no tag %q", t))
			return
		}
		found = append(found, p)
	}
	defer s.catalog.Invalidate()
	for _, p := range found {
		// Only the build that was read: a tag moved meanwhile stays.
		err := s.unpublish(r.Context(), p, p.Digest)
		if errors.Is(err, sandboxd.ErrPrecondition) {
			writeError(w, http.StatusConflict, fmt.Sprintf("tag %q moved while it was being removed; read the tags again", p.Tag))
			return
		}
		if err != nil {
			s.fleetError(w, err, "remove the tags")
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// getTags is GET /templates/{templateID}/tags: every tag of the template,
// with the build it holds.
func (s *Server) getTags(w http.ResponseWriter, r *http.Request, c caller, ref string) {
	tags, err := s.catalog.Tags(r.Context(), c.namespace, ref)
	if err != nil {
		s.fleetError(w, err, "read the tags")
		return
	}
	if len(tags) == 0 {
		writeError(w, http.StatusNotFound, "template not found")
		return
	}
	out := make([]wire.TemplateTag, 0, len(tags))
	for _, p := range tags {
		out = append(out, wire.TemplateTag{Tag: p.Tag, BuildID: p.BuildID, CreatedAt: p.Created})
	}
	writeJSON(w, http.StatusOK, out)
}
