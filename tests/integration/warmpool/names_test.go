package warmpool_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// nameRaceRounds is how many fresh names are each created at both
// replicas at once.
const nameRaceRounds = 100

// nameRaceImage names the pool the racing creates claim from.
const nameRaceImage = "ubuntu:24.04"

// TestOneNameOneSandboxAcrossReplicas creates each of 100 fresh names at
// both replicas at the same instant. A Sandbox name is one sandbox
// whichever replica a client reaches: exactly one create answers 201 and
// the other 409 AlreadyExists, and the fleet holds exactly one VM per
// name, none for the loser. Neither replica can learn of the other's
// create from the published inventory in time (it lags by the publish
// interval), so this holds only if the replicas reserve names with each
// other.
func TestOneNameOneSandboxAcrossReplicas(t *testing.T) {
	e := startEnv(t)
	systemNS := e.namespace(t, "sandbox-system")
	ns := e.namespace(t, "names")
	warmupNS := e.namespace(t, "names-warmup")
	f := e.startFleet(t, "n-", 3, token)
	pair := startReplicaPair(t, e, systemNS)

	key := keyOf(nameRaceImage)
	// With the simulator's instant refill (RefillDelay 0) a pool of any
	// size serves every claim from warm; 30 spreads over the 3 nodes.
	const warm = 30
	e.apply(t, ns, "base", key.Template, warm)
	eventually(t, fmt.Sprintf("%d warm over 3 nodes", warm), func() (bool, string) { return placedAsExpected(key, warm, f) })

	adminToken := e.c.AdminConfig().BearerToken
	apis := [2]*replicaAPI{newReplicaAPI(t, pair[0], adminToken), newReplicaAPI(t, pair[1], adminToken)}
	// Both replicas must see the pool first, or a create would lose for
	// want of capacity rather than to the other replica.
	for i, a := range apis {
		createUntilServed(t, a, warmupNS, fmt.Sprintf("warmup-%d", i), nameRaceImage)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type round struct {
		name    string
		replies [2]reply[agentsv1beta1.Sandbox]
		errs    [2]error
	}
	rounds := make([]round, nameRaceRounds)
	for i := range rounds {
		r := &rounds[i]
		r.name = fmt.Sprintf("race-%03d", i)
		// Both requests wait at the barrier, so they leave together and
		// neither replica has answered before the other is asked.
		barrier := make(chan struct{})
		var wg sync.WaitGroup
		for j, a := range apis {
			wg.Go(func() {
				<-barrier
				r.replies[j], r.errs[j] = a.create(ctx, testSandbox(ns, r.name, nameRaceImage))
			})
		}
		close(barrier)
		wg.Wait()
	}
	for j, p := range pair {
		if err := p.ExitErr(); err != nil {
			t.Fatalf("replica %d died: %v", j, err)
		}
	}

	// The claims are made before a create answers; a late-granted claim
	// the fleet core releases is retried with back-off up to 5 s, so 15 s
	// settles the fleet.
	// A name with two VMs never settles; the wait then fails naming it
	// and what each replica answered for it.
	var claims map[string][]string
	poll.UntilNil(t, fmt.Sprintf("the fleet to hold one VM for each of the %d names", nameRaceRounds), func() error {
		claims = claimsIn(f, ns)
		var off []string
		for _, r := range rounds {
			if n := len(claims[r.name]); n != 1 {
				off = append(off, fmt.Sprintf("%s: %d VMs (%s answered %s, %s answered %s)", r.name, n,
					pair[0].name, describe(r.replies[0], r.errs[0]), pair[1].name, describe(r.replies[1], r.errs[1])))
			}
		}
		if len(claims) != nameRaceRounds || len(off) > 0 {
			return fmt.Errorf("VMs for %d names, want %d; %s", len(claims), nameRaceRounds, firstN(off, 10))
		}
		return nil
	})

	var oneWinner, bothCreated, noneCreated, conflicts, duplicates, vms int
	createdBy := [2]int{}
	for _, r := range rounds {
		created, exists := 0, 0
		var winnerID string
		for j := range apis {
			if r.errs[j] != nil {
				continue
			}
			switch {
			case r.replies[j].Code == http.StatusCreated:
				created++
				createdBy[j]++
				winnerID = r.replies[j].Object.Annotations[sandbox.AnnotationID]
			case r.replies[j].alreadyExists():
				exists++
			}
		}
		conflicts += exists
		ids := claims[r.name]
		vms += len(ids)
		if len(ids) > 1 {
			duplicates++
		}
		switch created {
		case 1:
			oneWinner++
		case 2:
			bothCreated++
		case 0:
			noneCreated++
		}
		if created != 1 || exists != 1 || len(ids) != 1 {
			t.Errorf("%s: %s answered %s, %s answered %s; the fleet holds %d VMs for it (want one 201, one 409 AlreadyExists, one VM)",
				r.name, pair[0].name, describe(r.replies[0], r.errs[0]), pair[1].name, describe(r.replies[1], r.errs[1]), len(ids))
			continue
		}
		if ids[0] != winnerID {
			t.Errorf("%s: the fleet holds VM %s, the 201 created %s", r.name, ids[0], winnerID)
		}
	}
	var strangers []string
	for name, ids := range claims {
		if !isRaceName(name) {
			strangers = append(strangers, fmt.Sprintf("%s ×%d", name, len(ids)))
		}
	}
	if len(strangers) > 0 {
		t.Errorf("the fleet holds VMs for names nobody created in %s: %s", ns, firstN(strangers, 20))
	}
	t.Logf("%d names raced at both replicas: %d with exactly one 201, %d with two 201s, %d with none; 201s by %s: %d, by %s: %d; %d answers 409 AlreadyExists",
		nameRaceRounds, oneWinner, bothCreated, noneCreated, pair[0].name, createdBy[0], pair[1].name, createdBy[1], conflicts)
	t.Logf("fleet: %d claimed VMs for %d names in %s; %d names with more than one VM", vms, len(claims), ns, duplicates)
}

// isRaceName reports whether name is one of the rounds' names.
func isRaceName(name string) bool {
	for i := range nameRaceRounds {
		if name == fmt.Sprintf("race-%03d", i) {
			return true
		}
	}
	return false
}
