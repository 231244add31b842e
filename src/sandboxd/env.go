package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"unicode"
)

// Bounds on a claim's env, as sandboxd enforces them.
const (
	// MaxEnvEntries is how many names one claim's env may hold.
	MaxEnvEntries = 64
	// MaxEnvNameBytes bounds a name.
	MaxEnvNameBytes = 128
	// MaxEnvValueBytes bounds one value.
	MaxEnvValueBytes = 8 << 10
	// MaxEnvTotalBytes bounds every name plus every value together.
	MaxEnvTotalBytes = 64 << 10
)

// EnvEntry is one name of a claim's env.
type EnvEntry struct {
	// Value is blanked in a GET answer for an entry that is not delivered
	// to the guest.
	Value string `json:"value"`
	// Guest delivers the entry into the guest; nil means true. A false
	// entry stays on the host and only feeds the node's egress secrets.
	Guest *bool `json:"guest,omitempty"`
	// Inject makes the entry a credential the egress proxy sends to the
	// named hosts.
	Inject *EnvInject `json:"inject,omitempty"`
}

// InGuest reports whether the entry is delivered into the guest.
func (e EnvEntry) InGuest() bool { return e.Guest == nil || *e.Guest }

// EnvInject is where the egress proxy puts a claim credential: a header,
// or a query parameter (and, with Body, the form body) on requests to
// Hosts. Placeholder is the stand-in the guest sends instead of the value.
type EnvInject struct {
	Hosts       []string `json:"hosts"`
	Header      string   `json:"header,omitempty"`
	Query       string   `json:"query,omitempty"`
	Body        bool     `json:"body,omitempty"`
	Placeholder string   `json:"placeholder,omitempty"`
}

// ClaimEnv is the body of GET and PUT /v1/sandboxes/{id}/env.
type ClaimEnv struct {
	Env map[string]EnvEntry `json:"env"`
}

// ClaimEnvPatch is the body of PATCH /v1/sandboxes/{id}/env: a nil entry
// removes that name, every other entry is set.
type ClaimEnvPatch struct {
	Env map[string]*EnvEntry `json:"env"`
}

// ValidateEnv checks a claim env against sandboxd's bounds, so a caller can
// refuse a bad env before any node sees it: at most MaxEnvEntries names,
// each a shell identifier of at most MaxEnvNameBytes, each value at most
// MaxEnvValueBytes with no control character but tab, names plus values at
// most MaxEnvTotalBytes, and an inject naming at least one host and exactly
// one of header and query (body only with query). Names are checked in
// sorted order; the error names the name at fault, never a value.
func ValidateEnv(env map[string]EnvEntry) error {
	if len(env) > MaxEnvEntries {
		return fmt.Errorf("env: %d entries, at most %d", len(env), MaxEnvEntries)
	}
	total := 0
	for _, name := range slices.Sorted(maps.Keys(env)) {
		if err := validEnvName(name); err != nil {
			return err
		}
		e := env[name]
		if len(e.Value) > MaxEnvValueBytes {
			return fmt.Errorf("env %s: value of %d bytes, at most %d", name, len(e.Value), MaxEnvValueBytes)
		}
		for _, r := range e.Value {
			if r != '\t' && unicode.IsControl(r) {
				return fmt.Errorf("env %s: control character %U in the value", name, r)
			}
		}
		if e.Inject != nil {
			if err := validInject(name, e.Inject); err != nil {
				return err
			}
		}
		total += len(name) + len(e.Value)
	}
	if total > MaxEnvTotalBytes {
		return fmt.Errorf("env: %d bytes of names and values, at most %d", total, MaxEnvTotalBytes)
	}
	return nil
}

// validEnvName accepts a shell identifier: a letter or underscore, then
// letters, digits and underscores.
func validEnvName(name string) error {
	if name == "" {
		return errors.New("env: empty name")
	}
	if len(name) > MaxEnvNameBytes {
		return fmt.Errorf("env name %.32q…: %d bytes, at most %d", name, len(name), MaxEnvNameBytes)
	}
	for i := range len(name) {
		b := name[i]
		letter := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '_'
		if !letter && (i == 0 || b < '0' || b > '9') {
			return fmt.Errorf("env name %q: not a shell identifier", name)
		}
	}
	return nil
}

func validInject(name string, in *EnvInject) error {
	switch {
	case len(in.Hosts) == 0:
		return fmt.Errorf("env %s: inject names no host", name)
	case (in.Header == "") == (in.Query == ""):
		return fmt.Errorf("env %s: inject needs exactly one of header and query", name)
	case in.Body && in.Query == "":
		return fmt.Errorf("env %s: inject body needs query", name)
	}
	for _, h := range in.Hosts {
		if h == "" {
			return fmt.Errorf("env %s: inject names an empty host", name)
		}
	}
	return nil
}

// Env reads a claim's env (root, or the owning tenant's token). Entries
// not delivered to the guest come back with their value blanked.
func (c *Client) Env(ctx context.Context, id string) (map[string]EnvEntry, error) {
	var out ClaimEnv
	if err := c.do(ctx, http.MethodGet, sandboxPath(id, "env"), nil, nil, &out, "GET /v1/sandboxes/{id}/env"); err != nil {
		return nil, err
	}
	return out.Env, nil
}

// SetEnv replaces a claim's whole env; an empty map clears it. A change to
// the guest entries of a hibernated or archived sandbox is ErrConflict.
func (c *Client) SetEnv(ctx context.Context, id string, env map[string]EnvEntry) error {
	if env == nil {
		env = map[string]EnvEntry{}
	}
	return c.do(ctx, http.MethodPut, sandboxPath(id, "env"), nil, ClaimEnv{Env: env}, nil, "PUT /v1/sandboxes/{id}/env")
}

// PatchEnv merges into a claim's env: a nil entry removes the name, every
// other entry is set, and names left out keep their stored entries
// (host-only values included).
func (c *Client) PatchEnv(ctx context.Context, id string, patch map[string]*EnvEntry) error {
	if patch == nil {
		patch = map[string]*EnvEntry{}
	}
	return c.do(ctx, http.MethodPatch, sandboxPath(id, "env"), nil, ClaimEnvPatch{Env: patch}, nil, "PATCH /v1/sandboxes/{id}/env")
}
