package node

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// errNotIntercepted answers any inject entry: the simulator has no egress
// proxy, so no host is intercepted for a claim credential.
var errNotIntercepted = &apiError{http.StatusBadRequest, "inject host not intercepted"}

// decodeEnvEntry reads one env entry as sent: only value, guest and inject,
// guest a boolean (null is refused, so a mistyped flag never puts a
// host-only value in the guest), inject an object of its known fields.
func decodeEnvEntry(name string, raw json.RawMessage) (sandboxd.EnvEntry, *apiError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return sandboxd.EnvEntry{}, errorf(http.StatusBadRequest, "env %.128q: an entry is an object", name)
	}
	var e sandboxd.EnvEntry
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v := fields[k]
		var err error
		switch k {
		case "value":
			if len(v) == 0 || v[0] != '"' {
				return e, errorf(http.StatusBadRequest, "env %.128q: value is not a string", name)
			}
			err = json.Unmarshal(v, &e.Value)
		case "guest":
			if string(v) != "true" && string(v) != "false" {
				return e, errorf(http.StatusBadRequest, "env %.128q: guest must be true or false", name)
			}
			e.Guest = new(bool)
			*e.Guest = string(v) == "true"
		case "inject":
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.DisallowUnknownFields()
			e.Inject = new(sandboxd.EnvInject)
			err = dec.Decode(e.Inject)
		default:
			return e, errorf(http.StatusBadRequest, "env %.128q: unknown member %.32q", name, k)
		}
		if err != nil {
			return e, errorf(http.StatusBadRequest, "env %.128q: bad %s", name, k)
		}
	}
	return e, nil
}

// decodeEnv reads a claim's env field (absent or null: none) and checks it
// under the claim rules.
func decodeEnv(raw json.RawMessage) (map[string]sandboxd.EnvEntry, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, errorf(http.StatusBadRequest, "env must be an object of entries")
	}
	env := make(map[string]sandboxd.EnvEntry, len(fields))
	for name, v := range fields {
		e, aerr := decodeEnvEntry(name, v)
		if aerr != nil {
			return nil, aerr
		}
		env[name] = e
	}
	return checkEnv(env)
}

// checkEnv applies the bounds, then refuses any inject: no host is
// intercepted here.
func checkEnv(env map[string]sandboxd.EnvEntry) (map[string]sandboxd.EnvEntry, *apiError) {
	if err := sandboxd.ValidateEnv(env); err != nil {
		return nil, errorf(http.StatusBadRequest, "%s", err)
	}
	for _, e := range env {
		if e.Inject != nil {
			return nil, errNotIntercepted
		}
	}
	if len(env) == 0 {
		return nil, nil
	}
	return env, nil
}

// guestEnv is what the guest sees of a claim env: the names and values of
// its guest entries. Processes the buffered exec starts get them; the
// simulator's envd guest does not (it takes its environment when the
// sandbox starts, and silkd's env file has no counterpart there).
func guestEnv(env map[string]sandboxd.EnvEntry) map[string]string {
	out := map[string]string{}
	for name, e := range env {
		if e.InGuest() {
			out[name] = e.Value
		}
	}
	return out
}

// envBody reads a PUT or PATCH body: {"env": {...}} and nothing else.
func envBody(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, *apiError) {
	var body map[string]json.RawMessage
	if err := decodeBody(w, r, &body, false); err != nil {
		return nil, err
	}
	raw, ok := body["env"]
	if len(body) != 1 || !ok {
		return nil, errorf(http.StatusBadRequest, "the body is {\"env\": {...}} and nothing else")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, errorf(http.StatusBadRequest, "env must be an object of entries")
	}
	return fields, nil
}

// envSandboxLocked resolves the claim an env call names: a tenant reaches
// only its own, anything else is the unknown id's 404.
func (n *Node) envSandboxLocked(c caller, id string) (*claimed, *apiError) {
	sb := n.sandboxes[id]
	if sb == nil || (c.kind == callerTenant && sb.tenant != c.tenant) {
		return nil, errNotFound
	}
	return sb, nil
}

func (n *Node) handleGetEnv(w http.ResponseWriter, r *http.Request) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return
	}
	n.mu.Lock()
	sb, aerr := n.envSandboxLocked(c, r.PathValue("id"))
	out := map[string]sandboxd.EnvEntry{}
	if sb != nil {
		for name, e := range sb.env {
			if !e.InGuest() {
				e.Value = "" // a control plane sees host-only names, never values
			}
			out[name] = e
		}
	}
	n.mu.Unlock()
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, sandboxd.ClaimEnv{Env: out})
}

// handleSetEnv serves PUT (replace) and PATCH (merge, null removes).
func (n *Node) handleSetEnv(merge bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := n.nodeCaller(w, r)
		if !ok {
			return
		}
		fields, aerr := envBody(w, r)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		// Entries are read before the lock; the merge needs the stored env.
		set := map[string]sandboxd.EnvEntry{}
		var drop []string
		for name, v := range fields {
			if merge && string(v) == "null" {
				drop = append(drop, name)
				continue
			}
			e, aerr := decodeEnvEntry(name, v)
			if aerr != nil {
				writeError(w, aerr)
				return
			}
			set[name] = e
		}
		respondEmpty(w, n.setEnv(c, r.PathValue("id"), set, drop, merge))
	}
}

func (n *Node) setEnv(c caller, id string, set map[string]sandboxd.EnvEntry, drop []string, merge bool) *apiError {
	n.mu.Lock()
	defer n.mu.Unlock()
	sb, aerr := n.envSandboxLocked(c, id)
	if aerr != nil {
		return aerr
	}
	next := set
	if merge {
		next = maps.Clone(sb.env)
		if next == nil {
			next = map[string]sandboxd.EnvEntry{}
		}
		maps.Copy(next, set)
		for _, name := range drop {
			delete(next, name)
		}
	}
	// The merged env is checked as a whole, so a patch past a bound
	// changes nothing.
	next, aerr = checkEnv(next)
	if aerr != nil {
		return aerr
	}
	// Guest entries are written into the guest at once, which needs it
	// running; host-only entries change at any time.
	if sb.failed != "" && !maps.Equal(guestEnv(sb.env), guestEnv(next)) {
		return refuseFailed(sb, "env")
	}
	if sb.hibernated && !maps.Equal(guestEnv(sb.env), guestEnv(next)) {
		return errorf(http.StatusConflict, "the sandbox is paused: a change to its guest env needs it running (this verb never wakes one)")
	}
	sb.env = next
	return nil
}
