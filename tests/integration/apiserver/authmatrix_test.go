package apiserver_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/api/subresources"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/apiserverenv"
)

// The matrix's namespaces: A holds the sandbox every row acts on, B is the
// only namespace where the namespaced column's ServiceAccount may do
// anything.
const (
	matrixNamespaceA = "authmatrix-a"
	matrixNamespaceB = "authmatrix-b"
	matrixTarget     = "target"
	matrixSA         = "sandbox-admin-b"
)

// matrixCellTimeout bounds one cell's request; a watch is closed as soon
// as its answer's status line arrives.
const matrixCellTimeout = 30 * time.Second

// matrixRow is one request form the aggregated API may be asked: a verb on
// a resource or subresource of a group version, across all namespaces for
// a collection verb when allNamespaces. served says whether discovery lists
// the verb; the others are verbs no route serves, asked anyway so that a
// route discovery forgot to mention cannot go unguarded.
type matrixRow struct {
	gv            schema.GroupVersion
	resource      string // "sandboxes" or "sandboxes/pause"
	namespaced    bool
	verb          string
	allNamespaces bool
	served        bool
}

func (r matrixRow) String() string {
	s := fmt.Sprintf("%s %s %s", r.gv, r.resource, r.verb)
	if r.allNamespaces {
		s += " (all namespaces)"
	}
	if !r.served {
		s += " (not served)"
	}
	return s
}

// ruleKey is what matrixRules is indexed by; a row across all namespaces
// shares its namespaced twin's rule.
func (r matrixRow) ruleKey() string { return r.gv.String() + " " + r.resource + " " + r.verb }

// collectionVerbs address the collection rather than one object.
var collectionVerbs = []string{"list", "watch", "deletecollection"}

// The verbs a row may be generated for. Discovery's verbs come from this
// list too: anything else (proxy, a verb invented later) has no request
// form here and fails the test.
var (
	resourceVerbs    = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	subresourceVerbs = []string{"get", "create", "update", "patch", "delete"}
)

// matrixRequest is one cell's HTTP request, before its credential.
type matrixRequest struct {
	method, path string
	query        url.Values
	contentType  string
	body         []byte
	watch        bool
}

// request is the row's HTTP request against the object name in namespace
// (or the collection), with body.
func (r matrixRow) request(namespace, name string, body []byte) (matrixRequest, error) {
	res, sub, isSub := strings.Cut(r.resource, "/")
	collection := "/apis/" + r.gv.Group + "/" + r.gv.Version
	if r.namespaced && !r.allNamespaces {
		collection += "/namespaces/" + namespace
	}
	collection += "/" + res
	object := collection + "/" + name
	if isSub {
		object += "/" + sub
	}
	if isSub && slices.Contains(collectionVerbs, r.verb) {
		return matrixRequest{}, fmt.Errorf("%s: a subresource has no collection to %s", r, r.verb)
	}
	req := matrixRequest{query: url.Values{}, body: body, contentType: "application/json"}
	switch r.verb {
	case "get":
		req.method, req.path = http.MethodGet, object
	case "list":
		req.method, req.path = http.MethodGet, collection
	case "watch":
		req.method, req.path, req.watch = http.MethodGet, collection, true
		req.query.Set("watch", "true")
	case "create":
		req.method, req.path = http.MethodPost, collection
		if isSub {
			req.path = object
		}
	case "update":
		req.method, req.path = http.MethodPut, object
	case "patch":
		req.method, req.path, req.contentType = http.MethodPatch, object, "application/merge-patch+json"
	case "delete":
		req.method, req.path = http.MethodDelete, object
	case "deletecollection":
		req.method, req.path = http.MethodDelete, collection
	default:
		return matrixRequest{}, fmt.Errorf("%s: no request form for verb %q", r, r.verb)
	}
	return req, nil
}

// matrixRule is how a served row is asked and what the admin, whom RBAC
// lets do anything, must be answered: the verb's success, or the answer
// the API documents for it.
type matrixRule struct {
	// body is the request body for a cell of the named column (nil: none).
	body func(tb testing.TB, column string) []byte
	// adminWant are the statuses the admin may get.
	adminWant []int
	// adminTarget, when set, makes the object the admin's request acts on
	// and returns its name: a verb that ends a sandbox must not spend the
	// one the other rows use.
	adminTarget func(ctx context.Context, tb testing.TB, e *testEnv) string
	// after runs on any 2xx answer, the admin's or, should authorization
	// fail, another column's: it puts the target back or schedules the
	// deletion of what the request made.
	after func(ctx context.Context, tb testing.TB, e *testEnv, raw []byte)
}

// createdName is the sandbox a column's create cell asks for, distinct per
// column so that an intruder's success shows which column it was.
func createdName(column string) string { return "created-by-" + column }

// matrixRules holds a rule for every (resource, verb) discovery is
// expected to list. A row with no rule fails the test: a new subresource
// or verb gets a rule, and so a positive control, before it ships.
func matrixRules() map[string]matrixRule {
	gv := schema.GroupVersion{Group: group, Version: version}.String()
	empty := func(testing.TB, string) []byte { return []byte(`{}`) }
	ok := []int{http.StatusOK}
	created := []int{http.StatusCreated}
	return map[string]matrixRule{
		gv + " sandboxes get":   {adminWant: ok},
		gv + " sandboxes list":  {adminWant: ok},
		gv + " sandboxes watch": {adminWant: ok},
		gv + " sandboxes create": {
			body: func(tb testing.TB, column string) []byte {
				return sandboxJSON(tb, newSandbox(matrixNamespaceA, createdName(column), withTemplate(templateBase)))
			},
			adminWant: created,
			after: func(_ context.Context, tb testing.TB, e *testEnv, raw []byte) {
				var sb struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
				}
				if err := json.Unmarshal(raw, &sb); err != nil || sb.Metadata.Name == "" {
					tb.Errorf("create answered %s (%v), want a sandbox", raw, err)
					return
				}
				e.deleteAtCleanup(tb, matrixNamespaceA, sb.Metadata.Name)
			},
		},
		gv + " sandboxes delete": {
			adminWant: ok,
			adminTarget: func(ctx context.Context, tb testing.TB, e *testEnv) string {
				const name = "admin-deletes"
				e.mustCreate(ctx, tb, newSandbox(matrixNamespaceA, name, withTemplate(templateBase)))
				return name
			},
		},
		gv + " sandboxes/pause create": {
			body:      empty,
			adminWant: created,
			// The rows after this one expect a running sandbox.
			after: func(ctx context.Context, tb testing.TB, e *testEnv, _ []byte) {
				var out map[string]any
				if err := e.postSubresource(ctx, matrixNamespaceA, matrixTarget, "resume", map[string]any{}, &out); err != nil {
					tb.Errorf("resume the target after pause: %v", err)
				}
			},
		},
		gv + " sandboxes/resume create": {body: empty, adminWant: created},
		gv + " sandboxes/fork create": {
			body: func(tb testing.TB, _ string) []byte {
				return mustJSON(tb, subresources.SandboxForkOptions{TypeMeta: optionsMeta("SandboxForkOptions"), Count: 1, TTLSeconds: 600})
			},
			adminWant: created,
			after: func(_ context.Context, tb testing.TB, e *testEnv, raw []byte) {
				var res subresources.SandboxForkResult
				if err := json.Unmarshal(raw, &res); err != nil || len(res.Children) != 1 {
					tb.Errorf("fork answered %s (%v), want one child", raw, err)
					return
				}
				for _, c := range res.Children {
					e.deleteAtCleanup(tb, c.Namespace, c.Name)
				}
			},
		},
		gv + " sandboxes/snapshot create": {
			body: func(tb testing.TB, _ string) []byte {
				return mustJSON(tb, subresources.SandboxSnapshotOptions{TypeMeta: optionsMeta("SandboxSnapshotOptions"), Name: "authmatrix"})
			},
			adminWant: created,
		},
	}
}

// notServed is what the admin must get for a verb no route serves: the
// generic apiserver's 405 for a path it routes with other methods, or 404.
var notServed = []int{http.StatusMethodNotAllowed, http.StatusNotFound}

// unservedBody is a well-formed body for a verb no route serves, so that a
// route that did serve it would act rather than refuse the body.
func unservedBody(tb testing.TB, r matrixRow, column string) []byte {
	switch r.verb {
	case "update":
		return sandboxJSON(tb, newSandbox(matrixNamespaceA, matrixTarget, withImage(imagePython), withLabel("updated-by", column)))
	case "patch":
		return mustJSON(tb, map[string]any{"metadata": map[string]any{"labels": map[string]string{"patched-by": column}}})
	case "create":
		return []byte(`{}`)
	}
	return nil
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatalf("encode %T: %v", v, err)
	}
	return b
}

func sandboxJSON(tb testing.TB, sb *agentsv1beta1.Sandbox) []byte {
	tb.Helper()
	return mustJSON(tb, toUnstructured(tb, sb).Object)
}

// matrixColumn is one credential.
type matrixColumn struct {
	name   string
	client *http.Client
	// want are the statuses every row must get; nil for the admin, whose
	// answer is each row's rule's.
	want []int
}

// fleetState is what a refused request must not change: the fleet's live
// claims, the target's place and phase on its node, and the nodes' counts
// of changes (claims, releases, hibernates, wakes, forks, checkpoints...).
type fleetState struct {
	claimed     int
	targetHeld  bool
	targetPhase string
	counters    []node.Counters
}

func (e *testEnv) fleetState(targetNode int, targetID string) fleetState {
	en, held := e.entry(targetNode, targetID)
	s := fleetState{claimed: e.claimed(), targetHeld: held, targetPhase: en.Phase}
	for _, n := range e.fleet.Nodes() {
		c := n.Counters()
		// Reads, and reaping, which a node's clock drives, are not changes
		// a caller makes.
		c.SandboxGets, c.OwnerLookups, c.RelayRequests, c.Relays, c.Reaps = 0, 0, 0, 0, 0
		s.counters = append(s.counters, c)
	}
	return s
}

func (s fleetState) equal(o fleetState) bool {
	return s.claimed == o.claimed && s.targetHeld == o.targetHeld && s.targetPhase == o.targetPhase && slices.Equal(s.counters, o.counters)
}

// TestAuthMatrix asks every route the sandbox-apiserver serves, as its
// discovery lists them, with every kind of credential a caller may hold,
// through the kube-apiserver: no credential, a token no one issued, a
// ServiceAccount that may do anything to sandboxes but only in another
// namespace, a sandbox's own sandboxd claim token and the fleet's sandboxd
// root token (credentials of the data plane, which must mean nothing to
// the control plane), and the admin as the positive control. Verbs a
// resource does not serve are asked too. Every cell is asserted, and no
// refused request may change the target sandbox or the fleet.
func TestAuthMatrix(t *testing.T) {
	e := sharedEnv(t)
	// A few hundred requests, some of them claims: more than one wait's
	// worth on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitTimeout)
	t.Cleanup(cancel)

	e.ensureNamespace(ctx, t, matrixNamespaceA)
	e.ensureNamespace(ctx, t, matrixNamespaceB)
	// imagePython only the big nodes serve: the admin's fork of the target
	// must find room on its node, which the small one may not have.
	target := e.mustCreate(ctx, t, newSandbox(matrixNamespaceA, matrixTarget, withImage(imagePython)))
	targetNode, targetID := e.nodeIndex(target.Status.NodeName), target.Annotations[sandbox.AnnotationID]
	if targetNode < 0 || targetID == "" {
		t.Fatalf("target on node %q (index %d) with id %q", target.Status.NodeName, targetNode, targetID)
	}

	rows := discoverMatrixRows(ctx, t, e)
	rules := matrixRules()

	adminCfg := e.cluster.AdminConfig()
	columns := []matrixColumn{
		{name: "anonymous", client: matrixHTTPClient(t, rest.AnonymousClientConfig(adminCfg)), want: []int{anonymousStatus(ctx, t, adminCfg)}},
		{name: "wrong-token", client: matrixHTTPClient(t, withBearer(adminCfg, randomToken(t))), want: []int{http.StatusUnauthorized}},
		{name: "sa-in-b", client: matrixHTTPClient(t, withBearer(adminCfg, namespaceBToken(ctx, t, e, rows, rules))), want: []int{http.StatusForbidden}},
		{name: "claim-token", client: matrixHTTPClient(t, withBearer(adminCfg, claimToken(ctx, t, e, targetNode, targetID))), want: []int{http.StatusUnauthorized}},
		{name: "sandboxd-root", client: matrixHTTPClient(t, withBearer(adminCfg, sandboxdRootToken(t, e))), want: []int{http.StatusUnauthorized}},
		{name: "admin", client: matrixHTTPClient(t, adminCfg)},
	}

	var cells, unexpected, unruled int
	// answers[row][column] is each cell's status, for the table logged at
	// the end.
	answers := make([][]int, len(rows))
	for i := range answers {
		answers[i] = make([]int, len(columns))
	}
	for _, r := range rows {
		if _, ok := rules[r.ruleKey()]; r.served && !ok {
			unruled++
			t.Errorf("discovery lists %s, which the matrix has no rule for: add one (with the admin's answer) to matrixRules", r)
		}
	}

	before := e.fleetState(targetNode, targetID)
	for ci, col := range columns {
		for ri, r := range rows {
			rule, hasRule := rules[r.ruleKey()]
			if col.want == nil && r.served && !hasRule {
				continue // reported above: there is no answer to expect
			}
			var body []byte
			switch {
			case !r.served:
				body = unservedBody(t, r, col.name)
			case rule.body != nil:
				body = rule.body(t, col.name)
			}
			name := matrixTarget
			want := col.want
			if col.want == nil {
				want = notServed
				if r.served {
					want = rule.adminWant
					if rule.adminTarget != nil {
						name = rule.adminTarget(ctx, t, e)
					}
				}
			}
			req, err := r.request(matrixNamespaceA, name, body)
			if err != nil {
				t.Error(err)
				continue
			}
			code, raw, err := sendMatrixRequest(ctx, col.client, adminCfg.Host, req)
			cells++
			answers[ri][ci] = code
			switch {
			case err != nil:
				unexpected++
				t.Errorf("%s as %s: %v", r, col.name, err)
			case !slices.Contains(want, code):
				unexpected++
				t.Errorf("%s as %s: %s %s answered %d, want one of %v: %s", r, col.name, req.method, req.path, code, want, truncate(raw, 300))
			}
			if err == nil && code/100 == 2 && r.served && rule.after != nil {
				rule.after(ctx, t, e, raw)
			}
			if col.want != nil {
				if now := e.fleetState(targetNode, targetID); !now.equal(before) {
					t.Errorf("%s as %s (answered %d) changed the fleet: before %+v, after %+v", r, col.name, code, before, now)
					before = now
				}
			}
		}
		if col.want != nil {
			// The target is still there as the API sees it, after every
			// refused verb of this credential.
			if _, err := e.getSandbox(ctx, t, matrixNamespaceA, matrixTarget); err != nil {
				t.Errorf("after the %s column: get %s/%s: %v", col.name, matrixNamespaceA, matrixTarget, err)
			}
		}
	}

	served := 0
	for _, r := range rows {
		if r.served {
			served++
		}
	}
	logMatrix(t, rows, columns, answers)
	t.Logf("auth matrix: %d rows (%d served, %d not served) x %d columns, %d cells asserted, %d unexpected, %d served rows without a rule",
		len(rows), served, len(rows)-served, len(columns), cells, unexpected, unruled)
}

// logMatrix logs the answers as a table, a row per line (0: not asked).
func logMatrix(tb testing.TB, rows []matrixRow, columns []matrixColumn, answers [][]int) {
	tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%-80s", "row")
	for _, c := range columns {
		fmt.Fprintf(&b, " %14s", c.name)
	}
	for ri, r := range rows {
		fmt.Fprintf(&b, "\n%-80s", r)
		for ci := range columns {
			fmt.Fprintf(&b, " %14d", answers[ri][ci])
		}
	}
	tb.Logf("answers:\n%s", b.String())
}

// discoverMatrixRows lists every group version whose APIService routes to
// the sandbox-apiserver's Service, asks discovery for each one's resources,
// and makes a row of every verb each lists, and of every verb it does not.
func discoverMatrixRows(ctx context.Context, tb testing.TB, e *testEnv) []matrixRow {
	tb.Helper()
	apiservices, err := e.cluster.Dynamic().Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}).
		List(ctx, metav1.ListOptions{})
	if err != nil {
		tb.Fatalf("list APIServices: %v", err)
	}
	var gvs []schema.GroupVersion
	for _, as := range apiservices.Items {
		spec, _ := as.Object["spec"].(map[string]any)
		svc, _ := spec["service"].(map[string]any)
		if svc["namespace"] != apiserverenv.Namespace || svc["name"] != apiserverenv.ServiceName {
			continue // served by the kube-apiserver itself, or by another server
		}
		g, _ := spec["group"].(string)
		v, _ := spec["version"].(string)
		gvs = append(gvs, schema.GroupVersion{Group: g, Version: v})
	}
	if !slices.Contains(gvs, schema.GroupVersion{Group: group, Version: version}) {
		tb.Fatalf("APIServices routed to %s/%s: %v, want %s/%s among them", apiserverenv.Namespace, apiserverenv.ServiceName, gvs, group, version)
	}

	var rows []matrixRow
	for _, gv := range gvs {
		list, err := e.cluster.Clientset().Discovery().ServerResourcesForGroupVersion(gv.String())
		if err != nil {
			tb.Fatalf("discovery of %s: %v", gv, err)
		}
		for _, res := range list.APIResources {
			candidates := resourceVerbs
			if strings.Contains(res.Name, "/") {
				candidates = subresourceVerbs
			}
			for _, v := range res.Verbs {
				if !slices.Contains(candidates, v) {
					tb.Errorf("discovery lists %s %s %s, a verb the matrix has no request form for", gv, res.Name, v)
				}
			}
			for _, v := range candidates {
				row := matrixRow{gv: gv, resource: res.Name, namespaced: res.Namespaced, verb: v, served: slices.Contains(res.Verbs, v)}
				rows = append(rows, row)
				if res.Namespaced && slices.Contains(collectionVerbs, v) {
					row.allNamespaces = true
					rows = append(rows, row)
				}
			}
		}
	}
	for _, r := range rows {
		if r.served {
			tb.Logf("discovered row: %s", r)
		}
	}
	return rows
}

// sendMatrixRequest sends req with client to the kube-apiserver at host and
// returns the status and the start of the body. A watch is closed as soon
// as it is answered.
func sendMatrixRequest(ctx context.Context, client *http.Client, host string, req matrixRequest) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, matrixCellTimeout)
	defer cancel()
	u := host + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		return 0, nil, err
	}
	hr.Header.Set("Accept", "application/json")
	if req.body != nil {
		hr.Header.Set("Content-Type", req.contentType)
	}
	resp, err := client.Do(hr)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if req.watch && resp.StatusCode == http.StatusOK {
		return resp.StatusCode, nil, nil
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, raw, err
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// matrixHTTPClient is client-go's HTTP client for cfg: its TLS settings
// and bearer token, nothing else (no retries, no decoding), so each cell
// is exactly one request and its status is what the server said.
func matrixHTTPClient(tb testing.TB, cfg *rest.Config) *http.Client {
	tb.Helper()
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		tb.Fatalf("HTTP client: %v", err)
	}
	return c
}

func withBearer(cfg *rest.Config, token string) *rest.Config {
	c := rest.AnonymousClientConfig(cfg)
	c.BearerToken = token
	return c
}

// randomToken is shaped like the cluster's tokens but issued to no one.
func randomToken(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// anonymousStatus is what a request with no credential gets from this
// cluster for a built-in resource: 403 when anonymous requests are
// authenticated as system:anonymous (and refused by RBAC), 401 when
// anonymous authentication is off. The aggregated API must answer alike.
func anonymousStatus(ctx context.Context, tb testing.TB, adminCfg *rest.Config) int {
	tb.Helper()
	code, raw, err := sendMatrixRequest(ctx, matrixHTTPClient(tb, rest.AnonymousClientConfig(adminCfg)), adminCfg.Host,
		matrixRequest{method: http.MethodGet, path: "/api/v1/namespaces/" + matrixNamespaceA + "/secrets"})
	if err != nil {
		tb.Fatalf("anonymous probe: %v", err)
	}
	if code != http.StatusForbidden && code != http.StatusUnauthorized {
		tb.Fatalf("anonymous list of secrets answered %d: %s", code, truncate(raw, 300))
	}
	tb.Logf("anonymous requests are answered %d by the cluster", code)
	return code
}

// namespaceBToken makes a ServiceAccount in namespace B that a Role lets do
// every verb to every resource and subresource discovery lists (RBAC has
// no "sandboxes/*": each subresource is named), waits until the grant is
// in force, and returns a token for it.
func namespaceBToken(ctx context.Context, tb testing.TB, e *testEnv, rows []matrixRow, rules map[string]matrixRule) string {
	tb.Helper()
	admin := e.cluster.Clientset()
	rule := rbacv1.PolicyRule{Verbs: []string{rbacv1.VerbAll}}
	for _, r := range rows {
		if !slices.Contains(rule.APIGroups, r.gv.Group) {
			rule.APIGroups = append(rule.APIGroups, r.gv.Group)
		}
		if !slices.Contains(rule.Resources, r.resource) {
			rule.Resources = append(rule.Resources, r.resource)
		}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: matrixSA, Namespace: matrixNamespaceB}}
	if _, err := admin.CoreV1().ServiceAccounts(matrixNamespaceB).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("create ServiceAccount: %v", err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "sandboxes-all", Namespace: matrixNamespaceB},
		Rules:      []rbacv1.PolicyRule{rule},
	}
	if _, err := admin.RbacV1().Roles(matrixNamespaceB).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("create Role: %v", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "sandboxes-all", Namespace: matrixNamespaceB},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: matrixSA, Namespace: matrixNamespaceB}},
	}
	if _, err := admin.RbacV1().RoleBindings(matrixNamespaceB).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("create RoleBinding: %v", err)
	}
	expiry := int64(time.Hour / time.Second)
	tr, err := admin.CoreV1().ServiceAccounts(matrixNamespaceB).CreateToken(ctx, matrixSA,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("token for %s/%s: %v", matrixNamespaceB, matrixSA, err)
	}

	// The positive control for this column: in B the grant works, so the
	// 403s in A are the namespace's doing, not a dead token's or a
	// missing rule's. Lists are answered, and each served subresource verb
	// on a sandbox that does not exist reaches the server, which answers
	// 404 (and claims nothing). RBAC learns of bindings from an informer,
	// and the sandbox-apiserver caches its delegated decisions, so the
	// grant lands shortly.
	cfg := withBearer(e.cluster.AdminConfig(), tr.Status.Token)
	client := matrixHTTPClient(tb, cfg)
	type probe struct {
		req  matrixRequest
		want int
	}
	var probes []probe
	for _, r := range rows {
		isSub := strings.Contains(r.resource, "/")
		if !r.served || r.allNamespaces || !(r.verb == "list" || isSub) {
			continue
		}
		var body []byte
		if rl, ok := rules[r.ruleKey()]; ok && rl.body != nil {
			body = rl.body(tb, "sa-in-b")
		}
		req, err := r.request(matrixNamespaceB, "absent", body)
		if err != nil {
			tb.Fatal(err)
		}
		want := http.StatusNotFound
		if r.verb == "list" {
			want = http.StatusOK
		}
		probes = append(probes, probe{req, want})
	}
	for _, p := range probes {
		poll.UntilNil(tb, fmt.Sprintf("%s/%s in its own namespace: %s %s to answer %d",
			matrixNamespaceB, matrixSA, p.req.method, p.req.path, p.want), func() error {
			code, raw, err := sendMatrixRequest(ctx, client, cfg.Host, p.req)
			if err != nil {
				return err
			}
			if code != p.want {
				return fmt.Errorf("last answer %d %s", code, truncate(raw, 300))
			}
			return nil
		})
	}
	tb.Logf("%s/%s is granted %v on %v in %s: %d positive probes there passed", matrixNamespaceB, matrixSA, rule.Verbs, rule.Resources, matrixNamespaceB, len(probes))
	return tr.Status.Token
}

// sandboxdRootToken is the token the sandbox-apiserver presents to every
// node. startEnv keeps it only in the file it gives the server
// (apiserverenv.WriteSandboxdToken), so it is read back from there.
func sandboxdRootToken(tb testing.TB, e *testEnv) string {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(e.dir, "sandboxd-token"))
	if err != nil {
		tb.Fatalf("read the sandboxd root token: %v", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		tb.Fatal("the sandboxd root token file is empty")
	}
	return token
}

// claimToken reads the sandbox's own claim token from its node with the
// root token, as the e2b surface does, and checks the node takes it as the
// sandbox's credential: the column then holds a live data-plane secret.
func claimToken(ctx context.Context, tb testing.TB, e *testEnv, nodeIdx int, id string) string {
	tb.Helper()
	root := sandboxdRootToken(tb, e)
	c, err := sandboxd.New(e.fleet.Node(nodeIdx).Addr(), sandboxd.WithToken(root))
	if err != nil {
		tb.Fatal(err)
	}
	sb, err := c.Sandbox(ctx, id)
	if err != nil {
		tb.Fatalf("read sandbox %s from its node: %v", id, err)
	}
	if sb.Token == "" || sb.Token == root {
		tb.Fatalf("sandbox %s's claim token is empty or the root token", id)
	}
	if _, err := c.As(sb.Token).Owner(ctx, id); err != nil {
		tb.Fatalf("the node refuses sandbox %s's own claim token: %v", id, err)
	}
	return sb.Token
}
