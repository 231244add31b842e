package sandboxd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// labels is n pairs k00, k01, … all holding value.
func labels(n int, value string) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("k%02d", i)] = value
	}
	return m
}

// with returns a copy of m with k set to v.
func with(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	out[k] = v
	return out
}

// encodedSize is m as compact JSON with only the escapes JSON requires.
func encodedSize(t *testing.T, m map[string]string) int {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	return b.Len() - 1 // Encode ends with a newline
}

func TestValidateMetadata(t *testing.T) {
	// Eight pairs "kNN":"…" take 2 + 7 + 8*8 = 73 bytes of JSON around
	// their values, four pairs 2 + 3 + 4*8 = 37.
	plain4096 := with(labels(8, strings.Repeat("v", 503)), "k07", strings.Repeat("v", 502))
	plain4097 := labels(8, strings.Repeat("v", 503)) // 73 + 8*503 = 4097
	// 507 quotes and a 'v' encode to 1015 bytes but are 508 bytes raw: the
	// map fits 4096 bytes unescaped (2069) and breaks it only escaped.
	quoted := func(unit string) map[string]string { return labels(4, strings.Repeat(unit, 507)+"v") }
	quoted4096 := func(unit string) map[string]string {
		return with(quoted(unit), "k03", strings.Repeat(unit, 507)) // 37 + 3*1015 + 1014
	}
	for name, tc := range map[string]struct {
		m    map[string]string
		size int // the JSON size the case is built to have, when it matters
		want string
	}{
		"nil":                     {m: nil},
		"empty":                   {m: map[string]string{}},
		"16 pairs":                {m: labels(16, "v")},
		"17 pairs":                {m: labels(17, "v"), want: "17 pairs, at most 16"},
		"128-byte key":            {m: map[string]string{strings.Repeat("k", 128): "v"}},
		"129-byte key":            {m: map[string]string{strings.Repeat("k", 129): "v"}, want: "129 bytes, at most 128"},
		"empty key":               {m: map[string]string{"": "v"}, want: "empty key"},
		"key with =":              {m: map[string]string{"a=b": "v"}, want: `'='`},
		"key with &":              {m: map[string]string{"a&b": "v"}, want: `'&'`},
		"key with NUL":            {m: map[string]string{"a\x00": "v"}, want: "0x00 is not printable ASCII"},
		"key with a newline":      {m: map[string]string{"a\n": "v"}, want: "0x0a is not printable ASCII"},
		"key with DEL":            {m: map[string]string{"a\x7f": "v"}, want: "0x7f is not printable ASCII"},
		"non-ASCII key":           {m: map[string]string{"ké": "v"}, want: "0xc3 is not printable ASCII"},
		"invalid UTF-8 key":       {m: map[string]string{"k\xff": "v"}, want: "0xff is not printable ASCII"},
		"printable ASCII key":     {m: map[string]string{" !\"#$%'()*+,-./09:;<>?@AZ[\\]^_`az{|}~": "v"}},
		"empty value":             {m: map[string]string{"k": ""}},
		"512-byte value":          {m: map[string]string{"k": strings.Repeat("v", 512)}},
		"512 bytes, 128 runes":    {m: map[string]string{"k": strings.Repeat("😀", 128)}},
		"513-byte value":          {m: map[string]string{"k": strings.Repeat("v", 513)}, want: "513 bytes, at most 512"},
		"513 bytes of runes":      {m: map[string]string{"k": strings.Repeat("é", 256) + "v"}, want: "at most 512"},
		"tab in a value":          {m: map[string]string{"k": "a\tb"}, want: "control character U+0009"},
		"DEL in a value":          {m: map[string]string{"k": "a\x7f"}, want: "control character U+007F"},
		"C1 in a value":           {m: map[string]string{"k": "a\u009b"}, want: "control character U+009B"},
		"invalid UTF-8 value":     {m: map[string]string{"k": "a\xffb"}, want: "not valid UTF-8"},
		"truncated sequence":      {m: map[string]string{"k": "\xe2\x82"}, want: "not valid UTF-8"},
		"encoded surrogate":       {m: map[string]string{"k": "\xed\xa0\x80"}, want: "not valid UTF-8"},
		"joiner and NBSP":         {m: map[string]string{"k": "👩\u200d💻\u00a0ok"}},
		"4096 bytes":              {m: plain4096, size: 4096},
		"4097 bytes":              {m: plain4097, size: 4097, want: "4097 bytes as JSON, at most 4096"},
		"4096 bytes, quotes":      {m: quoted4096(`"`), size: 4096},
		"4097 bytes, quotes":      {m: quoted(`"`), size: 4097, want: "4097 bytes as JSON, at most 4096"},
		"4097 bytes, backslashes": {m: quoted(`\`), size: 4097, want: "4097 bytes as JSON, at most 4096"},
		"4096 bytes, backslashes": {m: quoted4096(`\`), size: 4096},
	} {
		if tc.size != 0 && encodedSize(t, tc.m) != tc.size {
			t.Fatalf("%s: built %d bytes of JSON, want %d", name, encodedSize(t, tc.m), tc.size)
		}
		err := sandboxd.ValidateMetadata(tc.m)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error naming %q", name, err, tc.want)
		}
	}

	// The escaping case is refused for its escapes alone.
	raw := 2 + 3
	for k, v := range quoted(`"`) {
		raw += len(k) + len(v) + len(`"":""`)
	}
	if raw > sandboxd.MaxMetadataJSONBytes {
		t.Fatalf("the quoted map is %d bytes unescaped, so it does not isolate escaping", raw)
	}
	// A map breaking several rules reports the same one every time.
	bad := map[string]string{"a=": "v", "b&": "v", "c\x01": "v", "d": strings.Repeat("v", 600)}
	first := sandboxd.ValidateMetadata(bad)
	for range 20 {
		if err := sandboxd.ValidateMetadata(bad); err == nil || err.Error() != first.Error() {
			t.Fatalf("unstable error: %v then %v", first, err)
		}
	}
}

func TestMetadataOnTheWire(t *testing.T) {
	for name, tc := range map[string]struct {
		v    any
		want string
	}{
		"claim with labels":        {sandboxd.ClaimRequest{Template: "t", Metadata: map[string]string{"team": "a"}}, `{"template":"t","metadata":{"team":"a"}}`},
		"claim without":            {sandboxd.ClaimRequest{Template: "t", Metadata: map[string]string{}}, `{"template":"t"}`},
		"checkpoint claim":         {sandboxd.CheckpointClaimRequest{Metadata: map[string]string{"team": "a"}}, `{"metadata":{"team":"a"}}`},
		"checkpoint claim without": {sandboxd.CheckpointClaimRequest{}, `{}`},
	} {
		raw, err := json.Marshal(tc.v)
		if err != nil || string(raw) != tc.want {
			t.Errorf("%s: %s %v, want %s", name, raw, err, tc.want)
		}
	}
	if raw, _ := json.Marshal(sandboxd.Sandbox{ID: "sb_1"}); strings.Contains(string(raw), "metadata") {
		t.Errorf("a row without labels: %s", raw)
	}
	var row sandboxd.Sandbox
	if err := json.Unmarshal([]byte(`{"id":"sb_1","metadata":{"team":"a"}}`), &row); err != nil || row.Metadata["team"] != "a" {
		t.Fatalf("index row: %+v %v", row, err)
	}
}

// SandboxesMatching spells each pair metadata=key=value, escaped, in key
// order, after claim_ref; Sandboxes is the same call without pairs.
func TestSandboxesMatchingQuery(t *testing.T) {
	var mu sync.Mutex
	var raw []string
	var metadata [][]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		raw = append(raw, r.URL.RawQuery)
		metadata = append(metadata, r.URL.Query()["metadata"])
		mu.Unlock()
		_, _ = io.WriteString(w, `{"sandboxes":[{"id":"sb_1","metadata":{"team":"a"}}]}`)
	}))
	defer srv.Close()
	c, _ := sandboxd.New(srv.URL, sandboxd.WithToken("tok"))
	ctx := ctxT(t)

	filter := map[string]string{"z": "1", "a": "x=y&z w/é", "m": "", "b+c": "%"}
	for range 10 {
		rows, err := c.SandboxesMatching(ctx, "ns/a b", filter)
		if err != nil || len(rows) != 1 || rows[0].Metadata["team"] != "a" {
			t.Fatalf("rows = %+v, %v", rows, err)
		}
	}
	if _, err := c.Sandboxes(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandboxes(ctx, "ns/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SandboxesMatching(ctx, "", map[string]string{"team": "a"}); err != nil {
		t.Fatal(err)
	}
	const want = "claim_ref=ns%2Fa+b&metadata=a%3Dx%3Dy%26z+w%2F%C3%A9&metadata=b%2Bc%3D%25&metadata=m%3D&metadata=z%3D1"
	for i := range 10 {
		if raw[i] != want {
			t.Fatalf("query %d = %s, want %s", i, raw[i], want)
		}
		if !slices.Equal(metadata[i], []string{"a=x=y&z w/é", "b+c=%", "m=", "z=1"}) {
			t.Fatalf("pairs as the node reads them: %q", metadata[i])
		}
	}
	if raw[10] != "" || raw[11] != "claim_ref=ns%2Fa" || raw[12] != "metadata=team%3Da" {
		t.Fatalf("Sandboxes and a bare filter sent %q", raw[10:])
	}
}

// A redirected claim resends the same labels to every target it tries
// and to the entry node it falls back to.
func TestClaimRedirectResendsMetadata(t *testing.T) {
	md := map[string]string{"team": "a", "q": "x=y"}
	var mu sync.Mutex
	var seen []sandboxd.ClaimRequest
	record := func(r *http.Request) sandboxd.ClaimRequest {
		var req sandboxd.ClaimRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		seen = append(seen, req)
		mu.Unlock()
		return req
	}
	full := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":"node at max_claims"}`)
	}))
	defer full.Close()
	entry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if req := record(r); !req.NoRedirect {
			_, _ = fmt.Fprintf(w, `{"redirect":[%q]}`, full.URL)
			return
		}
		_, _ = io.WriteString(w, `{"id":"sb_1","token":"t","deadline":"2026-07-06T00:05:00Z"}`)
	}))
	defer entry.Close()

	c, _ := sandboxd.New(entry.URL, sandboxd.WithToken("tok"))
	cl, err := c.Claim(ctxT(t), sandboxd.ClaimRequest{Template: "t", Metadata: md})
	if err != nil || cl.ID != "sb_1" {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	if len(seen) != 3 {
		t.Fatalf("want entry, target, entry again; got %d calls", len(seen))
	}
	for i, req := range seen {
		if !maps.Equal(req.Metadata, md) || req.NoRedirect != (i > 0) {
			t.Fatalf("call %d sent %+v", i, req)
		}
	}
}

// Through the simulator: a claim entering at a node without warm VMs is
// redirected and lands, labels and all, where the pool is; a checkpoint
// claim likewise.
func TestMetadataAcrossTheMesh(t *testing.T) {
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: 2, RootToken: templateRoot,
		Customize: func(i int, cfg *node.Config) {
			if i == 1 {
				cfg.Pools = []sandboxd.PoolSpec{{Template: templateBase, Warm: 2}}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	entry, owner := f.Node(0), f.Node(1)
	ctx := ctxT(t)
	if err := owner.WaitWarm(ctx, sandboxd.ClaimRequest{Template: templateBase}.Key(), 2); err != nil {
		t.Fatal(err)
	}
	atEntry, _ := sandboxd.New(entry.Addr(), sandboxd.WithToken(templateRoot))
	atOwner, _ := atEntry.At(owner.Addr())

	md := map[string]string{"team": "a", "run": "7"}
	cl, err := atEntry.Claim(ctx, sandboxd.ClaimRequest{Template: templateBase, ClaimRef: "ns/m", Metadata: md})
	if err != nil || cl.OwnerAddr != owner.Addr() {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	rows, err := atOwner.SandboxesMatching(ctx, "", map[string]string{"team": "a"})
	if err != nil || len(rows) != 1 || rows[0].ID != cl.ID || rows[0].ClaimRef != "ns/m" || !maps.Equal(rows[0].Metadata, md) {
		t.Fatalf("owner's index: %+v %v", rows, err)
	}
	if rows, _ := atOwner.SandboxesMatching(ctx, "", map[string]string{"team": "b"}); len(rows) != 0 {
		t.Fatalf("a filter no claim matches: %+v", rows)
	}

	ck, err := atOwner.Checkpoint(ctx, cl.ID, sandboxd.CheckpointRequest{Token: cl.Token})
	if err != nil {
		t.Fatal(err)
	}
	branchMD := map[string]string{"team": "b"}
	br, err := atEntry.ClaimCheckpoint(ctx, ck.ID, sandboxd.CheckpointClaimRequest{Metadata: branchMD})
	if err != nil || br.OwnerAddr != owner.Addr() {
		t.Fatalf("checkpoint claim: %+v %v", br, err)
	}
	row, err := atOwner.Sandbox(ctx, br.ID)
	if err != nil || !maps.Equal(row.Metadata, branchMD) {
		t.Fatalf("branch row: %+v %v", row, err)
	}
	_, err = atEntry.Claim(ctx, sandboxd.ClaimRequest{Template: templateBase, Metadata: map[string]string{"a=b": "v"}})
	if sandboxd.StatusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "'='") {
		t.Fatalf("bad labels: %v", err)
	}
}
