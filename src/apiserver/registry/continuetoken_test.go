package registry

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/labels"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

func TestContinueTokenRoundTrip(t *testing.T) {
	ref := sandbox.ClaimRef{Namespace: "team-a", Name: "web.1"}
	got, err := decodeContinue(encodeContinue(42, ref))
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != 42 || got.Namespace != ref.Namespace || got.Name != ref.Name {
		t.Fatalf("round trip gives %+v", got)
	}
}

func TestContinueTokenRefusesWhatThisServerDidNotWrite(t *testing.T) {
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for name, token := range map[string]string{
		"not base64":       "!!!",
		"not JSON":         b64("hello"),
		"another format":   b64(`{"v":2,"rv":1,"ns":"a","name":"b"}`),
		"no format":        b64(`{"rv":1,"ns":"a","name":"b"}`),
		"bad namespace":    b64(`{"v":1,"rv":1,"ns":"A/B","name":"b"}`),
		"no name":          b64(`{"v":1,"rv":1,"ns":"a","name":""}`),
		"etcd's own token": b64(`{"v":"meta.k8s.io/v1","rv":5,"start":"/a/b\u0000"}`),
		"too long":         strings.Repeat("A", maxContinueLen+1),
	} {
		if _, err := decodeContinue(token); !apierrors.IsBadRequest(err) {
			t.Errorf("%s: err = %v, want a 400", name, err)
		}
	}
}

// pagingBackend records the options of each list and answers one page.
type pagingBackend struct {
	Backend
	got  ListOptions
	page ListResult
}

func (b *pagingBackend) ListPage(_ context.Context, _ string, opts ListOptions) (ListResult, error) {
	b.got = opts
	return b.page, nil
}

func TestListPagesThroughTheBackend(t *testing.T) {
	item := agentsv1beta1.Sandbox{}
	item.Namespace, item.Name = "ns", "b"
	b := &pagingBackend{page: ListResult{
		Items: []agentsv1beta1.Sandbox{item}, Revision: 9,
		Next: sandbox.ClaimRef{Namespace: "ns", Name: "b"}, Remaining: 3,
	}}
	r := NewREST(b)
	ctx := context.Background()

	obj, err := r.List(ctx, &metainternalversion.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	first := obj.(*agentsv1beta1.SandboxList)
	if b.got.Limit != 1 || b.got.After != (sandbox.ClaimRef{}) || b.got.Match != nil {
		t.Fatalf("backend asked for %+v", b.got)
	}
	if first.ResourceVersion != "9" || first.Continue == "" || first.RemainingItemCount == nil || *first.RemainingItemCount != 3 {
		t.Fatalf("first page meta: %+v", first.ListMeta)
	}

	// The next page resumes after "ns/b" and reports the first page's
	// revision, though the backend has moved on.
	b.page = ListResult{Revision: 15}
	obj, err = r.List(ctx, &metainternalversion.ListOptions{Limit: 1, Continue: first.Continue})
	if err != nil {
		t.Fatal(err)
	}
	last := obj.(*agentsv1beta1.SandboxList)
	if b.got.After != (sandbox.ClaimRef{Namespace: "ns", Name: "b"}) {
		t.Fatalf("second page resumes after %v", b.got.After)
	}
	if last.ResourceVersion != "9" || last.Continue != "" || last.RemainingItemCount != nil {
		t.Fatalf("last page meta: %+v", last.ListMeta)
	}

	// A selector hands the backend a matcher, and hides the estimate.
	b.page = ListResult{Items: []agentsv1beta1.Sandbox{item}, Revision: 16, Next: sandbox.ClaimRef{Namespace: "ns", Name: "b"}, Remaining: -1}
	sel := labels.SelectorFromSet(labels.Set{"app": "x"})
	obj, err = r.List(ctx, &metainternalversion.ListOptions{Limit: 1, LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	if b.got.Match == nil {
		t.Fatal("a label selector reached the backend as no matcher")
	}
	if l := obj.(*agentsv1beta1.SandboxList); l.RemainingItemCount != nil || l.Continue == "" {
		t.Fatalf("selected page meta: %+v", l.ListMeta)
	}

	for name, opts := range map[string]*metainternalversion.ListOptions{
		"negative limit":            {Limit: -1},
		"continue with a revision":  {Continue: first.Continue, ResourceVersion: "9"},
		"continue this server lost": {Continue: "garbage"},
	} {
		if _, err := r.List(ctx, opts); !apierrors.IsBadRequest(err) {
			t.Errorf("%s: err = %v, want a 400", name, err)
		}
	}
}
