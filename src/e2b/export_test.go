package e2b

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
