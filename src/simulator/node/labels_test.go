package node_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

func TestTemplateLabels(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root, a, b := client(t, n, rootToken), client(t, n, tenantA), client(t, n, tenantB)
	src, err := a.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Promote(ctx, src.ID, sandboxd.PromoteRequest{Token: src.Token, Template: promotedName})
	if err != nil {
		t.Fatal(err)
	}
	labelsOf := func() map[string]string {
		t.Helper()
		info, err := root.Info(ctx)
		if err != nil || len(info.Templates) != 1 {
			t.Fatalf("info templates %+v (%v)", info, err)
		}
		return info.Templates[0].Labels
	}
	if got := labelsOf(); got != nil {
		t.Fatalf("a fresh template has labels %v", got)
	}

	set := map[string]string{"v1": res.ContentDigest, "team": "a"}
	if err := a.SetTemplateLabels(ctx, promotedKey, set, res.ContentDigest); err != nil {
		t.Fatal(err)
	}
	if got := labelsOf(); !reflect.DeepEqual(got, set) {
		t.Fatalf("labels %v, want %v", got, set)
	}
	// The whole map is replaced, by root too.
	if err := root.SetTemplateLabels(ctx, promotedKey, map[string]string{"only": "this"}, ""); err != nil {
		t.Fatal(err)
	}
	if got := labelsOf(); !reflect.DeepEqual(got, map[string]string{"only": "this"}) {
		t.Fatalf("after a replace: %v", got)
	}

	// Refusals leave the labels as they are.
	wantStatus(t, a.SetTemplateLabels(ctx, promotedKey, set, "sha256:other"), http.StatusPreconditionFailed, sandboxd.ErrPrecondition)
	wantStatus(t, b.SetTemplateLabels(ctx, promotedKey, set, ""), http.StatusNotFound, sandboxd.ErrNotFound)
	unknown := sandbox.PoolKey{Template: "nope:1"}
	wantStatus(t, a.SetTemplateLabels(ctx, unknown, set, ""), http.StatusNotFound, sandboxd.ErrNotFound)
	wantStatus(t, root.SetTemplateLabels(ctx, baseKey, set, ""), http.StatusConflict, sandboxd.ErrConflict)
	tooMany := map[string]string{}
	for i := range 17 {
		tooMany[strings.Repeat("k", i+1)] = "v"
	}
	wantStatus(t, a.SetTemplateLabels(ctx, promotedKey, tooMany, ""), http.StatusBadRequest, sandboxd.ErrBadRequest)
	wantStatus(t, a.SetTemplateLabels(ctx, promotedKey, map[string]string{"a=b": "v"}, ""), http.StatusBadRequest, sandboxd.ErrBadRequest)
	api := "http://" + n.Addr() + "/v1/templates/labels?template=" + promotedName
	for _, body := range []string{`{}`, `{"labels":null}`, `{"labels":{"k":1}}`, `[]`} {
		if code, out := rawDo(t, http.MethodPut, api, tenantA, []byte(body), nil); code != http.StatusBadRequest {
			t.Errorf("body %s: %d %s", body, code, out)
		}
	}
	if got := labelsOf(); !reflect.DeepEqual(got, map[string]string{"only": "this"}) {
		t.Fatalf("a refused write changed the labels: %v", got)
	}

	// {} clears; a re-promote starts with none; a delete takes them along.
	if err := a.SetTemplateLabels(ctx, promotedKey, nil, ""); err != nil {
		t.Fatal(err)
	}
	if got := labelsOf(); got != nil {
		t.Fatalf("after clearing: %v", got)
	}
	if err := a.SetTemplateLabels(ctx, promotedKey, set, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Promote(ctx, src.ID, sandboxd.PromoteRequest{Token: src.Token, Template: promotedName}); err != nil {
		t.Fatal(err)
	}
	if got := labelsOf(); got != nil {
		t.Fatalf("a re-promote kept labels %v", got)
	}
	if err := a.SetTemplateLabels(ctx, promotedKey, set, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteTemplate(ctx, promotedKey, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Promote(ctx, src.ID, sandboxd.PromoteRequest{Token: src.Token, Template: promotedName}); err != nil {
		t.Fatal(err)
	}
	if got := labelsOf(); got != nil {
		t.Fatalf("labels outlived the template's delete: %v", got)
	}
}
