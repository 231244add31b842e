package sandboxd_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// goldenDir holds the examples of the sandboxd API document, one file per
// endpoint and direction (see its README).
const goldenDir = "testdata/golden"

// goldenCase ties one fixture to the client type that reads or writes it.
type goldenCase struct {
	file string
	// decode returns a pointer to the client type the fixture decodes into.
	// Nil only with unmodelled set.
	decode func() any
	// request is the value the client sends for a request fixture, built
	// with the fixture's values.
	request any
	// omitted lists fixture keys the client deliberately does not model,
	// as dotted paths ("[]" marks an array's elements), with the reason.
	omitted map[string]string
	// unmodelled says why the client has no type for this endpoint at all.
	unmodelled string
}

func goldenCases() []goldenCase {
	return []goldenCase{
		{
			file:   "claim.request.json",
			decode: func() any { return new(sandboxd.ClaimRequest) },
			request: sandboxd.ClaimRequest{
				Template: "base:24.04", Net: "none", Size: "small", TTLSeconds: 300,
				ClaimRef: "namespace/workload", Metadata: map[string]string{"team": "a"},
				OnExpire: sandboxd.ExpireArchive, Egress: ptr(true),
				Env: map[string]sandboxd.EnvEntry{
					"MODE":   {Value: "prod"},
					"GW_KEY": {Value: "Bearer …", Guest: ptr(false)},
				},
				Volumes: []sandboxd.VolumeMount{
					{Name: "imagenet"}, {Name: "weights", Mount: "/models"}, {Name: "scratch-db", Mode: "rw"},
				},
			},
		},
		{file: "claim.response.json", decode: func() any { return new(sandboxd.ClaimResponse) }},
		{file: "claim.attach-only.response.json", decode: func() any { return new(sandboxd.ClaimResponse) }},
		{file: "claim.redirect.response.json", decode: func() any { return new(sandboxd.ClaimResponse) }},
		{
			file:   "checkpoint-claim.request.json",
			decode: func() any { return new(sandboxd.CheckpointClaimRequest) },
			request: sandboxd.CheckpointClaimRequest{
				Metadata: map[string]string{}, OnExpire: sandboxd.ExpireDestroy, Env: map[string]sandboxd.EnvEntry{},
			},
		},
		{file: "checkpoint-claim.response.json", decode: func() any { return new(sandboxd.ClaimResponse) }},
		{file: "checkpoint-claim.redirect.response.json", decode: func() any { return new(sandboxd.ClaimResponse) }},
		{
			file:    "checkpoint.request.json",
			decode:  func() any { return new(sandboxd.CheckpointRequest) },
			request: sandboxd.CheckpointRequest{Token: "<sandbox token>", Name: "..."},
		},
		{file: "checkpoint.response.json", decode: func() any { return new(sandboxd.CheckpointResponse) }},
		{
			file:    "fork.request.json",
			decode:  func() any { return new(sandboxd.ForkRequest) },
			request: sandboxd.ForkRequest{Token: "…", Count: 2, TTLSeconds: 300, ClaimRefPrefix: "team-a/"},
		},
		{file: "fork.response.json", decode: func() any { return new(sandboxd.ForkResponse) }},
		{
			file:    "renew.request.json",
			decode:  func() any { return new(sandboxd.RenewRequest) },
			request: sandboxd.RenewRequest{TTLSeconds: 3600, OnExpire: sandboxd.ExpireArchive},
		},
		{file: "renew.response.json", decode: func() any { return new(sandboxd.RenewResponse) }},
		{
			file:   "pools.request.json",
			decode: func() any { return new(sandboxd.PoolsRequest) },
			request: sandboxd.PoolsRequest{Pools: []sandboxd.PoolSpec{{
				Template: "base:24.04", Net: "none", Size: "small", Warm: 4, WarmMax: 16,
			}}},
		},
		{file: "info.response.json", decode: func() any { return new(sandboxd.Info) }},
		{file: "info.cluster.response.json", decode: func() any { return new(sandboxd.Info) }},
		{file: "drain.response.json", decode: func() any { return new(sandboxd.Info) }},
		{file: "sandboxes.response.json", decode: func() any { return new(sandboxd.SandboxList) }},
		{file: "sandbox.response.json", decode: func() any { return new(sandboxd.Sandbox) }},
		{file: "stats.response.json", decode: func() any { return new(sandboxd.Stats) }},
		{file: "owner.response.json", decode: func() any { return new(sandboxd.OwnerResponse) }},
		{file: "peers.response.json", decode: func() any { return new(sandboxd.PeersResponse) }},
		{file: "error.response.json", decode: func() any { return new(sandboxd.ErrorResponse) }},
		{file: "error.body-too-large.response.json", decode: func() any { return new(sandboxd.ErrorResponse) }},
		// The delete redirect has the claim redirect's shape, and
		// DeleteTemplate reads it as one.
		{file: "templates.delete.redirect.response.json", decode: func() any { return new(sandboxd.ClaimResponse) }},
		{
			file:    "promote.request.json",
			decode:  func() any { return new(sandboxd.PromoteRequest) },
			request: sandboxd.PromoteRequest{Token: "…", Template: "myproj:v1"},
		},
		{file: "promote.response.json", decode: func() any { return new(sandboxd.PromoteResult) }},

		{file: "preview.request.json", unmodelled: "guest ports are reached through the ports relay, not preview URLs"},
		{file: "preview.response.json", unmodelled: "guest ports are reached through the ports relay, not preview URLs"},
		{
			file:   "exec.request.json",
			decode: func() any { return new(sandboxd.ExecRequest) },
			request: sandboxd.ExecRequest{
				Argv: []string{"node", "-v"}, Cwd: "/work", Env: map[string]string{"CI": "1"}, TimeoutSeconds: 60,
			},
		},
		{file: "exec.response.json", decode: func() any { return new(sandboxd.ExecResult) }},
		{
			file:   "env.get.response.json",
			decode: func() any { return new(sandboxd.ClaimEnv) },
		},
		{
			file:    "env.put.request.json",
			decode:  func() any { return new(sandboxd.ClaimEnv) },
			request: sandboxd.ClaimEnv{Env: map[string]sandboxd.EnvEntry{}},
		},
		{
			file:   "env.patch.request.json",
			decode: func() any { return new(sandboxd.ClaimEnvPatch) },
			request: sandboxd.ClaimEnvPatch{Env: map[string]*sandboxd.EnvEntry{
				"CB_META_wake": {Value: "w2"}, "OLD": nil,
			}},
		},
		{file: "volumes.response.json", decode: func() any { return new(sandboxd.VolumeList) }},
		{file: "volumes.writable.response.json", decode: func() any { return new(sandboxd.VolumeList) }},
		{file: "info.templates.row.json", decode: func() any { return new(sandboxd.TemplateInfo) }},
		{
			file:    "templates.labels.request.json",
			decode:  func() any { return new(sandboxd.TemplateLabelsRequest) },
			request: sandboxd.TemplateLabelsRequest{Labels: map[string]string{"v1": "sha256:…", "team": "a"}},
		},
		{
			file:    "tenant.put.request.json",
			decode:  func() any { return new(sandboxd.TenantUpdate) },
			request: sandboxd.TenantUpdate{Token: "…", MaxClaims: 50, EgressClass: "desk"},
		},
		{
			file:    "tenants.put.request.json",
			decode:  func() any { return new(sandboxd.TenantSet) },
			request: sandboxd.TenantSet{Tenants: []sandboxd.Tenant{{Name: "…", Token: "…", EgressClass: "desk"}}},
		},
		{file: "tenants.response.json", decode: func() any { return new(sandboxd.TenantPage) }},
	}
}

// Every fixture in the folder has a row, and every row a fixture.
func TestGoldenTableCoversEveryFixture(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures under %s: %v", goldenDir, err)
	}
	var onDisk, listed []string
	for _, f := range files {
		onDisk = append(onDisk, filepath.Base(f))
	}
	for _, c := range goldenCases() {
		listed = append(listed, c.file)
		if (c.decode == nil) == (c.unmodelled == "") {
			t.Errorf("%s: set exactly one of decode and unmodelled", c.file)
		}
	}
	slices.Sort(listed)
	if !slices.Equal(onDisk, listed) {
		t.Fatalf("fixtures on disk %v, table rows %v", onDisk, listed)
	}
}

func TestGoldenFixtures(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(goldenDir, c.file))
			if err != nil {
				t.Fatal(err)
			}
			fixture := parseJSON(t, raw)
			if c.decode == nil {
				if _, ok := fixture.(map[string]any); !ok {
					t.Fatalf("fixture is not a JSON object")
				}
				return
			}

			// Each omission must name a key the doc has and the struct
			// really lacks: with that key left in, the strict decode fails.
			pruned := fixture
			for path := range c.omitted {
				if !removePath(parseJSON(t, raw), splitPath(path)) {
					t.Fatalf("omitted key %q is not in the fixture", path)
				}
				only := parseJSON(t, raw)
				for other := range c.omitted {
					if other != path {
						removePath(only, splitPath(other))
					}
				}
				if err := strictDecode(mustMarshal(t, only), c.decode()); err == nil {
					t.Errorf("omitted key %q decodes into %T: drop the omission", path, c.decode())
				}
				removePath(pruned, splitPath(path))
			}

			got := c.decode()
			if err := strictDecode(mustMarshal(t, pruned), got); err != nil {
				t.Fatalf("fixture does not decode into %T: %v", got, err)
			}
			sameJSON(t, "re-encoded "+reflect.TypeOf(got).Elem().Name(), pruned, parseJSON(t, mustMarshal(t, got)))

			if c.request != nil {
				if dec := reflect.ValueOf(got).Elem().Interface(); !reflect.DeepEqual(dec, c.request) {
					t.Errorf("fixture decodes to %+v, table builds %+v", dec, c.request)
				}
				sameJSON(t, "encoded request", pruned, parseJSON(t, mustMarshal(t, c.request)))
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func parseJSON(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	return v
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func splitPath(path string) []string { return strings.Split(path, ".") }

// removePath deletes the key at path ("a[].b" walks every element of a)
// and reports whether it was anywhere.
func removePath(v any, path []string) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	key, each := strings.CutSuffix(path[0], "[]")
	child, ok := obj[key]
	if !ok {
		return false
	}
	if len(path) == 1 {
		delete(obj, key)
		return true
	}
	if !each {
		return removePath(child, path[1:])
	}
	arr, _ := child.([]any)
	found := false
	for _, el := range arr {
		found = removePath(el, path[1:]) || found
	}
	return found
}

// sameJSON requires got to carry exactly want's keys and values. A key
// want holds at its zero value (false, 0, "", null) may be absent from got:
// the document gives each such field its zero as the default, so leaving
// it out says the same thing. An empty object counts as a zero value.
func sameJSON(t *testing.T, what string, want, got any) {
	t.Helper()
	var diffs []string
	diffJSON("$", want, got, &diffs)
	for _, d := range diffs {
		t.Errorf("%s: %s", what, d)
	}
}

func diffJSON(path string, want, got any, diffs *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*diffs = append(*diffs, path+": want an object, got "+string(mustJSON(got)))
			return
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				*diffs = append(*diffs, path+"."+k+": key the document does not have")
			}
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				if !isZero(wv) {
					*diffs = append(*diffs, path+"."+k+": documented key missing")
				}
				continue
			}
			diffJSON(path+"."+k, wv, gv, diffs)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			*diffs = append(*diffs, path+": want "+string(mustJSON(want))+", got "+string(mustJSON(got)))
			return
		}
		for i := range w {
			diffJSON(path+"["+strconv.Itoa(i)+"]", w[i], g[i], diffs)
		}
	default:
		if !reflect.DeepEqual(want, got) {
			*diffs = append(*diffs, path+": want "+string(mustJSON(want))+", got "+string(mustJSON(got)))
		}
	}
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case string:
		return x == ""
	case json.Number:
		return x == "0"
	case map[string]any:
		// An empty object is an absent map: "none", as omitempty sends it.
		return len(x) == 0
	}
	return false
}

func mustJSON(v any) []byte {
	raw, _ := json.Marshal(v)
	return raw
}
