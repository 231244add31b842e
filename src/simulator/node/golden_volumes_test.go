package node_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

// The volume, template-label and tenant answers match the document's
// examples, and the document's request bodies are accepted as sent.
func TestVolumeLabelTenantAnswersMatchTheDocumentedExamples(t *testing.T) {
	cfg := testConfig()
	for _, name := range []string{"imagenet", "weights"} {
		cfg.Volumes = append(cfg.Volumes, node.Volume{Name: name, Dir: t.TempDir()})
	}
	cfg.Volumes = append(cfg.Volumes, node.Volume{Name: "scratch-db", Dir: t.TempDir(), Writable: true})
	n := startNode(t, cfg)
	api := "http://" + n.Addr()

	// GET /v1/volumes: read-only rows as the example, writable rows with
	// the writable flag the prose adds.
	body := call(t, http.MethodGet, api+"/v1/volumes", tenantA, nil, http.StatusOK)
	var listing struct {
		Volumes []map[string]any `json:"volumes"`
	}
	decode(t, body, &listing)
	var ro, rw []map[string]any
	for _, v := range listing.Volumes {
		if v["writable"] == true {
			rw = append(rw, v)
		} else {
			ro = append(ro, v)
		}
	}
	if len(ro) != 2 || len(rw) != 1 {
		t.Fatalf("listing %s: want two read-only rows and one writable", body)
	}
	matchGolden(t, "volumes.response.json", mustJSON(t, map[string]any{"volumes": ro}), nil)
	matchGolden(t, "volumes.writable.response.json", mustJSON(t, map[string]any{"volumes": rw}), nil)

	// The document's volume list claims and is echoed; attach-only too.
	var req struct {
		Volumes json.RawMessage `json:"volumes"`
	}
	decode(t, goldenBytes(t, "claim.request.json"), &req)
	body = call(t, http.MethodPost, api+"/v1/claim", tenantA, []byte(`{"template":"`+tmpl+`","volumes":`+string(req.Volumes)+`}`), http.StatusOK)
	matchVolumeEcho(t, "claim.response.json", body, map[string]string{"template_digest": whyNoDigest})
	var cl sandboxd.ClaimResponse
	decode(t, body, &cl)
	call(t, http.MethodPost, api+"/v1/sandboxes/"+cl.ID+"/release", cl.Token, nil, http.StatusNoContent)
	// The index row's example holds one rw volume.
	body = call(t, http.MethodPost, api+"/v1/claim", tenantA, []byte(`{"template":"`+tmpl+`","volumes":[{"name":"scratch-db","mode":"rw"}]}`), http.StatusOK)
	decode(t, body, &cl)
	body = call(t, http.MethodGet, api+"/v1/sandboxes", rootToken, nil, http.StatusOK)
	matchGolden(t, "sandboxes.response.json", body, prefixed("sandboxes[].", map[string]string{
		"archived": whyRowOptional, "from_checkpoint": whyRowOptional, "claim_ref": whyRowOptional,
		"metadata": whyRowOptional, "on_expire": whyRowOptional, "failed": whyRowOptional,
	}))
	call(t, http.MethodPost, api+"/v1/sandboxes/"+cl.ID+"/release", cl.Token, nil, http.StatusNoContent)
	body = call(t, http.MethodPost, api+"/v1/claim", tenantA, []byte(`{"template":"`+tmpl+`","volumes_attach_only":true,"volumes":[{"name":"imagenet"},{"name":"scratch-db","mode":"rw"}]}`), http.StatusOK)
	// The attach-only example shows only id, token and volumes: the rest
	// of the answer is the ordinary claim answer.
	var attach map[string]any
	decode(t, body, &attach)
	matchVolumeEcho(t, "claim.attach-only.response.json", mustJSON(t, map[string]any{"id": attach["id"], "token": attach["token"], "volumes": attach["volumes"]}), nil)
	delete(attach, "volumes")
	matchGolden(t, "claim.response.json", mustJSON(t, attach), map[string]string{"template_digest": whyNoDigest, "volumes": "checked against the attach-only example"})

	// Labels: the document's body, then the info row carrying them.
	src := call(t, http.MethodPost, api+"/v1/claim", tenantA, []byte(`{"template":"`+tmpl+`"}`), http.StatusOK)
	decode(t, src, &cl)
	call(t, http.MethodPost, api+"/v1/sandboxes/"+cl.ID+"/promote", tenantA, []byte(`{"token":"`+cl.Token+`","template":"`+promotedName+`"}`), http.StatusOK)
	labelsURL := api + "/v1/templates/labels?template=" + url.QueryEscape(promotedName)
	call(t, http.MethodPut, labelsURL, tenantA, goldenBytes(t, "templates.labels.request.json"), http.StatusNoContent)
	// Labels are a free-form map: the row carries the example's own.
	row := goldenFixture(t, "info.templates.row.json").(map[string]any)
	call(t, http.MethodPut, labelsURL, tenantA, mustJSON(t, map[string]any{"labels": row["labels"]}), http.StatusNoContent)
	body = call(t, http.MethodGet, api+"/v1/info", rootToken, nil, http.StatusOK)
	var info struct {
		Templates []json.RawMessage `json:"templates"`
	}
	decode(t, body, &info)
	if len(info.Templates) != 1 {
		t.Fatalf("info %s: want one template", body)
	}
	matchGolden(t, "info.templates.row.json", info.Templates[0], nil)

	// Tenants: both documented PUT bodies, then the listing shape (a
	// removed tenant with claims included).
	call(t, http.MethodPut, api+"/v1/tenants/team-c", rootToken, goldenBytes(t, "tenant.put.request.json"), http.StatusNoContent)
	call(t, http.MethodPost, api+"/v1/claim", "…", []byte(`{"template":"`+tmpl+`"}`), http.StatusOK)
	// The example's name is a placeholder the name grammar refuses.
	set := goldenFixture(t, "tenants.put.request.json").(map[string]any)
	set["tenants"].([]any)[0].(map[string]any)["name"] = "team-c"
	body = call(t, http.MethodPut, api+"/v1/tenants", rootToken, mustJSON(t, set), http.StatusOK)
	current := map[string]string{"max_claims": "omitted at 0 (unlimited)", "egress_class": "absent without a class"}
	matchByKind(t, "tenants.response.json", body, "tenants", tenantKind, current, map[string]string{"next": "absent on the last page"})
	call(t, http.MethodPut, api+"/v1/tenants/team-d", rootToken, []byte(`{"token":"team-d-token"}`), http.StatusNoContent)
	body = call(t, http.MethodGet, api+"/v1/tenants?limit=1", rootToken, nil, http.StatusOK)
	matchByKind(t, "tenants.response.json", body, "tenants", tenantKind, current, nil)
}

// volumeKind tells the example's volume entries apart: with or without
// mount and mode.
func volumeKind(v map[string]any) string {
	_, mount := v["mount"]
	_, mode := v["mode"]
	return fmt.Sprint(mount, mode)
}

// tenantKind tells a removed tenant's row from a current one's.
func tenantKind(v map[string]any) string { return fmt.Sprint(v["removed"]) }

// matchVolumeEcho checks an answer carrying volumes against fixture.
func matchVolumeEcho(t *testing.T, fixture string, got []byte, optional map[string]string) {
	t.Helper()
	matchByKind(t, fixture, got, "volumes", volumeKind, nil, optional)
}

// matchByKind checks an answer whose array at key mixes entries of
// different shapes by design: the rest as matchGolden does, and each entry
// against the fixture's entry of the same kind (entryOptional lists the
// entry keys that may be absent).
func matchByKind(t *testing.T, fixture string, got []byte, key string, kindOf func(map[string]any) string, entryOptional, optional map[string]string) {
	t.Helper()
	want := goldenFixture(t, fixture).(map[string]any)
	answer := parse(t, got).(map[string]any)
	wantEls, _ := want[key].([]any)
	gotEls, _ := answer[key].([]any)
	if len(gotEls) == 0 {
		t.Fatalf("%s: the answer %s has no %s", fixture, got, key)
	}
	for _, g := range gotEls {
		gm, _ := g.(map[string]any)
		var match any
		for _, w := range wantEls {
			if wm, _ := w.(map[string]any); kindOf(wm) == kindOf(gm) {
				match = w
			}
		}
		if match == nil {
			t.Errorf("%s: %s entry %v has a shape the example never shows", fixture, key, g)
			continue
		}
		for _, e := range shapeErrors(match, g, entryOptional) {
			t.Errorf("%s: %s entry %v: %s", fixture, key, g, e)
		}
	}
	delete(answer, key)
	rest := map[string]string{key: "checked entry by entry"}
	for k, v := range optional {
		rest[k] = v
	}
	matchGolden(t, fixture, mustJSON(t, answer), rest)
}
