package sandbox

// LabelAutoResume is the claim label (sandboxd metadata) that lets traffic
// through the data plane wake the sandbox when it is paused: e2b's
// lifecycle autoResume. The e2b surface sets it at create; the envd
// proxy reads it with the sandbox's token and relays with that token
// (sandboxd's active path, which wakes a paused sandbox) only when it is
// set, and otherwise with the fleet token (the passive path, which a
// paused sandbox refuses), so a paused sandbox without it stays paused
// until connect.
const LabelAutoResume = "e2b.autoresume"

// AutoResumes reports whether a sandbox's claim labels let traffic wake it.
func AutoResumes(labels map[string]string) bool { return labels[LabelAutoResume] == "true" }
