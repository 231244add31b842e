package warmpool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

const (
	e2bKey     = "e2b_readwrites0123456789abcdef"
	e2bSecret  = "envd-secret-for-the-replica-test"
	e2bDomain  = "sandbox.test"
	e2bImage   = "python:3.12"
	e2bTimeout = 300
)

// e2bAPI talks to one replica's e2b surface, so a test decides which
// replica serves each call, as an SDK's kept-alive connection does.
type e2bAPI struct {
	name, base string
	client     *http.Client
}

type e2bReply struct {
	code int
	body map[string]any
	list []map[string]any
}

func (a *e2bAPI) call(ctx context.Context, method, path string, body any) (e2bReply, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return e2bReply{}, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return e2bReply{}, err
	}
	req.Header.Set("X-API-Key", e2bKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return e2bReply{}, fmt.Errorf("%s %s at %s: %w", method, path, a.name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return e2bReply{}, err
	}
	out := e2bReply{code: resp.StatusCode}
	if len(data) > 0 && data[0] == '[' {
		_ = json.Unmarshal(data, &out.list)
	} else {
		_ = json.Unmarshal(data, &out.body)
	}
	return out, nil
}

func (r e2bReply) str(field string) string {
	v, _ := r.body[field].(string)
	return v
}

func (r e2bReply) String() string {
	if r.body != nil {
		if msg, ok := r.body["message"]; ok {
			return fmt.Sprintf("%d %v", r.code, msg)
		}
	}
	return strconv.Itoa(r.code)
}

// TestE2BReadYourWritesAcrossReplicas is what an e2b SDK sees when its
// calls reach both replicas of the install: every call after a create,
// timeout change, pause, resume or kill made through one replica, made
// through the other at once, with the nodes publishing far slower.
func TestE2BReadYourWritesAcrossReplicas(t *testing.T) {
	e := startEnv(t)
	systemNS := e.namespace(t, "sandbox-system")
	ns := e.namespace(t, "e2b-team")
	f := e.startFleet(t, "e2b-", 2, token, func(c *simfleet.Config) {
		c.Publish.Interval = slowPublish
		c.Envd = &simfleet.EnvdConfig{Secret: []byte(e2bSecret)}
		c.ScratchRoot = t.TempDir()
	})

	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keys := write("keys", e2bKey+" "+ns+"\n")
	secret := write("envd-secret", e2bSecret+"\n")
	aliases := write("aliases", "base "+e2bImage+"\n")
	var apis [2]*e2bAPI
	var addrs [2]string
	for i := range addrs {
		port, err := freeLoopbackPort()
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	pair := startReplicaPair(t, e, systemNS, func(i int) []string {
		return []string{
			"--enable-e2b-api", "--e2b-bind-address=" + addrs[i], "--e2b-namespace=" + ns, "--e2b-domain=" + e2bDomain,
			"--e2b-api-key-file=" + keys, "--e2b-envd-secret-file=" + secret, "--e2b-template-alias-file=" + aliases,
		}
	})
	for i, r := range pair {
		apis[i] = &e2bAPI{name: r.name, base: "http://" + addrs[i], client: &http.Client{Timeout: 30 * time.Second}}
	}
	// The replicas' warm-pool driver places the pool.
	key := keyOf(e2bImage)
	const warm = 8
	e.apply(t, ns, "base", e2bImage, warm)
	eventually(t, fmt.Sprintf("%d warm over 2 nodes", warm), func() (bool, string) { return placedAsExpected(key, warm, f) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	create := func(a *e2bAPI) e2bReply {
		t.Helper()
		var r e2bReply
		eventually(t, a.name+" creates an e2b sandbox", func() (bool, string) {
			var err error
			r, err = a.call(ctx, http.MethodPost, "/sandboxes", map[string]any{"templateID": "base", "timeout": e2bTimeout, "allow_internet_access": false,
				"metadata": map[string]string{"suite": "replicas"}})
			if err != nil {
				return false, err.Error()
			}
			// The first creates may find no warm capacity until the
			// replica's inventory shows the pool.
			return r.code == http.StatusCreated, r.String()
		})
		return r
	}
	for _, a := range apis {
		create(a)
	}

	var tally pairTally
	expect := tally.expect
	for i := range 4 {
		a, b := apis[i%2], apis[1-i%2]
		created := create(a)
		id := created.str("sandboxID")
		got, err := b.call(ctx, http.MethodGet, "/sandboxes/"+id, nil)
		expect(err == nil && got.code == http.StatusOK && got.str("sandboxID") == id, "getInfo %s at %s right after its create at %s: %v %v", id, b.name, a.name, got, err)
		// Filtered by metadata, which the other replica reads off the node.
		list, err := b.call(ctx, http.MethodGet, "/v2/sandboxes?metadata=suite%3Dreplicas", nil)
		listed := false
		for _, sb := range list.list {
			listed = listed || sb["sandboxID"] == id
		}
		expect(err == nil && listed, "list at %s right after the create of %s at %s: %v %v", b.name, id, a.name, list, err)

		r, err := a.call(ctx, http.MethodPost, "/sandboxes/"+id+"/timeout", map[string]any{"timeout": 3 * e2bTimeout})
		if err != nil || r.code != http.StatusNoContent {
			t.Fatalf("setTimeout %s at %s: %v %v", id, a.name, r, err)
		}
		atA, errA := a.call(ctx, http.MethodGet, "/sandboxes/"+id, nil)
		atB, errB := b.call(ctx, http.MethodGet, "/sandboxes/"+id, nil)
		expect(errA == nil && errB == nil && atA.str("endAt") != "" && atA.str("endAt") == atB.str("endAt"),
			"endAt of %s after a setTimeout at %s: %q there, %q at %s", id, a.name, atA.str("endAt"), atB.str("endAt"), b.name)

		r, err = a.call(ctx, http.MethodPost, "/sandboxes/"+id+"/pause", nil)
		if err != nil || r.code != http.StatusNoContent {
			t.Fatalf("pause %s at %s: %v %v", id, a.name, r, err)
		}
		got, err = b.call(ctx, http.MethodGet, "/sandboxes/"+id, nil)
		expect(err == nil && got.str("state") == "paused", "state of %s at %s right after a pause at %s: %v %q", id, b.name, a.name, err, got.str("state"))
		r, err = b.call(ctx, http.MethodPost, "/sandboxes/"+id+"/connect", map[string]any{"timeout": e2bTimeout})
		expect(err == nil && (r.code == http.StatusOK || r.code == http.StatusCreated), "connect (resume) %s at %s right after a pause at %s: %v %v", id, b.name, a.name, r, err)
		got, err = a.call(ctx, http.MethodGet, "/sandboxes/"+id, nil)
		expect(err == nil && got.str("state") == "running", "state of %s at %s right after a connect at %s: %v %q", id, a.name, b.name, err, got.str("state"))

		r, err = b.call(ctx, http.MethodDelete, "/sandboxes/"+id, nil)
		expect(err == nil && r.code == http.StatusNoContent, "kill %s at %s: %v %v", id, b.name, r, err)
		got, err = a.call(ctx, http.MethodGet, "/sandboxes/"+id, nil)
		expect(err == nil && got.code == http.StatusNotFound, "getInfo %s at %s right after its kill at %s: %v %v", id, a.name, b.name, got, err)
	}
	tally.report(t, "e2b read-after-write", pair)
}
