package apiserver_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

// TestListCBOR asks the kube-apiserver for a sandbox list in CBOR, which
// the server answers with --feature-gates=CBORServingAndStorage=true (the
// aggregator passes the Accept header through): the body is CBOR, decodes
// into the same list JSON gives, and a page of it is smaller.
func TestListCBOR(t *testing.T) {
	e := sharedEnv(t)
	ctx := testContext(t)
	inv := publishSynthetic(ctx, t, e, 300)
	defer inv.remove(ctx, t, e)

	path := "/apis/" + group + "/" + version + "/namespaces/" + syntheticNamespace + "/sandboxes"
	get := func(accept string) ([]byte, string) {
		t.Helper()
		res := e.raw.Get().AbsPath(path).SetHeader("Accept", accept).Do(ctx)
		var contentType string
		res.ContentType(&contentType)
		body, err := res.Raw()
		if err != nil {
			t.Fatalf("list as %s: %v", accept, err)
		}
		return body, contentType
	}
	cborBody, contentType := get("application/cbor")
	if !strings.HasPrefix(contentType, "application/cbor") {
		t.Fatalf("asked for CBOR, got Content-Type %q", contentType)
	}
	scheme := runtime.NewScheme()
	if err := agentsv1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var list agentsv1beta1.SandboxList
	if _, _, err := cbor.NewSerializer(scheme, scheme).Decode(cborBody, nil, &list); err != nil {
		t.Fatalf("decode the CBOR list: %v", err)
	}
	if len(list.Items) != 300 || list.Items[0].Namespace != syntheticNamespace || list.Items[0].Annotations == nil {
		t.Fatalf("the CBOR list holds %d items (first %+v)", len(list.Items), list.Items[0].ObjectMeta)
	}
	jsonBody, _ := get("application/json")
	t.Logf("300 sandboxes: %d bytes as CBOR, %d as JSON", len(cborBody), len(jsonBody))
	if len(cborBody) >= len(jsonBody) {
		t.Errorf("CBOR list is %d bytes, JSON %d", len(cborBody), len(jsonBody))
	}
}
