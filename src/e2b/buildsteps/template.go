package buildsteps

import (
	"bytes"
	"encoding/json"
)

// Step types the SDK produces.
const (
	TypeRun     = "RUN"
	TypeCopy    = "COPY"
	TypeEnv     = "ENV"
	TypeWorkdir = "WORKDIR"
	TypeUser    = "USER"
)

// Template is a build definition as the SDK sends it (e2b's
// TemplateBuildStartV2). Fields the SDK adds that a build does not need are
// ignored when decoding.
type Template struct {
	FromImage    string `json:"fromImage,omitempty"`
	FromTemplate string `json:"fromTemplate,omitempty"`
	// FromImageRegistry holds the credentials of a private registry; kept
	// raw only so that Validate can refuse it.
	FromImageRegistry json.RawMessage `json:"fromImageRegistry,omitempty"`
	Force             bool            `json:"force,omitempty"`
	StartCmd          string          `json:"startCmd,omitempty"`
	ReadyCmd          string          `json:"readyCmd,omitempty"`
	Steps             []Step          `json:"steps,omitempty"`
}

// Step is one instruction of a build. Force asks a caching builder to
// rebuild from this step; the runner caches nothing, so it always does.
type Step struct {
	Type      string   `json:"type"`
	Args      []string `json:"args,omitempty"`
	FilesHash string   `json:"filesHash,omitempty"`
	Force     bool     `json:"force,omitempty"`
}

// Hashes are the distinct filesHash values of t's COPY steps, in the order
// they first appear: the archives that must have been uploaded before the
// build can start.
func (t Template) Hashes() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range t.Steps {
		if s.Type != TypeCopy || s.FilesHash == "" || seen[s.FilesHash] {
			continue
		}
		seen[s.FilesHash] = true
		out = append(out, s.FilesHash)
	}
	return out
}

// registryGiven reports whether fromImageRegistry carries anything; an
// explicit JSON null is the SDK saying "none".
func (t Template) registryGiven() bool {
	raw := bytes.TrimSpace(t.FromImageRegistry)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}
