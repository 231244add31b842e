package warmpool_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// sandboxesPath is the Sandbox collection of a namespace on a replica.
func sandboxesPath(ns string) string {
	return "/apis/" + agentsv1beta1.GroupVersion.Group + "/" + agentsv1beta1.GroupVersion.Version +
		"/namespaces/" + url.PathEscape(ns) + "/sandboxes"
}

// replicaAPITimeout bounds one request to a replica. A create is one
// claim on one node, well under a second even on a loaded machine; a
// request caught by a SIGKILL fails at once with a reset, not by timeout.
const replicaAPITimeout = 30 * time.Second

// replicaAPI talks to one replica's Sandbox API directly on its secure
// port, bypassing the aggregator, so a test decides which replica serves
// each request. It speaks HTTP/2 as client-go does: one connection
// carries every concurrent request, so the connections a replica holds
// for this client do not grow with the test's concurrency.
type replicaAPI struct {
	r         *replica
	bearer    string
	transport *http.Transport
	client    *http.Client
}

// newReplicaAPI trusts the self-signed serving certificate r wrote to its
// cert dir (so r must be ready) and authenticates with bearer.
func newReplicaAPI(t testing.TB, r *replica, bearer string) *replicaAPI {
	t.Helper()
	certPath := filepath.Join(filepath.Dir(r.logPath), "certs", "apiserver.crt")
	pemData, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatalf("%s: read the serving certificate: %v", r.name, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemData) {
		t.Fatalf("%s: %s holds no certificate", r.name, certPath)
	}
	transport := &http.Transport{
		TLSClientConfig:   &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots},
		ForceAttemptHTTP2: true,
	}
	a := &replicaAPI{r: r, bearer: bearer, transport: transport, client: &http.Client{Transport: transport, Timeout: replicaAPITimeout}}
	t.Cleanup(transport.CloseIdleConnections)
	return a
}

// reply is one answer of a replica: its status code, the object a
// success carried, or the Status a failure carried (nil when the body was
// not a Status, e.g. a proxy's plain-text error).
type reply[T any] struct {
	Code   int
	Object *T
	Status *metav1.Status
}

// String describes the answer for failure messages: the code, and the
// Status reason and message when there is one.
func (r reply[T]) String() string {
	if r.Status == nil {
		return strconv.Itoa(r.Code)
	}
	return fmt.Sprintf("%d %s: %s", r.Code, r.Status.Reason, r.Status.Message)
}

// alreadyExists is a 409 whose Status says the name is taken.
func (r reply[T]) alreadyExists() bool {
	return r.Code == http.StatusConflict && r.Status != nil && r.Status.Reason == metav1.StatusReasonAlreadyExists
}

// do sends one request and decodes the answer. The error is for requests
// that got no HTTP answer at all (refused, reset, timed out) or an
// undecodable success body; any status code is a reply.
func do[T any](ctx context.Context, a *replicaAPI, method, path string, body any) (reply[T], error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return reply[T]{}, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+a.r.addr+path, rd)
	if err != nil {
		return reply[T]{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+a.bearer)
	resp, err := a.client.Do(req)
	if err != nil {
		return reply[T]{}, fmt.Errorf("%s %s at %s: %w", method, path, a.r.name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply[T]{}, fmt.Errorf("%s %s at %s: read the %s answer: %w", method, path, a.r.name, resp.Status, err)
	}
	out := reply[T]{Code: resp.StatusCode}
	if resp.StatusCode/100 == 2 {
		var obj T
		if err := json.Unmarshal(data, &obj); err != nil {
			return out, fmt.Errorf("%s %s at %s: decode the %s answer: %w", method, path, a.r.name, resp.Status, err)
		}
		out.Object = &obj
		return out, nil
	}
	var st metav1.Status
	if json.Unmarshal(data, &st) == nil && st.Kind == "Status" {
		out.Status = &st
	}
	return out, nil
}

// testSandbox is a Sandbox named ns/name that claims from the pool keyed
// by image (the pod template's first image names the pool template).
func testSandbox(ns, name, image string) *agentsv1beta1.Sandbox {
	return &agentsv1beta1.Sandbox{
		TypeMeta:   metav1.TypeMeta{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: agentsv1beta1.SandboxKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{PodTemplate: agentsv1beta1.PodTemplate{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}},
		}}},
	}
}

func (a *replicaAPI) create(ctx context.Context, sb *agentsv1beta1.Sandbox) (reply[agentsv1beta1.Sandbox], error) {
	return do[agentsv1beta1.Sandbox](ctx, a, http.MethodPost, sandboxesPath(sb.Namespace), sb)
}

func (a *replicaAPI) get(ctx context.Context, ns, name string) (reply[agentsv1beta1.Sandbox], error) {
	return do[agentsv1beta1.Sandbox](ctx, a, http.MethodGet, sandboxesPath(ns)+"/"+url.PathEscape(name), nil)
}

func (a *replicaAPI) list(ctx context.Context, ns string) (reply[agentsv1beta1.SandboxList], error) {
	return do[agentsv1beta1.SandboxList](ctx, a, http.MethodGet, sandboxesPath(ns), nil)
}

func (a *replicaAPI) delete(ctx context.Context, ns, name string) (reply[agentsv1beta1.Sandbox], error) {
	return do[agentsv1beta1.Sandbox](ctx, a, http.MethodDelete, sandboxesPath(ns)+"/"+url.PathEscape(name), nil)
}

// delete answers the deleted Sandbox (the registry returns the object, not
// a Status, on success).
// goroutines reads go_goroutines from the replica's /metrics.
func (a *replicaAPI) goroutines(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+a.r.addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+a.bearer)
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("metrics of %s: %w", a.r.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("metrics of %s: %s", a.r.name, resp.Status)
	}
	n, err := testbin.Goroutines(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("metrics of %s: %w", a.r.name, err)
	}
	return n, nil
}

// openFDs counts the replica process's open file descriptors.
func openFDs(p *testbin.Process) (int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(p.Pid()) + "/fd")
	if err != nil {
		return 0, fmt.Errorf("open descriptors of pid %d: %w", p.Pid(), err)
	}
	return len(ents), nil
}

// claimsIn counts, over the fleet's live nodes, the claimed VMs whose
// claim reference is in namespace ns, by sandbox name, with the claim ids.
func claimsIn(f *simfleet.Fleet, ns string) map[string][]string {
	out := map[string][]string{}
	for i, n := range f.Nodes() {
		if !f.Alive(i) {
			continue
		}
		for _, en := range n.Snapshot().Entries {
			if refNS, name, ok := strings.Cut(en.ClaimRef, "/"); ok && refNS == ns {
				out[name] = append(out[name], en.ID)
			}
		}
	}
	return out
}

// replicaPair is two sandbox-apiserver replicas of one cluster, both
// ready, with their Lease identities read.
type replicaPair [2]*replica

// startReplicaPair starts two replicas with the warm-pool driver on (as
// TestReplicasFailover does), their Lease and their POD_NAMESPACE in
// systemNS, and waits until both are ready.
func startReplicaPair(t *testing.T, e *env, systemNS string, extraArgs ...func(i int) []string) replicaPair {
	t.Helper()
	binary, err := testbin.Locate(apiserverBinaryEnv, apiserverBinaryPkg, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "sandboxd-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Each replica takes the other's writes on a port of its own, as the
	// chart's replicas do on theirs (--peer-service there).
	var peerAddrs [2]string
	for i := range peerAddrs {
		port, err := freeLoopbackPort()
		if err != nil {
			t.Fatal(err)
		}
		peerAddrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	var pair replicaPair
	for i := range pair {
		args := []string{"--peer-bind-address=" + peerAddrs[i], "--peers=" + peerAddrs[1-i]}
		for _, extra := range extraArgs {
			args = append(args, extra(i)...)
		}
		pair[i] = startReplica(t, binary, filepath.Join(dir, fmt.Sprintf("replica-%d", i)), systemNS, e.c.Kubeconfig(), tokenFile, args...)
	}
	for _, r := range pair {
		eventually(t, r.name+" is ready", func() (bool, string) {
			if err := r.ExitErr(); err != nil {
				return false, err.Error()
			}
			if err := r.get("/readyz", ""); err != nil {
				return false, err.Error()
			}
			return true, ""
		})
		eventually(t, r.name+" logs its lease identity", func() (bool, string) {
			id, err := r.identity()
			if err != nil {
				return false, err.Error()
			}
			r.id = id
			return true, ""
		})
	}
	return pair
}

// leaderAndFollower waits until the warm-pool Lease in systemNS names one
// of the pair and returns that one and the other.
func (p replicaPair) leaderAndFollower(t *testing.T, e *env, systemNS string) (leader, follower *replica) {
	t.Helper()
	eventually(t, "the lease names a replica", func() (bool, string) {
		h := leaseHolder(e, systemNS)
		for i, r := range p {
			if h == r.id {
				leader, follower = r, p[1-i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("holder %q, replicas %q and %q", h, p[0].id, p[1].id)
	})
	return leader, follower
}

// createUntilServed creates ns/name at a until it answers 201: the first
// creates after start may find no warm capacity yet, because the replica's
// inventory view has not seen the pool the driver placed.
func createUntilServed(t *testing.T, a *replicaAPI, ns, name, image string) *agentsv1beta1.Sandbox {
	t.Helper()
	var created *agentsv1beta1.Sandbox
	eventually(t, a.r.name+" creates "+ns+"/"+name, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), replicaAPITimeout)
		defer cancel()
		rep, err := a.create(ctx, testSandbox(ns, name, image))
		if err != nil {
			return false, err.Error()
		}
		if rep.Code != http.StatusCreated {
			return false, rep.String()
		}
		created = rep.Object
		return true, ""
	})
	return created
}

// goroutineStacks reads the replica's goroutine profile
// (/debug/pprof/goroutine?debug=1): how many goroutines wait in each
// distinct stack, keyed by the stack's frames, innermost first.
func (a *replicaAPI) goroutineStacks(ctx context.Context) (map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+a.r.addr+"/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.bearer)
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("goroutine profile of %s: %w", a.r.name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("goroutine profile of %s: %w", a.r.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("goroutine profile of %s: %s", a.r.name, resp.Status)
	}
	out := map[string]int{}
	for block := range strings.SplitSeq(string(data), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		countField, _, ok := strings.Cut(lines[0], " @ ")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(countField)
		if err != nil {
			continue
		}
		var frames []string
		for _, l := range lines[1:] {
			// "#\t0x4a1b2c\tnet/http.(*persistConn).readLoop+0x1a5\t/path/transport.go:2395"
			fields := strings.Split(l, "\t")
			if len(fields) >= 3 {
				fn, _, _ := strings.Cut(fields[2], "+")
				frames = append(frames, fn)
			}
		}
		out[strings.Join(frames, " ← ")] += n
	}
	return out, nil
}

// grownStacks lists the stacks that hold more goroutines in after than in
// before, most grown first, each with its growth.
func grownStacks(before, after map[string]int) []string {
	type growth struct {
		stack string
		n     int
	}
	var grown []growth
	for stack, n := range after {
		if d := n - before[stack]; d > 0 {
			grown = append(grown, growth{stack, d})
		}
	}
	sort.Slice(grown, func(i, j int) bool { return grown[i].n > grown[j].n })
	out := make([]string, 0, len(grown))
	for _, g := range grown {
		out = append(out, fmt.Sprintf("+%d %s", g.n, g.stack))
	}
	return out
}

// fdKinds counts the process's open descriptors by what they point at:
// "socket", "pipe", "anon_inode:[eventpoll]", or a file's path.
func fdKinds(p *testbin.Process) map[string]int {
	dir := "/proc/" + strconv.Itoa(p.Pid()) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[string]int{}
	for _, ent := range ents {
		target, err := os.Readlink(filepath.Join(dir, ent.Name()))
		if err != nil {
			continue
		}
		kind, _, _ := strings.Cut(target, ":[")
		if strings.HasPrefix(target, "anon_inode:") {
			kind = target
		}
		out[kind]++
	}
	return out
}

// socketsTo counts the process's open TCP sockets whose remote end is at
// one of ports: its descriptors name sockets by inode, and the process's
// /proc/<pid>/net/tcp{,6} give each inode's remote address.
func socketsTo(p *testbin.Process, ports map[int]bool) (int, error) {
	proc := "/proc/" + strconv.Itoa(p.Pid())
	remotePort := map[string]int{} // socket inode → remote port
	for _, table := range []string{"net/tcp", "net/tcp6"} {
		data, err := os.ReadFile(filepath.Join(proc, table))
		if err != nil {
			return 0, fmt.Errorf("sockets of pid %d: %w", p.Pid(), err)
		}
		for line := range strings.Lines(string(data)) {
			// "sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ..."
			fields := strings.Fields(line)
			if len(fields) < 10 || fields[0] == "sl" {
				continue
			}
			_, portHex, ok := strings.Cut(fields[2], ":")
			if !ok {
				continue
			}
			port, err := strconv.ParseInt(portHex, 16, 32)
			if err != nil {
				continue
			}
			remotePort[fields[9]] = int(port)
		}
	}
	dir := filepath.Join(proc, "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("open descriptors of pid %d: %w", p.Pid(), err)
	}
	n := 0
	for _, ent := range ents {
		target, err := os.Readlink(filepath.Join(dir, ent.Name()))
		if err != nil {
			continue
		}
		inode, ok := strings.CutPrefix(target, "socket:[")
		if !ok {
			continue
		}
		if port, ok := remotePort[strings.TrimSuffix(inode, "]")]; ok && ports[port] {
			n++
		}
	}
	return n, nil
}

// nodePorts are the API ports of the fleet's nodes.
func nodePorts(t testing.TB, f *simfleet.Fleet) map[int]bool {
	t.Helper()
	ports := map[int]bool{}
	for _, n := range f.Nodes() {
		_, port, err := net.SplitHostPort(n.Addr())
		if err != nil {
			t.Fatalf("node %s address %q: %v", n.Name(), n.Addr(), err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			t.Fatalf("node %s address %q: %v", n.Name(), n.Addr(), err)
		}
		ports[p] = true
	}
	return ports
}
