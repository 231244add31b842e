package e2b

import (
	"net/http"

	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
)

// updateTemplate serves both PATCH routes. The one field e2b lets a caller
// change is public; here every template is private to its API key's
// namespace, so public false is what the template already is and changes
// nothing, and public true is refused with the reason. The v1 route
// answers 200 with no body, the v2 route the template's names, as e2b's.
func (s *Server) updateTemplate(v2 bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c caller) {
		var req wire.TemplateUpdateRequest
		if !decodeBody(w, r, &req, false) {
			return
		}
		tags, err := s.catalog.Tags(r.Context(), c.namespace, r.PathValue("templateID"))
		if err != nil {
			s.fleetError(w, err, "read the template")
			return
		}
		if len(tags) == 0 {
			writeError(w, http.StatusNotFound, "template not found")
			return
		}
		if req.Public != nil && *req.Public {
			writeError(w, http.StatusBadRequest, "templates cannot be made public: a template is private to its API key's namespace; build it under each namespace that needs it")
			return
		}
		if !v2 {
			w.WriteHeader(http.StatusOK)
			return
		}
		writeJSON(w, http.StatusOK, wire.TemplateUpdateResponse{Names: []string{tags[0].Name}})
	}
}
