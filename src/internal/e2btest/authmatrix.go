// Package e2btest is the e2b surface's auth matrix: every route the
// surface lists (e2b.Server.Routes), sent with every credential a caller
// might hold, each answer checked against a rule for the route. src/e2b
// runs it over the surface alone and src/cmd/sandbox-e2b/app over the assembled
// sandbox-e2b process, so one set of rules guards both, and a route added
// to the surface without a rule here fails both.
package e2btest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// Surface is an e2b surface under test, serving two namespaces: A, whose
// objects the matrix addresses, and B, a valid key of another namespace.
type Surface struct {
	URL    string
	Client *http.Client
	// Routes is what the surface lists (e2b.Server.Routes).
	Routes []string
	// Declared, when set, is the auth each route declares by pattern
	// ("none", "key", "signature"); every rule must agree with it.
	Declared map[string]string
	KeyA     string
	KeyB     string
	// Base is a template (an alias) namespace A creates and builds from.
	Base string
	// RootToken is the sandboxd nodes' root token: a credential the matrix
	// sends, and how it reads A's sandbox as the fleet holds it.
	RootToken string
	NodeAddrs []string
}

// Objects are namespace A's objects the matrix names.
type Objects struct {
	// Sandbox is A's sandbox (DNS spelling), AccessToken its envd token.
	Sandbox     string
	AccessToken string
	Snapshot    string
	// Template is a template A built and published, under TemplateName.
	Template, TemplateName string
	// PendingTemplate and PendingBuild are a build A requested and has
	// not started: the build routes address it.
	PendingTemplate, PendingBuild, PendingName string
	// UploadURL is the signed upload URL the surface handed A for an
	// archive of the pending build.
	UploadURL string
}

// uploadHash is the archive the matrix asks an upload link for.
var uploadHash = strings.Repeat("ab", 32)

// ids are the strings that would show one of A's objects in an answer.
func (o Objects) ids() []string {
	canon, _ := sandbox.CanonicalID(o.Sandbox)
	return []string{o.Sandbox, canon, o.Snapshot, o.Template, o.TemplateName, o.PendingTemplate, o.PendingBuild, o.PendingName}
}

// unknown is Objects with every id replaced by one of the same shape that
// names nothing: what a caller guessing ids would send.
func (o Objects) unknown() Objects {
	return Objects{
		Sandbox: unknownLike(o.Sandbox), Snapshot: unknownLike(o.Snapshot),
		Template: unknownLike(o.Template), TemplateName: "matrix-nobody",
		PendingTemplate: unknownLike(o.PendingTemplate), PendingBuild: unknownLike(o.PendingBuild), PendingName: "matrix-nobody",
	}
}

// unknownLike keeps an id's prefix ("sb-", "ck_") and its length, and
// replaces the rest with characters of the same class, so the id still
// passes any shape check and reaches the lookup.
func unknownLike(id string) string {
	b := []byte(id)
	start := 0
	if i := strings.IndexAny(id, "-_"); i >= 0 && i <= 3 {
		start = i + 1
	}
	for i := start; i < len(b); i++ {
		switch c := b[i]; {
		case c >= 'a' && c <= 'z':
			b[i] = 'a'
		case c >= 'A' && c <= 'Z':
			b[i] = 'A'
		case c >= '0' && c <= '9':
			b[i] = '2'
		}
	}
	return string(b)
}

// Setup makes namespace A's objects through the surface: a sandbox, a
// snapshot of it, a published template, a build requested and not
// started, and an upload link for it.
func Setup(t *testing.T, s Surface) Objects {
	t.Helper()
	var o Objects
	o.Sandbox, o.AccessToken = s.Create(t, s.KeyA)

	var snap struct {
		SnapshotID string `json:"snapshotID"`
	}
	s.must(t, http.MethodPost, "/sandboxes/"+o.Sandbox+"/snapshots", `{"name":"matrix"}`, http.StatusCreated, &snap)
	o.Snapshot = snap.SnapshotID

	type requested struct {
		TemplateID string `json:"templateID"`
		BuildID    string `json:"buildID"`
	}
	var built requested
	o.TemplateName = "matrix-tpl"
	s.must(t, http.MethodPost, "/v3/templates", `{"name":"`+o.TemplateName+`"}`, http.StatusAccepted, &built)
	o.Template = built.TemplateID
	s.must(t, http.MethodPost, "/v2/templates/"+built.TemplateID+"/builds/"+built.BuildID, `{"fromTemplate":"`+s.Base+`","steps":[]}`, http.StatusAccepted, nil)
	poll.Until(t, "the matrix's template build to be ready", func() bool {
		var st struct {
			Status string `json:"status"`
		}
		s.must(t, http.MethodGet, "/templates/"+built.TemplateID+"/builds/"+built.BuildID+"/status", "", http.StatusOK, &st)
		if st.Status == "error" {
			t.Fatalf("the matrix's template build failed")
		}
		return st.Status == "ready"
	})

	var pending requested
	o.PendingName = "matrix-pending"
	s.must(t, http.MethodPost, "/v3/templates", `{"name":"`+o.PendingName+`"}`, http.StatusAccepted, &pending)
	o.PendingTemplate, o.PendingBuild = pending.TemplateID, pending.BuildID

	var link struct {
		URL string `json:"url"`
	}
	s.must(t, http.MethodGet, "/templates/"+o.PendingTemplate+"/files/"+uploadHash, "", http.StatusCreated, &link)
	if !strings.HasPrefix(link.URL, s.URL+"/e2b-files/") {
		t.Fatalf("upload link %q is not on the surface", link.URL)
	}
	o.UploadURL = link.URL
	return o
}

// Create makes a sandbox of Base with key and returns its id (DNS
// spelling) and envd access token.
func (s Surface) Create(t *testing.T, key string) (string, string) {
	t.Helper()
	var sb struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	s.mustAs(t, key, http.MethodPost, "/v2/sandboxes", `{"templateID":"`+s.Base+`","allow_internet_access":false}`, http.StatusCreated, &sb)
	return sb.SandboxID, sb.EnvdAccessToken
}

// must sends a request with A's key and decodes the answer into v.
func (s Surface) must(t *testing.T, method, path, body string, want int, v any) {
	t.Helper()
	s.mustAs(t, s.KeyA, method, path, body, want, v)
}

// mustAs is must with another namespace's key.
func (s Surface) mustAs(t *testing.T, key, method, path, body string, want int, v any) {
	t.Helper()
	a := s.send(t, method, s.URL+path, body, credential{header: "X-API-KEY", value: key})
	if a.status != want {
		t.Fatalf("setup: %s %s = %d %s, want %d", method, path, a.status, a.body, want)
	}
	if v != nil {
		if err := json.Unmarshal(a.body, v); err != nil {
			t.Fatalf("setup: %s %s: decoding %q: %v", method, path, a.body, err)
		}
	}
}

// credential is one header a caller sends, or none.
type credential struct {
	name          string
	header, value string
	// keyB is namespace B's valid key.
	keyB bool
}

func (s Surface) credentials(o Objects) []credential {
	return []credential{
		{name: "no credential"},
		{name: "a wrong key", header: "X-API-KEY", value: "not-a-key-of-anyone"},
		{name: "B's key", header: "X-API-KEY", value: s.KeyB, keyB: true},
		{name: "A's envd access token as X-Access-Token", header: "X-Access-Token", value: o.AccessToken},
		{name: "A's envd access token as X-API-KEY", header: "X-API-KEY", value: o.AccessToken},
		{name: "the node root token as X-API-KEY", header: "X-API-KEY", value: s.RootToken},
		{name: "the node root token as Bearer", header: "Authorization", value: "Bearer " + s.RootToken},
	}
}

type answer struct {
	status int
	body   []byte
}

func (s Surface) send(t *testing.T, method, url, body string, c credential) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.header != "" {
		req.Header.Set(c.header, c.value)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, body: raw}
}

// forB is what namespace B's valid key gets on an instance.
type forB int

const (
	// hidden: 404, the same answer as for ids that name nothing, so B
	// cannot tell A's objects exist.
	hidden forB = iota
	// own: a 2xx about B's own namespace, naming none of A's objects.
	own
	// likeA: the answer A gets; the route names nothing of A's.
	likeA
)

// instance is one concrete request of a route: the pattern with its
// wildcards filled in.
type instance struct {
	// vars fills the pattern's wildcards for a set of objects (A's, or
	// unknown ones for the comparison).
	vars func(o Objects) map[string]string
	// rest follows a subtree pattern ("/", "/e2b-files/").
	rest string
	// method is the method of a pattern that names none (the catch-all).
	method string
	body   func(o Objects) string
	// b is B's rule; wantA is A's status (the positive control).
	b     forB
	wantA int
	// echoes: the 404 quotes an id the body named, so it is compared
	// with the ids masked.
	echoes bool
	// shows is what A's answer must name: a collection that lists A's
	// objects, which makes B's answer without them mean something.
	shows func(o Objects) []string
}

// rule is what the matrix expects of one route.
type rule struct {
	auth string
	// phase orders A's positive control: reads, then changes, then
	// deletes, so no control removes what a later one addresses.
	phase     int
	instances []instance
}

const (
	read = iota
	change
	destroy
)

func lit(s string) func(Objects) string { return func(Objects) string { return s } }

// Wildcard values naming A's objects.
func sandboxVar(o Objects) map[string]string  { return map[string]string{"sandboxID": o.Sandbox} }
func templateVar(o Objects) map[string]string { return map[string]string{"templateID": o.Template} }
func snapshotVar(o Objects) map[string]string { return map[string]string{"templateID": o.Snapshot} }
func aliasVars(o Objects) map[string]string {
	return map[string]string{"first": "aliases", "second": o.TemplateName}
}
func tagsVars(o Objects) map[string]string {
	return map[string]string{"first": o.Template, "second": "tags"}
}
func buildVars(o Objects) map[string]string {
	return map[string]string{"templateID": o.PendingTemplate, "buildID": o.PendingBuild, "hash": uploadHash}
}

// rules is the matrix's rule for every route the surface may serve. A
// route the surface lists without a rule here fails the matrix.
func rules(base string) map[string]rule {
	// keyed is a route of one instance that needs a key.
	keyed := func(phase int, in instance) rule {
		return rule{auth: "key", phase: phase, instances: []instance{in}}
	}
	// named is an instance naming A's objects: hidden from B.
	named := func(vars func(Objects) map[string]string, body string, wantA int) instance {
		in := instance{vars: vars, b: hidden, wantA: wantA}
		if body != "" {
			in.body = lit(body)
		}
		return in
	}
	list := func(shows func(o Objects) []string) rule {
		return keyed(read, instance{b: own, wantA: http.StatusOK, shows: shows})
	}
	// A create names A's snapshot: B cannot branch it, and is told what
	// an unknown snapshot gets.
	create := instance{
		body: func(o Objects) string { return `{"templateID":"` + o.Snapshot + `","allow_internet_access":false}` },
		b:    hidden, echoes: true, wantA: http.StatusCreated,
	}
	showSandbox := func(o Objects) []string { return []string{o.Sandbox} }
	table := map[string]rule{
		"GET /health": {auth: "none", phase: read, instances: []instance{{b: likeA, wantA: http.StatusOK}}},
		"/": {auth: "none", phase: read, instances: []instance{
			{method: http.MethodGet, rest: "no/such/endpoint", b: likeA, wantA: http.StatusNotFound},
			{method: http.MethodPost, rest: "sandboxes/{sandboxID}/no-such-action", vars: sandboxVar, b: likeA, wantA: http.StatusNotFound},
		}},
		// The signature is the upload's only authorization.
		"PUT /e2b-files/": {auth: "signature", phase: change, instances: []instance{{
			rest: "{templateID}/" + uploadHash, vars: buildVars, body: lit("archive"), b: likeA, wantA: http.StatusOK,
		}}},

		"POST /sandboxes":    keyed(change, create),
		"POST /v2/sandboxes": keyed(change, create),
		"GET /sandboxes":     list(showSandbox),
		"GET /v2/sandboxes":  list(showSandbox),
		"GET /snapshots":     list(func(o Objects) []string { return []string{o.Snapshot} }),
		"GET /templates":     list(func(o Objects) []string { return []string{o.Template, o.PendingTemplate} }),

		"GET /sandboxes/{sandboxID}":         keyed(read, named(sandboxVar, "", http.StatusOK)),
		"GET /sandboxes/{sandboxID}/metrics": keyed(read, named(sandboxVar, "", http.StatusOK)),
		// The changes carry bodies that would move A's deadline, so a
		// foreign call that got through would show in the fleet's row.
		"POST /sandboxes/{sandboxID}/timeout":    keyed(change, named(sandboxVar, `{"timeout":900}`, http.StatusNoContent)),
		"POST /sandboxes/{sandboxID}/refreshes":  keyed(change, named(sandboxVar, `{"duration":900}`, http.StatusNoContent)),
		"POST /sandboxes/{sandboxID}/connect":    keyed(change, named(sandboxVar, `{"timeout":1200}`, http.StatusOK)),
		"POST /v2/sandboxes/{sandboxID}/connect": keyed(change, named(sandboxVar, `{"timeout":1200}`, http.StatusOK)),
		"POST /sandboxes/{sandboxID}/snapshots":  keyed(change, named(sandboxVar, `{"name":"matrix-more"}`, http.StatusCreated)),
		"POST /sandboxes/{sandboxID}/pause":      keyed(change, named(sandboxVar, "", http.StatusNoContent)),
		"POST /sandboxes/{sandboxID}/resume":     keyed(change, named(sandboxVar, "", http.StatusCreated)),
		"DELETE /sandboxes/{sandboxID}":          keyed(destroy, named(sandboxVar, "", http.StatusNoContent)),

		"GET /templates/{templateID}": keyed(read, named(templateVar, "", http.StatusOK)),
		// Snapshots are deleted as templates, as in e2b.
		"DELETE /templates/{templateID}": {auth: "key", phase: destroy, instances: []instance{
			named(snapshotVar, "", http.StatusNoContent),
			named(templateVar, "", http.StatusNoContent),
		}},
		"GET /templates/{first}/{second}": {auth: "key", phase: read, instances: []instance{
			named(aliasVars, "", http.StatusOK),
			named(tagsVars, "", http.StatusOK),
		}},
		// A tags its template; B naming it finds nothing in its namespace.
		"POST /templates/tags": keyed(change, instance{
			body: func(o Objects) string { return `{"target":"` + o.TemplateName + `","tags":["matrix-tag"]}` },
			b:    hidden, wantA: http.StatusCreated,
		}),
		// A tag no one assigned: the same 404 for A and B.
		"DELETE /templates/tags": keyed(change, instance{
			body: func(o Objects) string { return `{"name":"` + o.TemplateName + `","tags":["matrix-absent"]}` },
			b:    likeA, wantA: http.StatusNotFound,
		}),
		// B requests a build of its own: it lands in B's namespace.
		"POST /v3/templates": keyed(change, instance{body: lit(`{"name":"matrix-new"}`), b: own, wantA: http.StatusAccepted}),

		"GET /v2/templates": list(func(o Objects) []string { return []string{o.Template, o.PendingTemplate} }),
		// Without sandbox_ids the batch names nothing: 400 for every key.
		"GET /sandboxes/metrics": keyed(read, instance{b: likeA, wantA: http.StatusBadRequest}),
		// A fork of A's sandbox makes one child for A; B is told what an
		// unknown id is told, and forks nothing.
		"POST /sandboxes/{sandboxID}/fork":                    keyed(change, named(sandboxVar, `{"count":1,"timeout":60}`, http.StatusCreated)),
		"GET /templates/{templateID}/builds/{buildID}/logs":   keyed(read, named(buildVars, "", http.StatusOK)),
		"GET /templates/{templateID}/files/{hash}":            keyed(read, named(buildVars, "", http.StatusCreated)),
		"GET /templates/{templateID}/builds/{buildID}/status": keyed(read, named(buildVars, "", http.StatusOK)),
		"POST /v2/templates/{templateID}/builds/{buildID}":    keyed(change, named(buildVars, `{"fromTemplate":"`+base+`","steps":[]}`, http.StatusAccepted)),
	}
	// The operations the surface refuses with their reason answer every
	// key alike, whatever the id: nothing about A's objects shows.
	fixed := func(name string) func(Objects) map[string]string {
		return func(o Objects) map[string]string {
			return map[string]string{name: "x1", "sandboxID": o.Sandbox, "templateID": o.Template}
		}
	}
	refused := func(status int, vars func(Objects) map[string]string) rule {
		return keyed(read, instance{vars: vars, b: likeA, wantA: status})
	}
	for pattern, r := range map[string]rule{
		"PUT /sandboxes/{sandboxID}/network": refused(http.StatusBadRequest, sandboxVar),
		"GET /sandboxes/{sandboxID}/logs":    refused(http.StatusNotImplemented, sandboxVar),
		"GET /v2/sandboxes/{sandboxID}/logs": refused(http.StatusNotImplemented, sandboxVar),
		"GET /secrets":                       refused(http.StatusNotImplemented, nil),
		"POST /secrets":                      refused(http.StatusNotImplemented, nil),
		"GET /secrets/{secretID}":            refused(http.StatusNotImplemented, fixed("secretID")),
		"POST /secrets/{secretID}":           refused(http.StatusNotImplemented, fixed("secretID")),
		"DELETE /secrets/{secretID}":         refused(http.StatusNotImplemented, fixed("secretID")),
		"GET /teams":                         refused(http.StatusNotImplemented, nil),
		"GET /teams/{teamID}/metrics":        refused(http.StatusNotImplemented, fixed("teamID")),
		"GET /teams/{teamID}/metrics/max":    refused(http.StatusNotImplemented, fixed("teamID")),
		// The catalog is the node operator's: the same for every key.
		"GET /volumes":                     keyed(read, instance{b: likeA, wantA: http.StatusOK}),
		"POST /volumes":                    refused(http.StatusBadRequest, nil),
		"GET /volumes/{volumeID}":          refused(http.StatusNotImplemented, fixed("volumeID")),
		"DELETE /volumes/{volumeID}":       refused(http.StatusBadRequest, fixed("volumeID")),
		"PATCH /templates/{templateID}":    keyed(change, named(templateVar, `{"public":false}`, http.StatusOK)),
		"PATCH /v2/templates/{templateID}": keyed(change, named(templateVar, `{"public":false}`, http.StatusOK)),
	} {
		table[pattern] = r
	}
	return table
}

// request is the method and path of an instance of pattern for objects
// o: the pattern's path with every wildcard filled in.
func request(t *testing.T, pattern string, in instance, o Objects) (string, string) {
	t.Helper()
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = in.method, pattern
	}
	path += in.rest
	var vars map[string]string
	if in.vars != nil {
		vars = in.vars(o)
	}
	for name, v := range vars {
		path = strings.ReplaceAll(path, "{"+name+"}", v)
	}
	if strings.ContainsAny(path, "{}") || method == "" {
		t.Fatalf("the matrix's instance of %q leaves %s %q unfilled", pattern, method, path)
	}
	return method, path
}

// order is A's positive control order within a phase: the state changes
// need their sandbox in a given state (resume after pause), the rest are
// in pattern order.
var order = map[string]int{
	"POST /sandboxes/{sandboxID}/pause":  1,
	"POST /sandboxes/{sandboxID}/resume": 2,
}

// Counts are the matrix's totals.
type Counts struct {
	Routes, Instances, Credentials int
	// Cells are requests whose answer was checked: every instance with
	// every foreign credential, plus A's positive control.
	Cells, Foreign, Control int
	// Compared is how many of B's 404s were compared with the answer for
	// unknown ids.
	Compared int
	// Unexpected counts cells (and routes) that broke their rule.
	Unexpected int
}

// Run drives the matrix: every instance of every listed route with every
// foreign credential, then a check that A's sandbox is as it was, then A's
// own key on every instance as the positive control.
func Run(t *testing.T, s Surface, o Objects) Counts {
	t.Helper()
	table := rules(s.Base)
	creds := s.credentials(o)
	n := Counts{Routes: len(s.Routes), Credentials: len(creds)}
	fail := func(format string, args ...any) {
		t.Helper()
		n.Unexpected++
		t.Errorf(format, args...)
	}
	listed := map[string]bool{}
	for _, p := range s.Routes {
		listed[p] = true
		r, ok := table[p]
		if !ok {
			fail("unexpected route %q: the auth matrix has no rule for it; add one", p)
			continue
		}
		if d, ok := s.Declared[p]; s.Declared != nil && (!ok || d != r.auth) {
			fail("route %q declares auth %q, the matrix expects %q", p, d, r.auth)
		}
	}
	for p := range table {
		if !listed[p] {
			fail("the matrix has a rule for %q, which the surface does not list", p)
		}
	}
	before := fleetRow(t, s, o.Sandbox)
	unknown := o.unknown()

	for _, p := range s.Routes {
		r, ok := table[p]
		if !ok {
			continue
		}
		for _, in := range r.instances {
			n.Instances++
			method, path := request(t, p, in, o)
			body := bodyOf(in, o)
			var none answer
			for i, c := range creds {
				n.Foreign++
				a := s.send(t, method, s.URL+path, body, c)
				cell := method + " " + path + " with " + c.name
				if i == 0 {
					none = a
				}
				switch {
				case r.auth == "signature":
					// The URL's signature is the only authorization:
					// without one, no header opens it.
					if a.status != http.StatusForbidden {
						fail("%s = %d %s, want 403 (no signature)", cell, a.status, a.body)
					}
				case r.auth == "none":
					if a.status != in.wantA || !bytes.Equal(a.body, none.body) {
						fail("%s = %d %s, want %d, the answer without a credential", cell, a.status, a.body, in.wantA)
					}
				case !c.keyB:
					if a.status != http.StatusUnauthorized || !isError(a, http.StatusUnauthorized) || !bytes.Equal(a.body, none.body) {
						fail("%s = %d %s, want 401 as without a credential", cell, a.status, a.body)
					}
				case in.b == likeA:
					if a.status != in.wantA {
						fail("%s = %d %s, want %d as for A", cell, a.status, a.body, in.wantA)
					}
				case in.b == own:
					if a.status/100 != 2 {
						fail("%s = %d %s, want 2xx in B's own namespace", cell, a.status, a.body)
					}
					for _, id := range o.ids() {
						if id != "" && bytes.Contains(a.body, []byte(id)) {
							fail("%s names A's object %q: %s", cell, id, a.body)
						}
					}
				case in.b == hidden:
					n.Compared++
					_, upath := request(t, p, in, unknown)
					u := s.send(t, method, s.URL+upath, bodyOf(in, unknown), c)
					same := bytes.Equal(a.body, u.body)
					if in.echoes {
						same = mask(a.body, o) == mask(u.body, unknown)
					}
					if a.status != http.StatusNotFound || u.status != http.StatusNotFound || !isError(a, http.StatusNotFound) || !same {
						fail("%s = %d %s; for unknown ids %d %s: want the same 404", cell, a.status, a.body, u.status, u.body)
					}
				}
			}
		}
	}

	// Nothing a foreign credential sent reached A's sandbox.
	after := fleetRow(t, s, o.Sandbox)
	if after.Hibernated || !after.Deadline.Equal(before.Deadline) {
		fail("A's sandbox changed under foreign credentials: paused %v, deadline %v → %v", after.Hibernated, before.Deadline, after.Deadline)
	}

	n.Control = s.control(t, table, o, fail)
	n.Cells = n.Foreign + n.Control
	return n
}

// control is A's own key on every instance, in phase order.
func (s Surface) control(t *testing.T, table map[string]rule, o Objects, fail func(string, ...any)) int {
	t.Helper()
	patterns := slices.Clone(s.Routes)
	slices.SortStableFunc(patterns, func(a, b string) int {
		if d := table[a].phase - table[b].phase; d != 0 {
			return d
		}
		return order[a] - order[b]
	})
	keyA := credential{name: "A's key", header: "X-API-KEY", value: s.KeyA}
	cells := 0
	for _, p := range patterns {
		r, ok := table[p]
		if !ok {
			continue
		}
		for _, in := range r.instances {
			cells++
			method, path := request(t, p, in, o)
			url := s.URL + path
			c := keyA
			if r.auth == "signature" {
				// The signed URL is the upload's only credential: A's
				// key does not open the URL without it, the signature
				// opens it without the key.
				cells++
				if a := s.send(t, method, url, bodyOf(in, o), keyA); a.status != http.StatusForbidden {
					fail("%s %s with A's key and no signature = %d %s, want 403", method, url, a.status, a.body)
				}
				url, c = o.UploadURL, credential{name: "the signed URL"}
			}
			a := s.send(t, method, url, bodyOf(in, o), c)
			if a.status != in.wantA {
				fail("%s %s with %s = %d %s, want %d", method, url, c.name, a.status, a.body, in.wantA)
				continue
			}
			if in.shows != nil {
				for _, id := range in.shows(o) {
					if !bytes.Contains(a.body, []byte(id)) {
						fail("%s %s with A's key does not list A's %q: %s", method, url, id, a.body)
					}
				}
			}
		}
	}
	return cells
}

func bodyOf(in instance, o Objects) string {
	if in.body == nil {
		return ""
	}
	return in.body(o)
}

// isError reports whether the answer is e2b's error body for status.
func isError(a answer, status int) bool {
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	return json.Unmarshal(a.body, &e) == nil && e.Code == status && e.Message != ""
}

// mask replaces the ids of o in an answer with one placeholder, so two
// answers that differ only in the id they quote compare equal.
func mask(body []byte, o Objects) string {
	out := string(body)
	for _, id := range o.ids() {
		if id != "" {
			out = strings.ReplaceAll(out, id, "<id>")
		}
	}
	return out
}

// ClaimToken is the claim token of a sandbox, read from the fleet with
// the root token: a credential the data plane's matrix sends, which the
// surface itself never hands out.
func (s Surface) ClaimToken(t *testing.T, id string) string {
	t.Helper()
	return fleetRow(t, s, id).Token
}

// fleetRow reads a sandbox from whichever node holds it, with the root
// token: the fleet's own record, not the surface's view of it.
func fleetRow(t *testing.T, s Surface, id string) sandboxd.Sandbox {
	t.Helper()
	canon, ok := sandbox.CanonicalID(id)
	if !ok {
		t.Fatalf("%q is not a sandbox id", id)
	}
	for _, addr := range s.NodeAddrs {
		cl, err := sandboxd.New(addr, sandboxd.WithToken(s.RootToken))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		row, err := cl.Sandbox(ctx, canon)
		cancel()
		if err == nil {
			return *row
		}
	}
	t.Fatalf("sandbox %s is on no node", id)
	return sandboxd.Sandbox{}
}
