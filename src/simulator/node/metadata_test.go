package node_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// oddValue holds what a query string must escape ('=', '&', a space, a
// slash, a non-ASCII letter).
const oddValue = "a=b&c d/é"

// jsonSize is how many bytes m takes as compact JSON with only the escapes
// JSON requires (no test value holds '<', '>' or '&' here, which
// encoding/json would escape for HTML).
func jsonSize(t testing.TB, m map[string]string) int {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	return buf.Len() - 1 // Encode ends with a newline
}

// sizedMetadata builds labels in as few pairs as fit whose compact JSON is
// exactly total bytes, the values made of unit (a quote or a backslash
// takes two bytes encoded) with a 'v' where one byte is left over.
func sizedMetadata(t testing.TB, total int, unit byte) map[string]string {
	t.Helper()
	cost := 1
	if unit == '"' || unit == '\\' {
		cost = 2
	}
	for pairs := 1; pairs <= sandboxd.MaxMetadataPairs; pairs++ {
		budget := total - 2 - (pairs - 1) - pairs*len(`"k00":""`) // for the values, encoded
		if (budget+pairs-1)/pairs > sandboxd.MaxMetadataValueBytes*cost {
			continue
		}
		m := make(map[string]string, pairs)
		for i := range pairs {
			enc := budget / pairs
			if i < budget%pairs {
				enc++
			}
			m[fmt.Sprintf("k%02d", i)] = strings.Repeat(string(unit), enc/cost) + strings.Repeat("v", enc%cost)
		}
		if got := jsonSize(t, m); got != total {
			t.Fatalf("sizedMetadata(%d, %q) is %d bytes", total, unit, got)
		}
		return m
	}
	t.Fatalf("no metadata of %d bytes", total)
	return nil
}

// unescapedSize is what m would take as JSON if nothing needed escaping.
func unescapedSize(m map[string]string) int {
	n := 2 + len(m) - 1
	for k, v := range m {
		n += len(k) + len(v) + len(`"":""`)
	}
	return n
}

func pairsOf(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("key-%02d", i)] = "v"
	}
	return m
}

func rowIDs(rows []sandboxd.Sandbox) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return out
}

func claimIDs(claims ...*sandboxd.Claim) []string {
	out := make([]string, 0, len(claims))
	for _, c := range claims {
		out = append(out, c.ID)
	}
	slices.Sort(out)
	return out
}

// rowMetadata reads one sandbox's labels from its per-id row.
func rowMetadata(t testing.TB, c *sandboxd.Client, id string) map[string]string {
	t.Helper()
	row, err := c.Sandbox(ctxT(t), id)
	if err != nil {
		t.Fatalf("row of %s: %v", id, err)
	}
	return row.Metadata
}

// A claim's metadata comes back on its index and per-id rows, an empty
// map is left out of both, and ?metadata= keeps the claims holding every
// pair, alone or with ?claim_ref=.
func TestClaimMetadataEchoedAndFiltered(t *testing.T) {
	cfg := testConfig()
	cfg.Pools = []sandboxd.PoolSpec{{Template: tmpl, Warm: 6}}
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	claim := func(ref string, md map[string]string) *sandboxd.Claim {
		t.Helper()
		cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, ClaimRef: ref, Metadata: md})
		if err != nil {
			t.Fatalf("claim %s: %v", ref, err)
		}
		return cl
	}
	gold := map[string]string{"team": "a", "tier": "gold"}
	odd := map[string]string{"team": "", "q": oddValue}
	a := claim("ns/a", gold)
	b := claim("ns/b", map[string]string{"team": "a"})
	c := claim("ns/c", nil)
	d := claim("ns/d", map[string]string{})
	e := claim("ns/e", odd)

	if md := rowMetadata(t, root, a.ID); !maps.Equal(md, gold) {
		t.Fatalf("per-id row of a: metadata %v, want %v", md, gold)
	}
	if md := rowMetadata(t, root, e.ID); !maps.Equal(md, odd) {
		t.Fatalf("per-id row of e: metadata %q, want %q", md, odd)
	}
	all, err := root.Sandboxes(ctx, "")
	if err != nil || len(all) != 5 {
		t.Fatalf("index = %+v, %v", all, err)
	}
	for _, r := range all {
		want := map[string]map[string]string{a.ID: gold, b.ID: {"team": "a"}, e.ID: odd}[r.ID]
		if !maps.Equal(r.Metadata, want) {
			t.Errorf("index row %s: metadata %q, want %q", r.ClaimRef, r.Metadata, want)
		}
	}
	// No labels, no key: on the per-id read and in the index.
	api := "http://" + n.Addr()
	for _, path := range []string{"/v1/sandboxes/" + c.ID, "/v1/sandboxes/" + d.ID, "/v1/sandboxes?claim_ref=ns/c", "/v1/sandboxes?claim_ref=ns/d"} {
		code, body := rawDo(t, http.MethodGet, api+path, rootToken, nil, nil)
		if code != http.StatusOK || strings.Contains(body, "metadata") || !strings.Contains(body, `"id"`) {
			t.Errorf("GET %s without labels: %d %s", path, code, body)
		}
	}
	if _, body := rawDo(t, http.MethodGet, api+"/v1/sandboxes/"+a.ID, rootToken, nil, nil); !strings.Contains(body, `"metadata":{"team":"a","tier":"gold"}`) {
		t.Errorf("per-id row of a on the wire: %s", body)
	}

	for name, tc := range map[string]struct {
		ref  string
		md   map[string]string
		want []string
	}{
		"one pair":            {"", map[string]string{"team": "a"}, claimIDs(a, b)},
		"two pairs (AND)":     {"", map[string]string{"team": "a", "tier": "gold"}, claimIDs(a)},
		"with claim_ref":      {"ns/b", map[string]string{"team": "a"}, claimIDs(b)},
		"claim_ref elsewhere": {"ns/c", map[string]string{"team": "a"}, claimIDs()},
		"no match":            {"", map[string]string{"team": "z"}, claimIDs()},
		"one pair missing":    {"", map[string]string{"team": "a", "region": "eu"}, claimIDs()},
		"empty value":         {"", map[string]string{"team": ""}, claimIDs(e)},
		"escaped value":       {"", map[string]string{"q": oddValue}, claimIDs(e)},
		"prefix of the value": {"", map[string]string{"q": "a"}, claimIDs()},
		"no filter":           {"", nil, claimIDs(a, b, c, d, e)},
	} {
		rows, err := root.SandboxesMatching(ctx, tc.ref, tc.md)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := rowIDs(rows); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}

	// A tenant's filter reaches only its own claims.
	tenant := client(t, n, tenantA)
	mine, err := tenant.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Metadata: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := tenant.SandboxesMatching(ctx, "", map[string]string{"team": "a"}); err != nil || !slices.Equal(rowIDs(rows), claimIDs(mine)) {
		t.Fatalf("tenant filter = %+v, %v", rows, err)
	}

	_, err = root.SandboxesMatching(ctx, "", map[string]string{"": "a"})
	wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
	for name, q := range map[string]string{
		"pair without =":          "metadata=team",
		"empty pair":              "metadata=",
		"empty key":               "metadata=%3Da",
		"repeated key":            "metadata=team%3Da&metadata=team%3Db",
		"repeated, same value":    "claim_ref=ns%2Fa&metadata=team%3Da&metadata=team%3Da",
		"one bad among good ones": "metadata=team%3Da&metadata=tier",
	} {
		code, body := rawDo(t, http.MethodGet, api+"/v1/sandboxes?"+q, rootToken, nil, nil)
		if code != http.StatusBadRequest || !strings.Contains(body, "metadata filter") {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
	if code, _ := rawDo(t, http.MethodGet, api+"/v1/sandboxes?metadata=team", "", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("an unauthenticated filter: %d, want 401 first", code)
	}
	// The value is everything after the first '='.
	code, body := rawDo(t, http.MethodGet, api+"/v1/sandboxes?metadata="+url.QueryEscape("q="+oddValue), rootToken, nil, nil)
	if code != http.StatusOK || !strings.Contains(body, e.ID) || strings.Contains(body, a.ID) {
		t.Errorf("filter on a value holding '=': %d %s", code, body)
	}
}

// Every bound answers 400 naming it and records nothing; the exact edges
// are claims like any other.
func TestClaimMetadataBounds(t *testing.T) {
	cfg := testConfig()
	cfg.Pools = []sandboxd.PoolSpec{{Template: tmpl, Warm: 8}}
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)

	quotes := sizedMetadata(t, sandboxd.MaxMetadataJSONBytes+1, '"')
	backslashes := sizedMetadata(t, sandboxd.MaxMetadataJSONBytes+1, '\\')
	for _, m := range []map[string]string{quotes, backslashes} {
		if unescapedSize(m) > sandboxd.MaxMetadataJSONBytes {
			t.Fatalf("the escaping case must fit unescaped: %d bytes", unescapedSize(m))
		}
	}
	for name, tc := range map[string]struct {
		md    map[string]string
		bound string
	}{
		"17 pairs":            {pairsOf(17), "at most 16"},
		"129-byte key":        {map[string]string{strings.Repeat("k", 129): "v"}, "at most 128"},
		"empty key":           {map[string]string{"": "v"}, "empty key"},
		"key with =":          {map[string]string{"a=b": "v"}, `'='`},
		"key with &":          {map[string]string{"a&b": "v"}, `'&'`},
		"key with a tab":      {map[string]string{"a\tb": "v"}, "printable ASCII"},
		"key with DEL":        {map[string]string{"a\x7fb": "v"}, "printable ASCII"},
		"non-ASCII key":       {map[string]string{"é": "v"}, "printable ASCII"},
		"513-byte value":      {map[string]string{"k": strings.Repeat("v", 513)}, "at most 512"},
		"newline in a value":  {map[string]string{"k": "a\nb"}, "control character"},
		"NUL in a value":      {map[string]string{"k": "a\x00b"}, "control character"},
		"C1 control in value": {map[string]string{"k": "a\u0085b"}, "control character"},
		"4097 bytes of JSON":  {sizedMetadata(t, sandboxd.MaxMetadataJSONBytes+1, 'v'), "at most 4096"},
		"escaped quotes":      {quotes, "at most 4096"},
		"escaped backslashes": {backslashes, "at most 4096"},
	} {
		_, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Metadata: tc.md})
		wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
		if !strings.Contains(err.Error(), tc.bound) {
			t.Errorf("%s: %v does not name the bound (%s)", name, err, tc.bound)
		}
	}

	// encoding/json would send invalid UTF-8 as U+FFFD, so these go raw.
	url := "http://" + n.Addr() + "/v1/claim"
	for name, body := range map[string]string{
		"invalid UTF-8":        `{"template":"` + tmpl + `","metadata":{"k":"a` + "\xff" + `b"}}`,
		"truncated sequence":   `{"template":"` + tmpl + `","metadata":{"k":"` + "\xe2\x82" + `"}}`,
		"lone high surrogate":  `{"template":"` + tmpl + `","metadata":{"k":"a\ud800b"}}`,
		"lone low surrogate":   `{"template":"` + tmpl + `","metadata":{"k":"\udc00"}}`,
		"reversed surrogates":  `{"template":"` + tmpl + `","metadata":{"k":"\ude00\ud83d"}}`,
		"invalid UTF-8 in key": `{"template":"` + tmpl + `","metadata":{"` + "\xff" + `":"v"}}`,
		"escaped control":      `{"template":"` + tmpl + `","metadata":{"k":"a\u0007"}}`,
		"not a string":         `{"template":"` + tmpl + `","metadata":{"k":1}}`,
		"null value":           `{"template":"` + tmpl + `","metadata":{"k":null}}`,
		"not an object":        `{"template":"` + tmpl + `","metadata":["k","v"]}`,
	} {
		code, out := rawDo(t, http.MethodPost, url, rootToken, []byte(body), nil)
		if code != http.StatusBadRequest || !strings.Contains(out, "metadata") {
			t.Errorf("%s: %d %s", name, code, out)
		}
	}
	if rows, _ := root.Sandboxes(ctx, ""); len(rows) != 0 {
		t.Fatalf("refused claims left rows: %+v", rows)
	}

	edges := map[string]map[string]string{
		"16 pairs":                 pairsOf(16),
		"128-byte key":             {strings.Repeat("k", 128): "v"},
		"every printable key byte": {" !\"#$%'()*+,-./09:;<>?@AZ[\\]^_`az{|}~": "v"},
		"512-byte value":           {"k": strings.Repeat("é", 256)},
		"empty value":              {"k": ""},
		"4096 bytes of JSON":       sizedMetadata(t, sandboxd.MaxMetadataJSONBytes, 'v'),
		"4096 bytes, quotes":       sizedMetadata(t, sandboxd.MaxMetadataJSONBytes, '"'),
		"emoji and a joiner":       {"k": "👩\u200d💻 ok"},
	}
	for name, md := range edges {
		cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Metadata: md})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := rowMetadata(t, root, cl.ID); !maps.Equal(got, md) {
			t.Errorf("%s: row carries %q", name, got)
		}
	}
	// A surrogate pair escapes one character, which is fine.
	code, out := rawDo(t, http.MethodPost, url, rootToken, []byte(`{"template":"`+tmpl+`","metadata":{"k":"\ud83d\ude00"}}`), nil)
	var cl sandboxd.ClaimResponse
	if code != http.StatusOK || json.Unmarshal([]byte(out), &cl) != nil || rowMetadata(t, root, cl.ID)["k"] != "😀" {
		t.Fatalf("escaped surrogate pair: %d %s", code, out)
	}
}

// A checkpoint claim takes metadata under the same rules, and the branch
// carries the request's labels, never the source sandbox's.
func TestCheckpointClaimMetadata(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	src, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Metadata: map[string]string{"team": "src", "only": "src"}})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := root.Checkpoint(ctx, src.ID, sandboxd.CheckpointRequest{Token: src.Token})
	if err != nil {
		t.Fatal(err)
	}

	labels := map[string]string{"team": "branch"}
	br, err := root.ClaimCheckpoint(ctx, ck.ID, sandboxd.CheckpointClaimRequest{ClaimRef: "ns/br", Metadata: labels})
	if err != nil {
		t.Fatal(err)
	}
	if got := rowMetadata(t, root, br.ID); !maps.Equal(got, labels) || br.FromCheckpoint != ck.ID {
		t.Fatalf("branch metadata %v (from %s), want %v", got, br.FromCheckpoint, labels)
	}
	bare, err := root.ClaimCheckpoint(ctx, ck.ID, sandboxd.CheckpointClaimRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := rowMetadata(t, root, bare.ID); got != nil {
		t.Fatalf("a branch claimed without metadata carries %v", got)
	}
	if rows, _ := root.SandboxesMatching(ctx, "", map[string]string{"team": "branch"}); !slices.Equal(rowIDs(rows), claimIDs(br)) {
		t.Fatalf("filter for the branch's label = %+v", rows)
	}
	if rows, _ := root.SandboxesMatching(ctx, "", map[string]string{"only": "src"}); !slices.Equal(rowIDs(rows), claimIDs(src)) {
		t.Fatalf("the source's labels stay the source's: %+v", rows)
	}

	_, err = root.ClaimCheckpoint(ctx, ck.ID, sandboxd.CheckpointClaimRequest{Metadata: pairsOf(17)})
	wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
	code, out := rawDo(t, http.MethodPost, "http://"+n.Addr()+"/v1/checkpoints/"+ck.ID+"/claim", rootToken, []byte(`{"metadata":{"k":"`+"\xff"+`"}}`), nil)
	if code != http.StatusBadRequest || !strings.Contains(out, "UTF-8") {
		t.Fatalf("invalid UTF-8 in a checkpoint claim: %d %s", code, out)
	}
	if c := n.Counters(); c.CheckpointClaims != 2 {
		t.Fatalf("refused checkpoint claims must branch nothing: %+v", c)
	}
}

// A claim of a promoted template is a claim like any other: the clone
// carries the claim's labels, not those of the sandbox promoted.
func TestTemplateCloneTakesTheClaimsMetadata(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	src, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Metadata: map[string]string{"team": "src"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := root.Promote(ctx, src.ID, sandboxd.PromoteRequest{Template: promotedName})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"team": "clone", "build": "42"}
	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: promotedName, Metadata: labels})
	if err != nil || cl.TemplateDigest != res.ContentDigest {
		t.Fatalf("template claim: %+v %v", cl, err)
	}
	if got := rowMetadata(t, root, cl.ID); !maps.Equal(got, labels) {
		t.Fatalf("clone metadata %v, want %v", got, labels)
	}
	_, err = root.Claim(ctx, sandboxd.ClaimRequest{Template: promotedName, Metadata: map[string]string{"a&b": "v"}})
	wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
	if c := n.Counters(); c.TemplateClaims != 1 {
		t.Fatalf("the refused template claim cloned: %+v", c)
	}
}

// Fork children inherit their parent's labels, as sandboxd's current fork
// does (children inherit metadata, not env).
func TestForkChildrenInheritMetadata(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	parent, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Metadata: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	kids, err := root.Fork(ctx, parent.ID, sandboxd.ForkRequest{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := rowMetadata(t, root, kids[0].ID); !maps.Equal(got, map[string]string{"team": "a"}) {
		t.Fatalf("fork child carries %v, want the parent's labels", got)
	}
	if got := rowMetadata(t, root, parent.ID); !maps.Equal(got, map[string]string{"team": "a"}) {
		t.Fatalf("the parent lost its labels: %v", got)
	}
}

// A redirected claim keeps its labels on the retry, and so does a
// redirected checkpoint claim; a body the entry refuses is never
// redirected.
func TestRedirectedClaimKeepsItsMetadata(t *testing.T) {
	peerCfg := testConfig()
	peerCfg.Name = "peer-node"
	peerCfg.Pools = append(peerCfg.Pools, sandboxd.PoolSpec{Template: "other:1", Warm: 1})
	peer := startNode(t, peerCfg)
	cfg := testConfig()
	cfg.Mesh = staticMesh{peer}
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	atPeer := client(t, peer, rootToken)

	_, err := root.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: "other:1", Metadata: pairsOf(17)})
	wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
	labels := map[string]string{"team": "a", "q": oddValue}
	raw, err := root.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: "other:1", Metadata: labels})
	if err != nil || !raw.IsRedirect() {
		t.Fatalf("want a redirect to the warm peer: %+v %v", raw, err)
	}
	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: "other:1", ClaimRef: "ns/r", Metadata: labels})
	if err != nil || cl.OwnerAddr != peer.Addr() {
		t.Fatalf("followed claim: %+v %v", cl, err)
	}
	if rows, err := atPeer.SandboxesMatching(ctx, "ns/r", labels); err != nil || !slices.Equal(rowIDs(rows), claimIDs(cl)) || !maps.Equal(rows[0].Metadata, labels) {
		t.Fatalf("the peer's row: %+v %v", rows, err)
	}

	src, _ := atPeer.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	ck, err := atPeer.Checkpoint(ctx, src.ID, sandboxd.CheckpointRequest{Token: src.Token})
	if err != nil {
		t.Fatal(err)
	}
	br, err := root.ClaimCheckpoint(ctx, ck.ID, sandboxd.CheckpointClaimRequest{Metadata: labels})
	if err != nil || br.OwnerAddr != peer.Addr() {
		t.Fatalf("followed checkpoint claim: %+v %v", br, err)
	}
	if got := rowMetadata(t, atPeer, br.ID); !maps.Equal(got, labels) {
		t.Fatalf("the redirected branch carries %v, want %v", got, labels)
	}
}
