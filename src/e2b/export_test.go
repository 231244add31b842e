package e2b

// PausePending reports whether the surface has an auto-pause scheduled for
// the sandbox id (sandboxd spelling): the hook tests use to show a pause
// was never scheduled, instead of sleeping past when it would have run.
func PausePending(s *Server, id string) bool { return s.pauser.pending(id) }

// RouteAuth is what each of the surface's routes declares authorizes it
// ("none", "key" or "signature"), by pattern: the auth matrix checks its
// expectations against the declaration as well as against the answers.
func RouteAuth(s *Server) map[string]string {
	out := make(map[string]string, len(s.table))
	for _, r := range s.table {
		out[r.pattern] = r.auth.String()
	}
	return out
}
