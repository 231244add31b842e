package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/api"
	"github.com/cocoonstack/sandbox-operator/src/apiserver/api/subresources"
)

var sandboxesGVR = agentsv1beta1.GroupVersion.WithResource("sandboxes")

func typedClient(t *testing.T, ts *testServer) rest.Interface {
	t.Helper()
	cfg := rest.CopyConfig(ts.config)
	cfg.GroupVersion = &agentsv1beta1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = api.Codecs.WithoutConversion()
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatalf("RESTClientFor: %v", err)
	}
	return c
}

func dynamicClient(t *testing.T, ts *testServer) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(ts.config)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	return c
}

func newSandbox(ns, name string, labels map[string]string) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{}
	sb.APIVersion = agentsv1beta1.GroupVersion.String()
	sb.Kind = agentsv1beta1.SandboxKind
	sb.Namespace = ns
	sb.Name = name
	sb.Labels = labels
	return sb
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func create(t *testing.T, c rest.Interface, sb *agentsv1beta1.Sandbox) *agentsv1beta1.Sandbox {
	t.Helper()
	out := &agentsv1beta1.Sandbox{}
	if err := c.Post().Namespace(sb.Namespace).Resource("sandboxes").Body(sb).Do(testContext(t)).Into(out); err != nil {
		t.Fatalf("create %s/%s: %v", sb.Namespace, sb.Name, err)
	}
	return out
}

func TestServer(t *testing.T) {
	ts := startServer(t)
	c := typedClient(t, ts)
	dyn := dynamicClient(t, ts)

	t.Run("discovery", func(t *testing.T) {
		dc, err := discovery.NewDiscoveryClientForConfig(ts.config)
		if err != nil {
			t.Fatal(err)
		}
		list, err := dc.ServerResourcesForGroupVersion(agentsv1beta1.GroupVersion.String())
		if err != nil {
			t.Fatalf("discovery: %v", err)
		}
		got := map[string]metav1.APIResource{}
		for _, r := range list.APIResources {
			got[r.Name] = r
		}
		sbr, ok := got["sandboxes"]
		if !ok {
			t.Fatalf("sandboxes not in discovery: %+v", list.APIResources)
		}
		if !sbr.Namespaced || sbr.Kind != "Sandbox" || sbr.SingularName != "sandbox" {
			t.Errorf("sandboxes resource = %+v", sbr)
		}
		verbs := []string(sbr.Verbs)
		slices.Sort(verbs)
		if want := []string{"create", "delete", "get", "list", "watch"}; !slices.Equal(verbs, want) {
			t.Errorf("verbs = %v, want %v", verbs, want)
		}
		for _, sub := range []string{"pause", "resume", "fork", "snapshot"} {
			r, ok := got["sandboxes/"+sub]
			if !ok {
				t.Errorf("sandboxes/%s not in discovery", sub)
				continue
			}
			if !slices.Equal([]string(r.Verbs), []string{"create"}) {
				t.Errorf("sandboxes/%s verbs = %v, want [create]", sub, r.Verbs)
			}
		}
	})

	t.Run("crud", func(t *testing.T) {
		created := create(t, c, newSandbox("team-a", "crud-one", map[string]string{"app": "web"}))
		if created.Status.NodeName != "node-a" || created.ResourceVersion == "" {
			t.Errorf("created = %+v", created.ObjectMeta)
		}

		got := &agentsv1beta1.Sandbox{}
		if err := c.Get().Namespace("team-a").Resource("sandboxes").Name("crud-one").Do(testContext(t)).Into(got); err != nil {
			t.Fatalf("get: %v", err)
		}
		if got.Name != "crud-one" || got.Namespace != "team-a" || got.Labels["app"] != "web" {
			t.Errorf("get = %+v", got.ObjectMeta)
		}

		list, err := dyn.Resource(sandboxesGVR).Namespace("team-a").List(testContext(t), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if names := itemNames(list); !slices.Contains(names, "crud-one") {
			t.Errorf("list names = %v", names)
		}

		if err := dyn.Resource(sandboxesGVR).Namespace("team-a").Delete(testContext(t), "crud-one", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete: %v", err)
		}
		_, err = dyn.Resource(sandboxesGVR).Namespace("team-a").Get(testContext(t), "crud-one", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("get after delete: %v, want NotFound", err)
		}
	})

	t.Run("create validation and dry run", func(t *testing.T) {
		bad := newSandbox("team-a", "Not_A_Name", nil)
		err := c.Post().Namespace("team-a").Resource("sandboxes").Body(bad).Do(testContext(t)).Error()
		if !apierrors.IsInvalid(err) {
			t.Errorf("invalid name: %v, want Invalid", err)
		}
		other := newSandbox("team-b", "x", nil)
		err = c.Post().Namespace("team-a").Resource("sandboxes").Body(other).Do(testContext(t)).Error()
		if !apierrors.IsBadRequest(err) {
			t.Errorf("namespace mismatch: %v, want BadRequest", err)
		}

		before := ts.backend.callCount("create")
		dry := newSandbox("team-a", "dry", nil)
		out := &agentsv1beta1.Sandbox{}
		if err := c.Post().Namespace("team-a").Resource("sandboxes").Param("dryRun", "All").Body(dry).Do(testContext(t)).Into(out); err != nil {
			t.Fatalf("dry run: %v", err)
		}
		if out.Name != "dry" || ts.backend.callCount("create") != before {
			t.Errorf("dry run reached the backend or lost the object: %+v", out.ObjectMeta)
		}

		gen := newSandbox("team-a", "", nil)
		gen.GenerateName = "gen-"
		got := create(t, c, gen)
		if !strings.HasPrefix(got.Name, "gen-") || len(got.Name) <= len("gen-") {
			t.Errorf("generated name = %q", got.Name)
		}
	})

	t.Run("selectors", func(t *testing.T) {
		create(t, c, newSandbox("sel", "alpha", map[string]string{"tier": "gold"}))
		create(t, c, newSandbox("sel", "beta", map[string]string{"tier": "silver"}))
		create(t, c, newSandbox("sel-other", "alpha", map[string]string{"tier": "gold"}))

		cases := []struct {
			ns   string
			opts metav1.ListOptions
			want []string
		}{
			{"sel", metav1.ListOptions{FieldSelector: "metadata.name=alpha"}, []string{"sel/alpha"}},
			{"sel", metav1.ListOptions{LabelSelector: "tier=silver"}, []string{"sel/beta"}},
			{"sel", metav1.ListOptions{LabelSelector: "tier in (gold,silver)"}, []string{"sel/alpha", "sel/beta"}},
			{"", metav1.ListOptions{FieldSelector: "metadata.name=alpha"}, []string{"sel-other/alpha", "sel/alpha"}},
			{"", metav1.ListOptions{FieldSelector: "metadata.namespace=sel-other"}, []string{"sel-other/alpha"}},
			{"sel", metav1.ListOptions{FieldSelector: "metadata.name!=alpha", LabelSelector: "tier"}, []string{"sel/beta"}},
		}
		for _, tc := range cases {
			var list *unstructured.UnstructuredList
			var err error
			if tc.ns == "" {
				list, err = dyn.Resource(sandboxesGVR).List(testContext(t), tc.opts)
			} else {
				list, err = dyn.Resource(sandboxesGVR).Namespace(tc.ns).List(testContext(t), tc.opts)
			}
			if err != nil {
				t.Fatalf("list %q %+v: %v", tc.ns, tc.opts, err)
			}
			got := itemKeys(list)
			if !slices.Equal(got, tc.want) {
				t.Errorf("list %q %+v = %v, want %v", tc.ns, tc.opts, got, tc.want)
			}
		}

		_, err := dyn.Resource(sandboxesGVR).Namespace("sel").List(testContext(t), metav1.ListOptions{FieldSelector: "spec.operatingMode=Running"})
		if !apierrors.IsBadRequest(err) {
			t.Errorf("unsupported field selector: %v, want BadRequest", err)
		}
	})

	t.Run("watch", func(t *testing.T) {
		ri := dyn.Resource(sandboxesGVR).Namespace("watch")
		create(t, c, newSandbox("watch", "before", nil))
		list, err := ri.List(testContext(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rv := list.GetResourceVersion()
		if rv == "" || rv == "0" {
			t.Fatalf("list resourceVersion = %q", rv)
		}

		// A watch from the list's revision sees only what happened after it,
		// in order, each event carrying its own revision.
		w, err := ri.Watch(testContext(t), metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer w.Stop()
		create(t, c, newSandbox("watch", "after", map[string]string{"w": "yes"}))
		if err := ri.Delete(testContext(t), "after", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		added := nextEvent(t, w)
		deleted := nextEvent(t, w)
		if added.Type != watch.Added || objName(added) != "after" {
			t.Errorf("first event = %s %s, want ADDED after", added.Type, objName(added))
		}
		if deleted.Type != watch.Deleted || objName(deleted) != "after" {
			t.Errorf("second event = %s %s, want DELETED after", deleted.Type, objName(deleted))
		}
		if !revLess(rv, objRV(added)) || !revLess(objRV(added), objRV(deleted)) {
			t.Errorf("revisions not increasing: list %s, added %s, deleted %s", rv, objRV(added), objRV(deleted))
		}

		// Resuming from the ADDED event's revision replays only the delete.
		w2, err := ri.Watch(testContext(t), metav1.ListOptions{ResourceVersion: objRV(added)})
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Stop()
		if ev := nextEvent(t, w2); ev.Type != watch.Deleted || objName(ev) != "after" {
			t.Errorf("resumed watch first event = %s %s, want DELETED after", ev.Type, objName(ev))
		}

		// resourceVersion 0 starts with the current state.
		w3, err := ri.Watch(testContext(t), metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		defer w3.Stop()
		if ev := nextEvent(t, w3); ev.Type != watch.Added || objName(ev) != "before" {
			t.Errorf("watch from 0 first event = %s %s, want ADDED before", ev.Type, objName(ev))
		}

		// Label selection applies to watch events too.
		w4, err := ri.Watch(testContext(t), metav1.ListOptions{ResourceVersion: rv, LabelSelector: "w=yes"})
		if err != nil {
			t.Fatal(err)
		}
		defer w4.Stop()
		if ev := nextEvent(t, w4); objName(ev) != "after" {
			t.Errorf("selected watch first event = %s %s, want after", ev.Type, objName(ev))
		}

		// A revision the backend has forgotten is 410 Gone.
		ts.backend.forgetHistory()
		_, err = ri.Watch(testContext(t), metav1.ListOptions{ResourceVersion: rv})
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Errorf("watch from forgotten revision: %v, want 410", err)
		}
	})

	t.Run("watch list", func(t *testing.T) {
		create(t, c, newSandbox("wl", "present", nil))
		yes := true
		w, err := dyn.Resource(sandboxesGVR).Namespace("wl").Watch(testContext(t), metav1.ListOptions{
			SendInitialEvents:    &yes,
			AllowWatchBookmarks:  true,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		})
		if err != nil {
			t.Fatalf("watch-list: %v", err)
		}
		defer w.Stop()
		if ev := nextEvent(t, w); ev.Type != watch.Added || objName(ev) != "present" {
			t.Errorf("first event = %s %s, want ADDED present", ev.Type, objName(ev))
		}
		ev := nextEvent(t, w)
		if ev.Type != watch.Bookmark {
			t.Fatalf("second event = %s, want BOOKMARK", ev.Type)
		}
		if u := ev.Object.(*unstructured.Unstructured); u.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
			t.Errorf("bookmark annotations = %v", u.GetAnnotations())
		}
		create(t, c, newSandbox("wl", "later", nil))
		if ev := nextEvent(t, w); ev.Type != watch.Added || objName(ev) != "later" {
			t.Errorf("after bookmark = %s %s, want ADDED later", ev.Type, objName(ev))
		}
	})

	t.Run("table", func(t *testing.T) {
		create(t, c, newSandbox("table", "t1", nil))
		for _, path := range []string{"/apis/agents.x-k8s.io/v1beta1/namespaces/table/sandboxes", "/apis/agents.x-k8s.io/v1beta1/namespaces/table/sandboxes/t1"} {
			body := getRaw(t, ts, path, "application/json;as=Table;v=v1;g=meta.k8s.io", http.StatusOK)
			var table metav1.Table
			if err := json.Unmarshal(body, &table); err != nil {
				t.Fatalf("decode table: %v", err)
			}
			var cols []string
			for _, col := range table.ColumnDefinitions {
				cols = append(cols, col.Name)
			}
			if want := []string{"Name", "Node", "Phase", "Template", "Age", "Deadline"}; !slices.Equal(cols, want) {
				t.Errorf("%s columns = %v, want %v", path, cols, want)
			}
			if len(table.Rows) != 1 {
				t.Fatalf("%s rows = %d, want 1", path, len(table.Rows))
			}
			cells := table.Rows[0].Cells
			want := []interface{}{"t1", "node-a", "Running", "python-3.12", "3d", "2030-01-02T03:04:05Z"}
			if len(cells) != len(want) {
				t.Fatalf("cells = %v", cells)
			}
			for i := range want {
				if cells[i] != want[i] {
					t.Errorf("%s cell %s = %v, want %v", path, cols[i], cells[i], want[i])
				}
			}
		}
	})

	t.Run("subresources", func(t *testing.T) {
		create(t, c, newSandbox("sub", "parent", map[string]string{"app": "p"}))
		var paused agentsv1beta1.Sandbox
		body := postRaw(t, ts, "/apis/agents.x-k8s.io/v1beta1/namespaces/sub/sandboxes/parent/pause",
			`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"SandboxPauseOptions"}`, http.StatusCreated)
		if err := json.Unmarshal(body, &paused); err != nil {
			t.Fatal(err)
		}
		if paused.Kind != agentsv1beta1.SandboxKind || paused.Annotations["sandbox.cocoonstack.io/phase"] != "Hibernated" {
			t.Errorf("pause answered %s %v", paused.Kind, paused.Annotations)
		}

		resumeBody := &subresources.SandboxResumeOptions{TypeMeta: metav1.TypeMeta{APIVersion: "agents.x-k8s.io/v1beta1", Kind: subresources.ResumeOptionsKind}}
		resumed := &agentsv1beta1.Sandbox{}
		if err := c.Post().Namespace("sub").Resource("sandboxes").Name("parent").SubResource("resume").Body(resumeBody).Do(testContext(t)).Into(resumed); err != nil {
			t.Fatalf("resume: %v", err)
		}
		if resumed.Annotations["sandbox.cocoonstack.io/phase"] != "Running" || ts.backend.callCount("resume") != 1 {
			t.Errorf("resume answered %v", resumed.Annotations)
		}

		// Bodies may leave apiVersion and kind out, as kubectl create --raw users do.
		var fork subresources.SandboxForkResult
		body = postRaw(t, ts, "/apis/agents.x-k8s.io/v1beta1/namespaces/sub/sandboxes/parent/fork", `{"count":3,"ttlSeconds":120}`, http.StatusCreated)
		if err := json.Unmarshal(body, &fork); err != nil {
			t.Fatal(err)
		}
		if fork.Kind != subresources.ForkResultKind || fork.Parent != "parent" || len(fork.Children) != 3 {
			t.Errorf("fork answered %+v", fork)
		}
		if got := ts.backend.fork; got != (forkCall{namespace: "sub", name: "parent", count: 3, ttlSeconds: 120}) {
			t.Errorf("backend fork call = %+v", got)
		}
		postRaw(t, ts, "/apis/agents.x-k8s.io/v1beta1/namespaces/sub/sandboxes/parent/fork", `{}`, http.StatusCreated)
		if ts.backend.fork.count != 1 {
			t.Errorf("default fork count = %d, want 1", ts.backend.fork.count)
		}
		postRaw(t, ts, "/apis/agents.x-k8s.io/v1beta1/namespaces/sub/sandboxes/parent/fork", `{"count":1000}`, http.StatusUnprocessableEntity)

		var snap subresources.SandboxSnapshot
		body = postRaw(t, ts, "/apis/agents.x-k8s.io/v1beta1/namespaces/sub/sandboxes/parent/snapshot",
			`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"SandboxSnapshotOptions","name":"before-upgrade"}`, http.StatusCreated)
		if err := json.Unmarshal(body, &snap); err != nil {
			t.Fatal(err)
		}
		if snap.Kind != subresources.SnapshotKind || snap.ID != "ck_0001" || snap.Name != "before-upgrade" || snap.Sandbox != "parent" || snap.Node != "node-a" {
			t.Errorf("snapshot answered %+v", snap)
		}
		if ts.backend.snapshot != "before-upgrade" {
			t.Errorf("backend snapshot name = %q", ts.backend.snapshot)
		}

		// A body of another kind is refused before the backend sees it.
		postRaw(t, ts, "/apis/agents.x-k8s.io/v1beta1/namespaces/sub/sandboxes/parent/snapshot",
			`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"SandboxForkOptions","count":2}`, http.StatusBadRequest)
		postRaw(t, ts, "/apis/agents.x-k8s.io/v1beta1/namespaces/sub/sandboxes/parent/pause?dryRun=All", `{}`, http.StatusBadRequest)
		postRaw(t, ts, "/apis/agents.x-k8s.io/v1beta1/namespaces/sub/sandboxes/missing/pause", `{}`, http.StatusNotFound)
	})

	t.Run("backend errors", func(t *testing.T) {
		create(t, c, newSandbox("errs", "dup", nil))
		err := c.Post().Namespace("errs").Resource("sandboxes").Body(newSandbox("errs", "dup", nil)).Do(testContext(t)).Error()
		if !apierrors.IsAlreadyExists(err) {
			t.Errorf("duplicate create: %v, want 409 AlreadyExists", err)
		}
		err = c.Get().Namespace("errs").Resource("sandboxes").Name("nope").Do(testContext(t)).Error()
		if !apierrors.IsNotFound(err) {
			t.Errorf("missing get: %v, want 404", err)
		}

		ts.backend.failNext("snapshot", apierrors.NewBadRequest("sandbox is not running"))
		postRaw(t, ts, "/apis/agents.x-k8s.io/v1beta1/namespaces/errs/sandboxes/dup/snapshot", `{}`, http.StatusBadRequest)

		ts.backend.failNext("create", apierrors.NewTooManyRequests("no warm capacity for python-3.12", 7))
		resp := do(t, ts, http.MethodPost, "/apis/agents.x-k8s.io/v1beta1/namespaces/errs/sandboxes", "application/json",
			`{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"name":"busy"},"spec":{"podTemplate":{"spec":{"containers":null}}}}`)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" {
			t.Errorf("capacity miss = %d Retry-After %q, want 429 with Retry-After 7", resp.StatusCode, resp.Header.Get("Retry-After"))
		}

		ts.backend.failNext("delete", apierrors.NewConflict(agentsv1beta1.Resource("sandboxes"), "dup", io.ErrUnexpectedEOF))
		err = c.Delete().Namespace("errs").Resource("sandboxes").Name("dup").Do(testContext(t)).Error()
		if !apierrors.IsConflict(err) {
			t.Errorf("conflicting delete: %v, want 409 Conflict", err)
		}
	})

	t.Run("openapi", func(t *testing.T) {
		v2 := string(getRaw(t, ts, "/openapi/v2", "application/json", http.StatusOK))
		v3 := string(getRaw(t, ts, "/openapi/v3/apis/agents.x-k8s.io/v1beta1", "application/json", http.StatusOK))
		for name, doc := range map[string]string{"v2": v2, "v3": v3} {
			for _, want := range []string{
				`"io.k8s.sigs.agent-sandbox.api.v1beta1.Sandbox"`, "podTemplate", "operatingMode",
				`"group":"agents.x-k8s.io","kind":"Sandbox","version":"v1beta1"`,
				`"io.x-k8s.agents.v1beta1.SandboxForkOptions"`, "ttlSeconds",
				`"io.x-k8s.agents.v1beta1.SandboxSnapshotOptions"`,
				`"io.x-k8s.agents.v1beta1.SandboxForkResult"`,
				`"group":"agents.x-k8s.io","kind":"SandboxForkOptions","version":"v1beta1"`,
				"/namespaces/{namespace}/sandboxes/{name}/fork",
			} {
				if !strings.Contains(doc, want) {
					t.Errorf("openapi %s lacks %q", name, want)
				}
			}
		}
	})

	t.Run("health", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/livez", "/readyz"} {
			if body := getRaw(t, ts, path, "text/plain", http.StatusOK); string(body) != "ok" {
				t.Errorf("%s = %q", path, body)
			}
		}
		getRaw(t, ts, "/metrics", "text/plain", http.StatusOK)
	})
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed early")
		}
		if ev.Type == watch.Error {
			t.Fatalf("watch error event: %v", apierrors.FromObject(ev.Object))
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event within 30s")
	}
	return watch.Event{}
}

func objName(ev watch.Event) string {
	if u, ok := ev.Object.(*unstructured.Unstructured); ok {
		return u.GetName()
	}
	return ""
}

func objRV(ev watch.Event) string {
	if u, ok := ev.Object.(*unstructured.Unstructured); ok {
		return u.GetResourceVersion()
	}
	return ""
}

func revLess(a, b string) bool {
	return len(a) < len(b) || (len(a) == len(b) && a < b)
}

func itemNames(list *unstructured.UnstructuredList) []string {
	var out []string
	for _, it := range list.Items {
		out = append(out, it.GetName())
	}
	return out
}

func itemKeys(list *unstructured.UnstructuredList) []string {
	var out []string
	for _, it := range list.Items {
		out = append(out, it.GetNamespace()+"/"+it.GetName())
	}
	slices.Sort(out)
	return out
}

func do(t *testing.T, ts *testServer, method, path, contentType, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), method, ts.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", contentType)
	} else {
		req.Header.Set("Accept", contentType)
	}
	resp, err := ts.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func getRaw(t *testing.T, ts *testServer, path, accept string, wantCode int) []byte {
	t.Helper()
	resp := do(t, ts, http.MethodGet, path, accept, "")
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != wantCode {
		t.Fatalf("GET %s = %d %s, want %d", path, resp.StatusCode, body, wantCode)
	}
	return body
}

func postRaw(t *testing.T, ts *testServer, path, body string, wantCode int) []byte {
	t.Helper()
	resp := do(t, ts, http.MethodPost, path, "application/json", body)
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != wantCode {
		t.Errorf("POST %s = %d %s, want %d", path, resp.StatusCode, out, wantCode)
	}
	return out
}
