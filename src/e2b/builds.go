package e2b

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/e2b/buildsteps"
	"github.com/cocoonstack/sandbox-operator/src/e2b/catalog"
	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// maxBuildBodyBytes bounds a build definition: the SDK sends every step's
// arguments in one body.
const maxBuildBodyBytes = 4 << 20

// maxStatusLogs bounds the log lines one status poll returns; the SDK
// polls from its offset until no lines are left.
const maxStatusLogs = 1000

// filesHashRE is the files hash the SDK keys an upload by.
var filesHashRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// buildRoutes is the template build API, or, when builds are off, its
// routes answering with what turns them on.
func (s *Server) buildRoutes() []route {
	var rs []route
	builds := []struct {
		pattern string
		handler handlerFunc
	}{
		{"POST /v3/templates", s.requestBuild},
		{"GET /templates/{templateID}/files/{hash}", s.fileUploadLink},
		{"POST /v2/templates/{templateID}/builds/{buildID}", s.startBuild},
		{"GET /templates/{templateID}/builds/{buildID}/status", s.buildStatus},
		{"GET /templates/{templateID}/builds/{buildID}/logs", s.buildLogs},
	}
	if s.cfg.Builds == nil {
		off := func(w http.ResponseWriter, _ *http.Request, _ caller) {
			writeError(w, http.StatusNotImplemented, "template builds are not enabled on this server (--e2b-builds)")
		}
		for _, b := range builds {
			rs = append(rs, s.keyed(b.pattern, off))
		}
		return rs
	}
	for _, b := range builds {
		rs = append(rs, s.keyed(b.pattern, b.handler))
	}
	if up := s.cfg.Builds.Uploads; up != nil {
		// The signature in the URL is the upload's authorization: the
		// SDK sends no API key with it.
		rs = append(rs, route{pattern: "PUT /e2b-files/", handler: up, auth: authSignature})
	}
	return rs
}

// requestBuild is POST /v3/templates: it registers a build of the named
// template, which waits for its definition.
func (s *Server) requestBuild(w http.ResponseWriter, r *http.Request, c caller) {
	var req wire.TemplateBuildRequest
	if !decodeBody(w, r, &req, false) {
		return
	}
	name, tags, msg := buildNameAndTags(cmp.Or(req.Name, req.Alias), req.Tags, c.namespace)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if _, ok := s.cfg.Aliases[name]; ok {
		writeError(w, http.StatusConflict, fmt.Sprintf("%q is an alias of the server's alias file; build under another name", name))
		return
	}
	if (req.CPUCount != nil && *req.CPUCount < 1) || (req.MemoryMB != nil && *req.MemoryMB < 1) {
		writeError(w, http.StatusBadRequest, "cpuCount and memoryMB must be positive")
		return
	}
	spec := build.Spec{Namespace: c.namespace, Name: name, TemplateID: build.TemplateID(c.namespace, name), Tags: tags}
	if req.CPUCount != nil {
		spec.CPUCount = *req.CPUCount
	}
	if req.MemoryMB != nil {
		spec.MemoryMB = *req.MemoryMB
	}
	b, err := s.builds.Register(spec)
	switch {
	case errors.Is(err, build.ErrBusy):
		writeError(w, http.StatusConflict, "a build of this template is already in progress")
		return
	case errors.Is(err, build.ErrFull):
		w.Header().Set("Retry-After", "60")
		writeError(w, http.StatusTooManyRequests, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "could not register the build")
		return
	}
	writeJSON(w, http.StatusAccepted, wire.TemplateRequestResponse{
		TemplateID: b.TemplateID, BuildID: b.ID, Names: []string{name}, Aliases: []string{name}, Tags: tags,
	})
}

// maxBuildTags bounds the tags one build publishes under: each is a
// promoted template on the node.
const maxBuildTags = 8

// buildNameAndTags reads a build request's "name[:tag]" and extra tags
// into the template name and the tags the build publishes under, the
// name's own tag (or the default one) first; msg says what is wrong.
func buildNameAndTags(ref string, extra []string, namespace string) (name string, tags []string, msg string) {
	name, tag := build.SplitRef(ref)
	if err := build.ValidName(name); err != nil {
		return "", nil, "invalid template name: " + err.Error()
	}
	for _, t := range append([]string{tag}, extra...) {
		if err := build.ValidTag(t); err != nil {
			return "", nil, fmt.Sprintf("invalid template tag %q: %v", t, err)
		}
		if err := build.CheckPublished(namespace, name, t); err != nil {
			return "", nil, err.Error()
		}
		if !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	if len(tags) > maxBuildTags {
		return "", nil, fmt.Sprintf("a build takes at most %d tags", maxBuildTags)
	}
	return name, tags, ""
}

// ownBuild finds the path's build in the caller's namespace; another
// namespace's is 404 like one that does not exist.
func (s *Server) ownBuild(w http.ResponseWriter, r *http.Request, c caller) (*build.Build, bool) {
	b, ok := s.builds.Get(r.PathValue("templateID"), r.PathValue("buildID"))
	if !ok || b.Namespace != c.namespace {
		writeError(w, http.StatusNotFound, "build not found")
		return nil, false
	}
	return b, true
}

// fileUploadLink is GET /templates/{templateID}/files/{hash}: whether a
// COPY step's archive is stored, and where to upload it if not.
func (s *Server) fileUploadLink(w http.ResponseWriter, r *http.Request, c caller) {
	id, hash := r.PathValue("templateID"), r.PathValue("hash")
	if !filesHashRE.MatchString(hash) {
		writeError(w, http.StatusBadRequest, "the files hash must be 64 lowercase hex digits")
		return
	}
	known := false
	for _, b := range s.builds.Builds(c.namespace) {
		known = known || b.TemplateID == id
	}
	if !known {
		writeError(w, http.StatusNotFound, "template not found: request a build first")
		return
	}
	link, err := s.cfg.Builds.Store.UploadLink(r.Context(), requestBase(r), id, hash)
	if err != nil {
		s.log.Error("e2b: the build store could not hand out an upload link", "template", id, "err", err)
		writeError(w, http.StatusInternalServerError, "the build store could not hand out an upload link")
		return
	}
	if !link.Present && !s.checkUploadLink(w, r, c) {
		return
	}
	writeJSON(w, http.StatusCreated, wire.FileUploadResponse{Present: link.Present, URL: link.URL, Headers: link.Headers})
}

// requestBase is the scheme and host the caller reached this surface at,
// which the directory store builds its upload URLs on.
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// buildDefinition is what a started build runs.
type buildDefinition struct {
	template buildsteps.Template
	base     source
}

// startBuild is POST /v2/templates/{templateID}/builds/{buildID}: the
// build's definition. It starts the build, or queues it when no build
// slot is free for the caller's namespace.
func (s *Server) startBuild(w http.ResponseWriter, r *http.Request, c caller) {
	b, ok := s.ownBuild(w, r, c)
	if !ok {
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBuildBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("could not read the build definition (at most %d bytes)", maxBuildBodyBytes))
		return
	}
	// The SDK sends each step as it holds it, with fields of its own
	// (forceUpload, gzip, …): unknown fields are ignored here.
	var tpl buildsteps.Template
	if err := json.Unmarshal(raw, &tpl); err != nil {
		writeError(w, http.StatusBadRequest, "invalid build definition: "+err.Error())
		return
	}
	if err := tpl.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid build definition: "+err.Error())
		return
	}
	base, msg := s.buildBase(r, c, tpl)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	size := base.Key.WithDefaults().Size
	if msg := fitsSize(b.View(0, 1).Spec, size); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if tier, ok := sandbox.SizeOf(size); ok {
		b.Resize(tier.CPUCount, tier.MemoryMiB)
	}
	// A build that finds no free slot is queued, not refused: e2b's
	// TemplateBuildStartV2 answers 202 and the SDK polls the status,
	// which says "waiting" and where the build is in the queue. A 429
	// would have the SDK give up after its retries while the build
	// still ran.
	switch err := s.builds.Start(b, buildDefinition{template: tpl, base: base}); {
	case err == nil, errors.Is(err, build.ErrQueued):
		w.WriteHeader(http.StatusAccepted)
	default:
		s.log.Error("e2b: starting a build failed", "template", b.TemplateID, "build", b.ID, "err", err)
		writeError(w, http.StatusInternalServerError, "could not start the build")
	}
}

// buildBase resolves what a build starts from: fromTemplate like a
// create's template, or fromImage as an image a pool serves. It returns
// the 400 message when there is none.
func (s *Server) buildBase(r *http.Request, c caller, tpl buildsteps.Template) (source, string) {
	ref, what := tpl.FromTemplate, "fromTemplate"
	if ref == "" {
		ref, what = tpl.FromImage, "fromImage"
	}
	if ref == "" {
		return source{}, "the build names no base: set fromTemplate (such as 'base') or fromImage"
	}
	if err := catalog.ValidTemplateID(ref); err != nil {
		return source{}, fmt.Sprintf("invalid %s: %s", what, err)
	}
	src, err := s.resolveSource(r.Context(), c.namespace, ref)
	switch {
	case errors.Is(err, errNoTemplate):
		return source{}, fmt.Sprintf("%s %q names no template, alias or image a warm pool serves here (use fromTemplate with an alias of the server, such as 'base')", what, ref)
	case err != nil:
		return source{}, "the base could not be resolved: " + err.Error()
	case src.Checkpoint != nil:
		return source{}, "a build cannot start from a snapshot; start a sandbox from it and snapshot that instead"
	}
	return src, ""
}

// fitsSize refuses a build whose requested CPUs or memory exceed the size
// tier of its base: a template is served at its base's size.
func fitsSize(spec build.Spec, size string) string {
	tier, ok := sandbox.SizeOf(size)
	if !ok {
		return ""
	}
	if spec.CPUCount > tier.CPUCount || spec.MemoryMB > tier.MemoryMiB {
		return fmt.Sprintf("cpuCount %d / memoryMB %d exceed the base's size %q (%d CPUs, %d MiB): templates are served at their base's size",
			spec.CPUCount, spec.MemoryMB, size, tier.CPUCount, tier.MemoryMiB)
	}
	return ""
}

// buildStatus is GET /templates/{templateID}/builds/{buildID}/status.
func (s *Server) buildStatus(w http.ResponseWriter, r *http.Request, c caller) {
	q := r.URL.Query()
	offset, err := strconv.Atoi(cmp.Or(q.Get("logsOffset"), "0"))
	if err != nil || offset < 0 {
		writeError(w, http.StatusBadRequest, "logsOffset must be a non-negative integer")
		return
	}
	limit, err := strconv.Atoi(cmp.Or(q.Get("limit"), strconv.Itoa(maxStatusLogs)))
	if err != nil || limit < 1 {
		writeError(w, http.StatusBadRequest, "limit must be a positive integer")
		return
	}
	minLevel, ok := levelRank[cmp.Or(q.Get("level"), build.LevelDebug)]
	if !ok {
		writeError(w, http.StatusBadRequest, "level must be one of debug, info, warn, error")
		return
	}
	id, buildID := r.PathValue("templateID"), r.PathValue("buildID")
	b, ok := s.lookupBuild(w, r, c)
	if !ok {
		return
	}
	if b == nil {
		writeJSON(w, http.StatusOK, wire.BuildInfo{TemplateID: id, BuildID: buildID, Status: string(build.Ready), Logs: []string{}, LogEntries: []wire.BuildLogEntry{}})
		return
	}
	v := b.View(offset, min(limit, maxStatusLogs))
	out := wire.BuildInfo{TemplateID: id, BuildID: buildID, Status: string(v.Status), Logs: []string{}, LogEntries: []wire.BuildLogEntry{}}
	// logsOffset counts every line of the log; a level filter only thins
	// the page it starts.
	for _, e := range v.Logs {
		if levelRank[e.Level] < minLevel {
			continue
		}
		out.LogEntries = append(out.LogEntries, wireLog(e))
		out.Logs = append(out.Logs, e.Message)
	}
	switch {
	case v.Reason != nil:
		out.Reason = &wire.BuildStatusReason{Message: v.Reason.Message, Step: v.Reason.Step, LogEntries: []wire.BuildLogEntry{}}
		for _, e := range v.Reason.Logs {
			out.Reason.LogEntries = append(out.Reason.LogEntries, wireLog(e))
		}
	case v.QueuePosition > 0:
		// TemplateBuildInfo has no queue field: a waiting build's reason
		// says where it stands (the SDK reads a reason only on error),
		// and its log has a line each time that changed.
		out.Reason = &wire.BuildStatusReason{Message: fmt.Sprintf("queued: position %d in the build queue", v.QueuePosition), LogEntries: []wire.BuildLogEntry{}}
	}
	writeJSON(w, http.StatusOK, out)
}

// lookupBuild finds the build the path names in the caller's namespace.
// A build another replica ran, or this one before a restart, is known only
// by the template it published: b is nil then, and the build is ready
// with no logs. ok is false once an error has been answered.
func (s *Server) lookupBuild(w http.ResponseWriter, r *http.Request, c caller) (b *build.Build, ok bool) {
	id, buildID := r.PathValue("templateID"), r.PathValue("buildID")
	if b, found := s.builds.Get(id, buildID); found && b.Namespace == c.namespace {
		return b, true
	}
	p, found, err := s.catalog.Lookup(r.Context(), c.namespace, id)
	if err != nil {
		s.fleetError(w, err, "read the build")
		return nil, false
	}
	if !found || p.TemplateID != id || build.PublishedBuildID(p.Digest) != buildID {
		writeError(w, http.StatusNotFound, "build not found")
		return nil, false
	}
	return nil, true
}

var levelRank = map[string]int{build.LevelDebug: 0, build.LevelInfo: 1, build.LevelWarn: 2, build.LevelError: 3}

func wireLog(e build.LogEntry) wire.BuildLogEntry {
	return wire.BuildLogEntry{Timestamp: e.Timestamp, Level: e.Level, Message: e.Message, Step: e.Step}
}
