package e2b

// PausePending reports whether the surface has an auto-pause scheduled for
// the sandbox id (sandboxd spelling): the hook tests use to show a pause
// was never scheduled, instead of sleeping past when it would have run.
func PausePending(s *Server, id string) bool { return s.pauser.pending(id) }
