package apiserver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/simulator/publisher"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// TestKubectlChunkedList lists more sandboxes than one chunk with the real
// kubectl, which pages with limit and continue (500 by default): every
// sandbox is shown once, and kubectl's own request log shows the pages.
func TestKubectlChunkedList(t *testing.T) {
	kubectl, err := cluster.KubectlBinary()
	if err != nil {
		t.Fatalf("kubectl: %v", err)
	}
	e := sharedEnv(t)
	ctx := testContext(t)
	const n, chunk = 1050, 100
	inv := publishSynthetic(ctx, t, e, n)
	defer inv.remove(ctx, t, e)

	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig="+e.cluster.Kubeconfig(), "--cache-dir="+t.TempDir(),
		"get", "sandboxes", "-n", syntheticNamespace, "--chunk-size="+strconv.Itoa(chunk), "--no-headers", "-o", "name", "-v=6")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, stderr.String())
	}
	seen := map[string]int{}
	for _, line := range strings.Fields(stdout.String()) {
		seen[line]++
	}
	for i := range n {
		if name := "sandbox.agents.x-k8s.io/sb-" + strconv.Itoa(i); seen[name] != 1 {
			t.Errorf("kubectl shows %s %d times", name, seen[name])
		}
	}
	if len(seen) != n {
		t.Errorf("kubectl shows %d sandboxes, want %d", len(seen), n)
	}
	var pages, continued int
	for _, line := range strings.Split(stderr.String(), "\n") {
		// One "Response" line per request: verb="GET" url="…/sandboxes?…".
		if strings.Contains(line, `"Response"`) && strings.Contains(line, "/sandboxes?") && strings.Contains(line, "limit="+strconv.Itoa(chunk)) {
			pages++
			if strings.Contains(line, "continue=") {
				continued++
			}
		}
	}
	if want := (n + chunk - 1) / chunk; pages != want || continued != want-1 {
		t.Errorf("kubectl made %d list requests (%d with continue), want %d and %d:\n%s", pages, continued, want, want-1, stderr.String())
	}
}

// TestPagingAcrossChangingFleet pages with client-go through the
// kube-apiserver while the synthetic nodes claim and release sandboxes
// between pages, and checks the guarantee docs/sandbox-apiserver.md
// states: no sandbox listed twice, and every sandbox that existed for the
// whole paging listed exactly once; every page carries the first page's
// resourceVersion.
func TestPagingAcrossChangingFleet(t *testing.T) {
	e := sharedEnv(t)
	ctx := testContext(t)
	fl := newChangingFleet(t, e, 3)
	t.Cleanup(func() { fl.clear(context.Background(), t) })
	rng := rand.New(rand.NewPCG(7, 11))
	for range 400 {
		fl.add(rng)
	}
	fl.publish(ctx, t)
	stable := fl.names()

	seen := map[string]int{}
	var cont, rv string
	for page := 0; ; page++ {
		if page > 0 {
			for name := range fl.names() {
				if rng.IntN(12) == 0 {
					fl.remove(name)
					delete(stable, name)
				}
			}
			for range rng.IntN(20) {
				fl.add(rng)
			}
			fl.publish(ctx, t)
		}
		list, err := e.sandboxes.Namespace(pagingNamespace).List(ctx, metav1.ListOptions{Limit: 37, Continue: cont})
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if page == 0 {
			rv = list.GetResourceVersion()
		} else if list.GetResourceVersion() != rv {
			t.Errorf("page %d has resourceVersion %s, the first page %s", page, list.GetResourceVersion(), rv)
		}
		for _, item := range list.Items {
			seen[item.GetName()]++
		}
		cont = list.GetContinue()
		if cont == "" {
			break
		}
		if list.GetRemainingItemCount() == nil {
			t.Errorf("page %d has a continue token and no remainingItemCount", page)
		}
	}
	for name, times := range seen {
		if times > 1 {
			t.Errorf("%s listed %d times", name, times)
		}
	}
	for name := range stable {
		if seen[name] != 1 {
			t.Errorf("%s existed throughout and was listed %d times", name, seen[name])
		}
	}
}

const pagingNamespace = "paging"

// changingFleet is synthetic nodes whose entries a test changes and
// republishes at will.
type changingFleet struct {
	e          *testEnv
	mu         sync.Mutex
	entries    []map[string]v1beta1.InventoryEntry // per node, by name
	publishers []*publisher.Publisher
	serial     int
}

func newChangingFleet(t *testing.T, e *testEnv, nodes int) *changingFleet {
	t.Helper()
	fl := &changingFleet{e: e}
	clock := testingclock.NewFakeClock(time.Now().Add(syntheticLead))
	for i := range nodes {
		fl.entries = append(fl.entries, map[string]v1beta1.InventoryEntry{})
		name := fmt.Sprintf("paging-node-%d", i)
		pub, err := publisher.New(publisher.Config{
			Client: e.cluster.Dynamic(),
			Source: func(context.Context) (*v1beta1.NodeInventory, error) { return fl.inventory(i, name), nil },
			Clock:  clock,
		})
		if err != nil {
			t.Fatal(err)
		}
		fl.publishers = append(fl.publishers, pub)
	}
	return fl
}

func (fl *changingFleet) inventory(i int, name string) *v1beta1.NodeInventory {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	inv := &v1beta1.NodeInventory{Node: name, Address: "127.0.0.1:1"}
	for _, en := range fl.entries[i] {
		inv.Entries = append(inv.Entries, en)
	}
	return inv
}

func (fl *changingFleet) add(rng *rand.Rand) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.serial++
	name := fmt.Sprintf("sb-%05d", rng.IntN(100000))
	for _, m := range fl.entries {
		if _, ok := m[name]; ok {
			return
		}
	}
	deadline, claimed := metav1.NewTime(time.Now().Add(time.Hour)), metav1.Now()
	ref := pagingNamespace + "/" + name
	fl.entries[rng.IntN(len(fl.entries))][name] = v1beta1.InventoryEntry{
		Name: ref, ClaimRef: ref, Phase: v1beta1.SandboxPhaseRunning,
		ID: fmt.Sprintf("sb_%020x", 1<<40+fl.serial), Addr: "127.0.0.1:1", Template: templateBase,
		Deadline: &deadline, ClaimedAt: &claimed,
	}
}

func (fl *changingFleet) remove(name string) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, m := range fl.entries {
		delete(m, name)
	}
}

func (fl *changingFleet) names() map[string]bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	out := map[string]bool{}
	for _, m := range fl.entries {
		for name := range m {
			out[name] = true
		}
	}
	return out
}

// publish publishes every node and waits until the server lists exactly
// the fleet's entries.
func (fl *changingFleet) publish(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, p := range fl.publishers {
		if err := p.PublishOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := fl.names()
	poll.UntilNil(t, "the server to list the published fleet", func() error {
		list, err := fl.e.sandboxes.Namespace(pagingNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list the published fleet: %v", err)
		}
		if len(list.Items) != len(want) {
			return fmt.Errorf("%d listed, %d published", len(list.Items), len(want))
		}
		for _, item := range list.Items {
			if !want[item.GetName()] {
				return fmt.Errorf("%s listed, not published", item.GetName())
			}
		}
		return nil
	})
}

// clear deletes the nodes' inventories.
func (fl *changingFleet) clear(ctx context.Context, t *testing.T) {
	for _, p := range fl.publishers {
		if err := p.Delete(ctx); err != nil {
			t.Errorf("delete synthetic inventory: %v", err)
		}
	}
}
