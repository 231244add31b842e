package warmpool_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// slowPublish is vk-sandbox's publish interval scaled down: long enough
// that every read below comes long before the node publishes the write it
// follows, as it does with the real 30 s.
const slowPublish = 15 * time.Second

// TestReadYourWritesAcrossReplicas pins a client to each of two real
// replicas and checks every read-after-write pair across them, with the
// nodes publishing far slower than the reads follow the writes: what one
// replica answered (a create, a delete), the other answers at once, and a
// create of a name just deleted through the other replica is not refused.
func TestReadYourWritesAcrossReplicas(t *testing.T) {
	e := startEnv(t)
	systemNS := e.namespace(t, "sandbox-system")
	ns := e.namespace(t, "raw")
	warmupNS := e.namespace(t, "raw-warmup")
	f := e.startFleet(t, "raw-", 2, token, func(c *simfleet.Config) { c.Publish.Interval = slowPublish })
	pair := startReplicaPair(t, e, systemNS)

	key := keyOf(nameRaceImage)
	const warm = 16
	e.apply(t, ns, "base", key.Template, warm)
	eventually(t, fmt.Sprintf("%d warm over 2 nodes", warm), func() (bool, string) { return placedAsExpected(key, warm, f) })
	adminToken := e.c.AdminConfig().BearerToken
	apis := [2]*replicaAPI{newReplicaAPI(t, pair[0], adminToken), newReplicaAPI(t, pair[1], adminToken)}
	for i, a := range apis {
		createUntilServed(t, a, warmupNS, fmt.Sprintf("warmup-%d", i), nameRaceImage)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var tally pairTally
	expect := tally.expect
	for i := range 6 {
		writer, reader := apis[i%2], apis[1-i%2]
		name := fmt.Sprintf("raw-%d", i)
		created, err := writer.create(ctx, testSandbox(ns, name, nameRaceImage))
		if err != nil || created.Code != http.StatusCreated {
			t.Fatalf("create %s at %s: %v %v", name, writer.r.name, created, err)
		}
		got, err := reader.get(ctx, ns, name)
		expect(err == nil && got.Code == http.StatusOK && got.Object.UID == created.Object.UID,
			"get %s at %s right after its create at %s: %v %v", name, reader.r.name, writer.r.name, got, err)
		list, err := reader.list(ctx, ns)
		found := false
		if err == nil && list.Object != nil {
			for _, sb := range list.Object.Items {
				found = found || sb.Name == name
			}
		}
		expect(found, "list at %s right after the create of %s at %s does not show it (%v)", reader.r.name, name, writer.r.name, err)

		deleted, err := reader.delete(ctx, ns, name)
		expect(err == nil && deleted.Code == http.StatusOK, "delete %s at %s right after its create at %s: %v %v", name, reader.r.name, writer.r.name, deleted, err)
		got, err = writer.get(ctx, ns, name)
		expect(err == nil && got.Code == http.StatusNotFound, "get %s at %s right after its delete at %s: %v %v", name, writer.r.name, reader.r.name, got, err)
		again, err := writer.create(ctx, testSandbox(ns, name, nameRaceImage))
		expect(err == nil && again.Code == http.StatusCreated, "create %s at %s right after its delete at %s: %v %v", name, writer.r.name, reader.r.name, again, err)
		got, err = reader.get(ctx, ns, name)
		expect(err == nil && got.Code == http.StatusOK && again.Object != nil && got.Object.UID == again.Object.UID,
			"get %s at %s right after its second create at %s: %v %v", name, reader.r.name, writer.r.name, got, err)
	}
	tally.report(t, "read-after-write", pair)
}

// pairTally counts read-after-write pairs across replicas and keeps the
// ones whose read missed the write.
type pairTally struct {
	pairs int
	wrong []string
}

func (p *pairTally) expect(ok bool, format string, args ...any) {
	p.pairs++
	if !ok {
		p.wrong = append(p.wrong, fmt.Sprintf(format, args...))
	}
}

// report fails t with every wrong pair, once the replicas are checked alive.
func (p *pairTally) report(t *testing.T, what string, pair replicaPair) {
	t.Helper()
	for j, r := range pair {
		if err := r.ExitErr(); err != nil {
			t.Fatalf("replica %d died: %v", j, err)
		}
	}
	t.Logf("%d %s pairs across two replicas, nodes publishing every %v: %d wrong", p.pairs, what, slowPublish, len(p.wrong))
	if len(p.wrong) > 0 {
		t.Fatalf("%s reads that missed the other replica's write:\n%s", what, strings.Join(p.wrong, "\n"))
	}
}
