package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

// rawAnswer is one create's answer as plain HTTP.
type rawAnswer struct {
	code       int
	retryAfter string
	status     metav1.Status // for an error answer
	elapsed    time.Duration
}

// createOnce POSTs sb through the kube-apiserver with a plain HTTP client:
// client-go would retry a 429 carrying Retry-After on its own, and this
// test wants to see the first answer and its headers.
func (e *testEnv) createOnce(ctx context.Context, t *testing.T, sb *agentsv1beta1.Sandbox) rawAnswer {
	t.Helper()
	cfg := e.cluster.AdminConfig()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(toUnstructured(t, sb).Object)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("%s/apis/%s/%s/namespaces/%s/sandboxes", cfg.Host, group, version, sb.Namespace)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	out := rawAnswer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), elapsed: time.Since(start)}
	if resp.StatusCode == http.StatusCreated {
		e.deleteAtCleanup(t, sb.Namespace, sb.Name)
		return out
	}
	if err := json.Unmarshal(data, &out.status); err != nil {
		t.Fatalf("answer %d is not a Status: %s", resp.StatusCode, data)
	}
	return out
}

// TestCapacity fills the fleet: first the small node, which advertises
// the most warm VMs (so two random choices put it first whenever they draw
// it) and, once full, refuses with 429, so creates fall through to the
// others; then every node, after which creates fail fast with 429 instead
// of hanging.
func TestCapacity(t *testing.T) {
	e := sharedEnv(t)
	ctx := testContext(t)
	const ns = "capacity"
	small := e.nodeName(nodeSmall)

	t.Run("FallThrough", func(t *testing.T) {
		// The small node is drawn for two creates in three; twelve
		// creates leave it short only about once in twenty thousand runs.
		const maxFills = 12
		for i := 0; e.nodeClaims(nodeSmall) < smallMaxClaims; i++ {
			if i == maxFills {
				t.Fatalf("%d creates left the small node with %d claims, want %d: it is never tried", i, e.nodeClaims(nodeSmall), smallMaxClaims)
			}
			e.mustCreate(ctx, t, newSandbox(ns, fmt.Sprintf("fill-%d", i), withTemplate(templateBase)))
		}
		// Full, it still advertises warm VMs: a create that tries it is
		// refused there and granted elsewhere.
		for i := range 3 {
			sb := e.mustCreate(ctx, t, newSandbox(ns, fmt.Sprintf("over-%d", i), withTemplate(templateBase)))
			if sb.Status.NodeName == small {
				t.Errorf("over-%d landed on the full node %s", i, small)
			}
		}
		if n := e.nodeClaims(nodeSmall); n != smallMaxClaims {
			t.Errorf("the small node holds %d claims, want its max %d", n, smallMaxClaims)
		}
	})

	t.Run("Exhausted", func(t *testing.T) {
		// Whatever other sandboxes exist, the base nodes hold at most
		// this many claims in all.
		const limit = smallMaxClaims + 2*bigMaxClaims
		var refused rawAnswer
		for i := 0; ; i++ {
			if i > limit {
				t.Fatalf("%d creates succeeded on a fleet that holds %d base sandboxes", i, limit)
			}
			a := e.createOnce(ctx, t, newSandbox(ns, "full-"+strconv.Itoa(i), withTemplate(templateBase)))
			if a.code != http.StatusCreated {
				refused = a
				break
			}
		}
		for i, max := range map[int]int{nodeSmall: smallMaxClaims, nodeBig1: bigMaxClaims, nodeBig2: bigMaxClaims} {
			if n := e.nodeClaims(i); n != max {
				t.Errorf("node %s holds %d claims at the first refusal, want its max %d", e.nodeName(i), n, max)
			}
		}
		checkNoCapacity(t, "a create on a full fleet", refused)

		// Nothing spent by another refused create, and the pool of a
		// template no node serves fails the same way.
		before := e.claimed()
		checkNoCapacity(t, "a create on a full fleet", e.createOnce(ctx, t, newSandbox(ns, "one-more", withTemplate(templateBase))))
		checkNoCapacity(t, "a create for an unserved template", e.createOnce(ctx, t, newSandbox(ns, "unserved", withTemplate("no-such-template"))))
		if after := e.claimed(); after != before {
			t.Errorf("refused creates changed the fleet's claims from %d to %d", before, after)
		}
	})
}

// checkNoCapacity checks a refused create's answer: 429 with a retry
// hint, or 503.
func checkNoCapacity(t *testing.T, what string, a rawAnswer) {
	t.Helper()
	t.Logf("%s: %d after %v (Retry-After %q): %s", what, a.code, a.elapsed.Round(time.Millisecond), a.retryAfter, a.status.Message)
	switch a.code {
	case http.StatusTooManyRequests:
		if a.retryAfter == "" {
			t.Errorf("%s: 429 without Retry-After", what)
		}
		if a.status.Details == nil || a.status.Details.RetryAfterSeconds <= 0 {
			t.Errorf("%s: 429 without details.retryAfterSeconds: %+v", what, a.status.Details)
		}
	case http.StatusServiceUnavailable:
	default:
		t.Errorf("%s: answered %d (%s), want 429 or 503", what, a.code, a.status.Message)
	}
}
