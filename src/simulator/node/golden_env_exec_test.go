package node_test

import (
	"net/http"
	"os/exec"
	"reflect"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// The env verbs and the buffered exec take the document's own request
// bodies and answer in the documented shapes.
func TestEnvAndExecAnswersMatchTheDocumentedExamples(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on this host")
	}
	n := startNode(t, testConfig())
	api := "http://" + n.Addr()
	claimBody := goldenFixture(t, "claim.request.json").(map[string]any)
	delete(claimBody, "volumes") // the claim's env is what this test is about
	var cl sandboxd.ClaimResponse
	decode(t, call(t, http.MethodPost, api+"/v1/claim", rootToken, mustJSON(t, claimBody), http.StatusOK), &cl)
	env := api + "/v1/sandboxes/" + cl.ID + "/env"

	// The claim's env (MODE, and GW_KEY host-only) reads back as the
	// document's GET example: the host-only value blanked.
	body := call(t, http.MethodGet, env, rootToken, nil, http.StatusOK)
	matchGolden(t, "env.get.response.json", body, nil)
	if got, want := parse(t, body), goldenFixture(t, "env.get.response.json"); !reflect.DeepEqual(got, want) {
		t.Errorf("GET env answered %s, the document's example is %s", body, goldenBytes(t, "env.get.response.json"))
	}
	// Env names are data, so after the document's PATCH the answer is
	// checked by value: the set name added, the host-only one kept.
	call(t, http.MethodPatch, env, rootToken, goldenBytes(t, "env.patch.request.json"), http.StatusNoContent)
	var got sandboxd.ClaimEnv
	decode(t, call(t, http.MethodGet, env, rootToken, nil, http.StatusOK), &got)
	if got.Env["CB_META_wake"].Value != "w2" || got.Env["MODE"].Value != "prod" || got.Env["GW_KEY"].InGuest() || len(got.Env) != 3 {
		t.Errorf("after the documented PATCH: %+v", got.Env)
	}
	call(t, http.MethodPut, env, rootToken, goldenBytes(t, "env.put.request.json"), http.StatusNoContent)

	// The exec example runs node in /work; this host runs sh there instead,
	// in the same body shape.
	req := goldenFixture(t, "exec.request.json").(map[string]any)
	if string(call(t, http.MethodPost, api+"/v1/sandboxes/"+cl.ID+"/exec", cl.Token,
		[]byte(`{"argv":["mkdir","-p","work"]}`), http.StatusOK)) == "" {
		t.Fatal("empty exec answer")
	}
	req["argv"] = []any{"sh", "-c", "echo $CI"}
	body = call(t, http.MethodPost, api+"/v1/sandboxes/"+cl.ID+"/exec", cl.Token, mustJSON(t, req), http.StatusOK)
	matchGolden(t, "exec.response.json", body, nil)
	var res sandboxd.ExecResult
	decode(t, body, &res)
	if res.Stdout != "1\n" || res.ExitCode != 0 {
		t.Errorf("exec of the documented body answered %+v", res)
	}
	body = call(t, http.MethodPost, api+"/v1/sandboxes/"+cl.ID+"/exec", cl.Token, []byte(`{"argv":[]}`), http.StatusBadRequest)
	matchGolden(t, "error.response.json", body, nil)
}
