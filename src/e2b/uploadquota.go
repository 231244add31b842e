package e2b

import (
	"context"
	"fmt"
	"math"
	"net/http"

	"github.com/cocoonstack/sandbox-operator/src/e2b/buildstore"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
)

// A namespace's template uploads are bounded in files and bytes
// (BuildConfig.MaxUploadFiles, MaxUploadBytes), counted from the store
// itself, so the count survives restarts and is the same on every replica
// sharing the store. An upload link is refused once the namespace is at
// either bound; the directory store's own PUT is decided again with the
// body's declared size, and bounded to the bytes left. Within this
// process a namespace's uploads are decided one at a time and those still
// being written count too; replicas sharing a store can each admit one
// upload past a bound at once. The S3 store takes uploads at the bucket,
// so for it only the link is checked.

// namespaceUploads adds up what the namespace's templates keep in the
// store: those published, and those with a build in this process.
func (s *Server) namespaceUploads(ctx context.Context, namespace string) (buildstore.Usage, error) {
	ids := map[string]bool{}
	for _, b := range s.builds.Builds(namespace) {
		ids[b.TemplateID] = true
	}
	pubs, err := s.catalog.List(ctx, namespace)
	if err != nil {
		return buildstore.Usage{}, fmt.Errorf("listing the templates of %s: %w", namespace, err)
	}
	for _, p := range pubs {
		ids[p.TemplateID] = true
	}
	var total buildstore.Usage
	for id := range ids {
		u, err := s.cfg.Builds.Store.Usage(ctx, id)
		if err != nil {
			return buildstore.Usage{}, fmt.Errorf("counting the uploads of template %s: %w", id, err)
		}
		total = total.Add(u)
	}
	return total.Add(s.uploads.Of(namespace)), nil
}

// uploadRoom is how many bytes the namespace may still upload in one more
// file, or the refusal that names the bound reached. Call it under the
// namespace's upload lock.
func (s *Server) uploadRoom(ctx context.Context, namespace string) (int64, *buildstore.Refusal, error) {
	used, err := s.namespaceUploads(ctx, namespace)
	if err != nil {
		return 0, nil, err
	}
	maxFiles, maxBytes := s.cfg.Builds.MaxUploadFiles, s.cfg.Builds.MaxUploadBytes
	if maxFiles > 0 && used.Files >= maxFiles {
		return 0, buildstore.TooLarge(fmt.Sprintf(
			"this API key's namespace has reached its limit of %d uploaded template files; delete a template to free some", maxFiles)), nil
	}
	if maxBytes <= 0 {
		return math.MaxInt64, nil, nil
	}
	if room := maxBytes - used.Bytes; room > 0 {
		return room, nil, nil
	}
	return 0, buildstore.TooLarge(fmt.Sprintf(
		"this API key's namespace has reached its limit of %d bytes of uploaded template files; delete a template to free some", maxBytes)), nil
}

// checkUploadLink refuses an upload link (413) when the namespace is at a
// bound; ok is false once the answer is written.
func (s *Server) checkUploadLink(w http.ResponseWriter, r *http.Request, c caller) bool {
	unlock := s.uploadLocks.Lock(c.namespace)
	defer unlock()
	_, refused, err := s.uploadRoom(r.Context(), c.namespace)
	switch {
	case err != nil:
		s.fleetError(w, err, "count the namespace's uploads")
		return false
	case refused != nil:
		s.cfg.Refusals.Refused(metrics.ReasonQuota)
		writeError(w, refused.Status, refused.Message)
		return false
	}
	return true
}

// admitUpload is the directory store's Admission. An archive is taken only
// for a template with a build in this process (the one the link was handed
// out for), within its namespace's bounds; an archive stored after its
// template was deleted meanwhile is removed at once, so nothing a build
// uploaded outlives its template.
func (s *Server) admitUpload(ctx context.Context, templateID, _ string, declared int64) (int64, func(bool), error) {
	namespace, ok := s.builds.Namespace(templateID)
	if !ok {
		return 0, nil, &buildstore.Refusal{Status: http.StatusNotFound, Message: "the template has no build in progress on this server: request a build first"}
	}
	unlock := s.uploadLocks.Lock(namespace)
	defer unlock()
	room, refused, err := s.uploadRoom(ctx, namespace)
	switch {
	case err != nil:
		return 0, nil, err
	case refused != nil:
		s.cfg.Refusals.Refused(metrics.ReasonQuota)
		return 0, nil, refused
	case declared > room:
		s.cfg.Refusals.Refused(metrics.ReasonQuota)
		return 0, nil, buildstore.TooLarge(fmt.Sprintf(
			"the archive's %d bytes exceed the %d bytes left of this API key's namespace's limit of %d bytes of uploaded template files",
			declared, room, s.cfg.Builds.MaxUploadBytes))
	}
	reserved := buildstore.Usage{Files: 1, Bytes: room}
	if declared >= 0 {
		reserved.Bytes = declared
	}
	s.uploads.Add(namespace, reserved)
	done := func(stored bool) {
		s.uploads.Add(namespace, buildstore.Usage{Files: -reserved.Files, Bytes: -reserved.Bytes})
		if _, kept := s.builds.Namespace(templateID); stored && !kept {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
			defer cancel()
			if err := s.cfg.Builds.Store.DeleteTemplate(ctx, templateID); err != nil {
				s.log.Warn("e2b: deleting an archive uploaded after its template was deleted failed", "template", templateID, "err", err)
			}
		}
	}
	return reserved.Bytes, done, nil
}
