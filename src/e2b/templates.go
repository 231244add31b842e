package e2b

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/e2b/catalog"
	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Templates a build published are listed, read and deleted here, whether
// or not this process serves builds: they live on the nodes (see
// catalog), so every replica answers for them. Snapshots share the
// delete route, as in e2b.

// templateRows renders the namespace's templates: the published ones,
// then those with a build in this process that has not published yet.
func (s *Server) templateRows(ctx context.Context, namespace string) ([]wire.TemplateListed, error) {
	pubs, err := s.catalog.List(ctx, namespace)
	if err != nil {
		return nil, err
	}
	rows := []wire.TemplateListed{}
	seen := map[string]int{}
	for _, p := range pubs {
		seen[p.TemplateID] = len(rows)
		rows = append(rows, wire.TemplateListed{
			TemplateID: p.TemplateID, BuildID: p.BuildID, BuildStatus: string(build.Ready),
			CPUCount: p.CPUCount, MemoryMB: p.MemoryMB, EnvdVersion: s.cfg.EnvdVersion,
			Aliases: []string{p.Name}, Names: []string{p.Name}, CreatedAt: p.Created, UpdatedAt: p.Created,
			CreatedBy: []byte("null"), BuildCount: 1,
		})
	}
	if s.builds == nil {
		return rows, nil
	}
	for _, b := range s.builds.Builds(namespace) {
		v := b.View(0, 1)
		row := wire.TemplateListed{
			TemplateID: b.TemplateID, BuildID: b.ID, BuildStatus: string(v.Status),
			CPUCount: v.Spec.CPUCount, MemoryMB: v.Spec.MemoryMB, EnvdVersion: s.cfg.EnvdVersion,
			Aliases: []string{b.Name}, Names: []string{b.Name}, CreatedAt: v.Created, UpdatedAt: v.Updated,
			CreatedBy: []byte("null"), BuildCount: 1,
		}
		i, ok := seen[b.TemplateID]
		switch {
		case !ok:
			seen[b.TemplateID] = len(rows)
			rows = append(rows, row)
		case !v.Status.Done():
			// A rebuild in progress: the template is there, its newest
			// build is not done.
			rows[i].BuildID, rows[i].BuildStatus, rows[i].UpdatedAt = b.ID, string(v.Status), v.Updated
			rows[i].BuildCount++
		}
	}
	return rows, nil
}

// listTemplates is GET /templates.
func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request, c caller) {
	rows, err := s.templateRows(r.Context(), c.namespace)
	if err != nil {
		s.fleetError(w, err, "list templates")
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

// getTemplate is GET /templates/{templateID}: the template with the
// builds this process knows of, or the published build alone.
func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.PathValue("templateID")
	tags, err := s.catalog.Tags(r.Context(), c.namespace, id)
	if err != nil {
		s.fleetError(w, err, "get the template")
		return
	}
	ok := len(tags) > 0
	var out wire.TemplateDetail
	if ok {
		p := tags[0]
		out = wire.TemplateDetail{
			TemplateID: p.TemplateID, Aliases: []string{p.Name}, Names: []string{p.Name},
			CreatedAt: p.Created, UpdatedAt: p.Created,
		}
		// One build per distinct build the tags hold, oldest first.
		slices.SortFunc(tags, func(a, b *catalog.Published) int { return a.Created.Compare(b.Created) })
		seen := map[string]bool{}
		for _, p := range tags {
			if seen[p.BuildID] {
				continue
			}
			seen[p.BuildID] = true
			finished := p.Created
			out.Builds = append(out.Builds, wire.TemplateBuild{
				BuildID: p.BuildID, Status: string(build.Ready), CPUCount: p.CPUCount, MemoryMB: p.MemoryMB,
				EnvdVersion: s.cfg.EnvdVersion, CreatedAt: p.Created, UpdatedAt: p.Created, FinishedAt: &finished,
			})
			out.CreatedAt = minTime(out.CreatedAt, p.Created)
			if p.Created.After(out.UpdatedAt) {
				out.UpdatedAt = p.Created
			}
		}
	}
	if s.builds != nil {
		for _, b := range s.builds.Builds(c.namespace) {
			if b.TemplateID != id && !(build.ValidName(id) == nil && b.Name == id) {
				continue
			}
			v := b.View(0, 1)
			if !ok {
				ok = true
				out = wire.TemplateDetail{TemplateID: b.TemplateID, Aliases: []string{b.Name}, Names: []string{b.Name}, CreatedAt: v.Created}
			}
			tb := wire.TemplateBuild{
				BuildID: b.ID, Status: string(v.Status), CPUCount: v.Spec.CPUCount, MemoryMB: v.Spec.MemoryMB,
				EnvdVersion: s.cfg.EnvdVersion, CreatedAt: v.Created, UpdatedAt: v.Updated,
			}
			if v.Status.Done() {
				finished := v.Finished
				tb.FinishedAt = &finished
			}
			out.Builds = append(out.Builds, tb)
			if v.Updated.After(out.UpdatedAt) {
				out.UpdatedAt = v.Updated
			}
		}
	}
	if !ok {
		writeError(w, http.StatusNotFound, "template not found")
		return
	}
	// Newest build first, as e2b lists them.
	slices.Reverse(out.Builds)
	writeJSON(w, http.StatusOK, out)
}

// templateSubresource serves GET /templates/aliases/{alias} and GET
// /templates/{templateID}/tags.
func (s *Server) templateSubresource(w http.ResponseWriter, r *http.Request, c caller) {
	switch {
	case r.PathValue("first") == "aliases":
		s.getAlias(w, r, c, r.PathValue("second"))
	case r.PathValue("second") == "tags":
		s.getTags(w, r, c, r.PathValue("first"))
	default:
		writeError(w, http.StatusNotFound, "no such endpoint")
	}
}

// getAlias is GET /templates/aliases/{alias}: whether a template goes by
// the name. A name of another namespace is 404 like one that does not
// exist, so no caller learns what another namespace built.
func (s *Server) getAlias(w http.ResponseWriter, r *http.Request, c caller, alias string) {
	if _, ok := s.cfg.Aliases[alias]; ok {
		writeJSON(w, http.StatusOK, wire.TemplateAliasResponse{TemplateID: alias, Public: true})
		return
	}
	if name, _ := build.SplitRef(alias); build.ValidName(name) == nil {
		p, ok, err := s.catalog.Lookup(r.Context(), c.namespace, alias)
		if err != nil {
			s.fleetError(w, err, "look the alias up")
			return
		}
		if ok && p.Name == name {
			writeJSON(w, http.StatusOK, wire.TemplateAliasResponse{TemplateID: p.TemplateID})
			return
		}
	}
	writeError(w, http.StatusNotFound, "template alias not found")
}

// deleteTemplate is DELETE /templates/{templateID}: a snapshot (how the
// SDK deletes one), or a template with everything it has: its builds in
// this process (a running one is canceled, its sandbox released, before
// anything else goes, so it cannot publish after the delete), its
// published tags on every node, and its uploaded archives. A template
// whose only build failed is deleted too: it is listed, so it must be
// deletable, and its archives must not outlive it.
func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.PathValue("templateID")
	if strings.HasPrefix(id, checkpointPrefix) {
		s.deleteSnapshot(w, r, c)
		return
	}
	templateID, built := s.builtTemplate(c.namespace, id)
	if built {
		select {
		case <-s.builds.Cancel(c.namespace, templateID):
		case <-r.Context().Done():
			writeError(w, http.StatusServiceUnavailable, "the template's build did not stop in time; retry the delete")
			return
		}
		// A build that published before it stopped is on the nodes now.
		s.catalog.Invalidate()
	}
	tags, err := s.catalog.Tags(r.Context(), c.namespace, id)
	if err != nil {
		s.fleetError(w, err, "delete the template")
		return
	}
	if len(tags) == 0 && !built {
		writeError(w, http.StatusNotFound, "template not found")
		return
	}
	defer s.catalog.Invalidate()
	if len(tags) > 0 {
		templateID = tags[0].TemplateID
	}
	if s.builds != nil {
		s.builds.Forget(c.namespace, templateID)
	}
	for _, p := range tags {
		if err := s.unpublish(r.Context(), p, ""); err != nil {
			s.fleetError(w, err, "delete the template")
			return
		}
	}
	if s.cfg.Builds != nil {
		if err := s.cfg.Builds.Store.DeleteTemplate(r.Context(), templateID); err != nil {
			// The template is gone; only its archives are left.
			s.log.Warn("e2b: deleting a template's uploaded archives failed", "template", templateID, "err", err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// builtTemplate finds the template id or name ref among the namespace's
// builds in this process.
func (s *Server) builtTemplate(namespace, ref string) (templateID string, ok bool) {
	if s.builds == nil {
		return "", false
	}
	for _, b := range s.builds.Builds(namespace) {
		if b.TemplateID == ref || b.Name == ref {
			return b.TemplateID, true
		}
	}
	return "", false
}

// dropExpiredUploads is the build manager's Expired hook: once the last
// build record of a template is gone, a template that was never published
// (its builds failed, or never started) is listed nowhere, so what its
// builds uploaded goes too. A published template keeps its archives until
// it is deleted.
func (s *Server) dropExpiredUploads(namespace, templateID string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	tags, err := s.catalog.Tags(ctx, namespace, templateID)
	if err != nil {
		s.log.Warn("e2b: could not tell whether an expired build's template is published; its uploads are kept", "template", templateID, "err", err)
		return
	}
	if _, again := s.builtTemplate(namespace, templateID); len(tags) > 0 || again {
		return
	}
	if err := s.cfg.Builds.Store.DeleteTemplate(ctx, templateID); err != nil {
		s.log.Warn("e2b: deleting an expired build's uploads failed", "template", templateID, "err", err)
	}
}

// unpublish removes one published tag from every node that holds it;
// digest, when set, removes only copies that still hold that content.
func (s *Server) unpublish(ctx context.Context, p *catalog.Published, digest string) error {
	for _, addr := range p.Holders {
		if err := s.fleet.DeleteTemplate(ctx, addr, p.Key, digest); err != nil && !errors.Is(err, sandboxd.ErrNotFound) {
			return err
		}
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
