package node_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

func TestSandboxReadByIDCarriesTokenOnlyForRoot(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, err := client(t, n, tenantA).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "ns/x"})
	if err != nil {
		t.Fatal(err)
	}

	row, err := root.Sandbox(ctx, cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.Token != cl.Token || row.ID != cl.ID || row.ClaimRef != "ns/x" || row.Key != baseKey || row.Hibernated {
		t.Fatalf("root read = %+v", row)
	}
	_, err = client(t, n, tenantA).Sandbox(ctx, cl.ID)
	wantStatus(t, err, http.StatusForbidden, sandboxd.ErrForbidden)
	_, err = client(t, n, unknownTok).Sandbox(ctx, cl.ID)
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)
	_, err = client(t, n, cl.Token).Sandbox(ctx, cl.ID) // a sandbox token is not a node token
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)
	_, err = root.Sandbox(ctx, "sb_doesnotexist")
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	if got := n.Counters().SandboxGets; got != 5 {
		t.Fatalf("SandboxGets = %d, want 5 (every request counts)", got)
	}
}

func TestOpenNodeNeverGrantsPerSandboxAuthority(t *testing.T) {
	cfg := testConfig()
	cfg.RootToken = ""
	n := startNode(t, cfg)
	ctx := ctxT(t)
	open := client(t, n, "")
	cl, err := open.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil {
		t.Fatalf("open node claims without a token: %v", err)
	}
	row, err := open.Sandbox(ctx, cl.ID)
	if err != nil || row.Token != "" {
		t.Fatalf("open node read must omit the token: %+v %v", row, err)
	}
	if _, err := open.Info(ctx); err != nil {
		t.Fatalf("open node info: %v", err)
	}
	// Lifecycle verbs still need the sandbox's own token.
	wantStatus(t, client(t, n, "whatever").Release(ctx, cl.ID), http.StatusNotFound, sandboxd.ErrNotFound)
	if err := open.As(cl.Token).Release(ctx, cl.ID); err != nil {
		t.Fatalf("release by own token: %v", err)
	}
}

func TestReleaseTokens(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	a, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	b, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})

	wantStatus(t, client(t, n, "").Release(ctx, a.ID), http.StatusUnauthorized, sandboxd.ErrUnauthorized)
	wantStatus(t, root.As(b.Token).Release(ctx, a.ID), http.StatusNotFound, sandboxd.ErrNotFound)
	wantStatus(t, root.As(tenantA).Release(ctx, a.ID), http.StatusNotFound, sandboxd.ErrNotFound)
	if err := root.As(a.Token).Release(ctx, a.ID); err != nil {
		t.Fatalf("release by own token: %v", err)
	}
	wantStatus(t, root.As(a.Token).Release(ctx, a.ID), http.StatusNotFound, sandboxd.ErrNotFound)
	if err := root.Release(ctx, b.ID); err != nil {
		t.Fatalf("operator release by id: %v", err)
	}
	if rows, _ := root.Sandboxes(ctx, ""); len(rows) != 0 {
		t.Fatalf("released sandboxes still listed: %+v", rows)
	}
}

func TestHibernateWakeRenewStats(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 60})
	own := root.As(cl.Token)

	for range 2 { // idempotent
		if err := own.Hibernate(ctx, cl.ID); err != nil {
			t.Fatalf("hibernate: %v", err)
		}
	}
	info, _ := root.Info(ctx)
	row, _ := root.Sandbox(ctx, cl.ID)
	st, err := root.Stats(ctx, cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Hibernated != 1 || info.Claimed != 1 || !row.Hibernated || !st.Hibernated || st.MemUsedMeasured || st.MemUsedBytes != 0 {
		t.Fatalf("hibernated view: info %+v row %+v stats %+v", info, row, st)
	}
	if !row.Deadline.Equal(cl.Deadline) {
		t.Fatal("hibernate must not move the deadline")
	}
	for range 2 {
		if err := root.Wake(ctx, cl.ID); err != nil { // operator wake by id
			t.Fatalf("wake: %v", err)
		}
	}
	st, _ = root.Stats(ctx, cl.ID)
	if st.Hibernated || !st.MemUsedMeasured || st.CPUCount != 1 || st.MemTotalBytes != 1<<30 || st.ID != cl.ID {
		t.Fatalf("running stats = %+v", st)
	}
	if c := n.Counters(); c.Hibernates != 1 || c.Wakes != 1 {
		t.Fatalf("idempotent verbs must count one transition each: %+v", c)
	}
	wantStatus(t, root.As(tenantA).Hibernate(ctx, cl.ID), http.StatusNotFound, sandboxd.ErrNotFound)
	wantStatus(t, root.As("nope").Wake(ctx, cl.ID), http.StatusNotFound, sandboxd.ErrNotFound)

	// Renew: explicit, default (0) and clamped; the grant is authoritative.
	clock.Step(10 * time.Second)
	for ttl, want := range map[int]time.Duration{3600: time.Hour, 0: 300 * time.Second, 100 * 3600: 24 * time.Hour, 5: 5 * time.Second} {
		got, err := own.Renew(ctx, cl.ID, ttl)
		if err != nil || !got.Equal(clock.Now().Add(want)) {
			t.Fatalf("renew %d: %v %v, want %v", ttl, got, err, clock.Now().Add(want))
		}
	}
	_, err = client(t, n, "").Renew(ctx, cl.ID, 1)
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)
	_, err = root.As(tenantB).Renew(ctx, cl.ID, 1)
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	url := "http://" + n.Addr() + "/v1/sandboxes/" + cl.ID + "/renew"
	if code, _ := rawDo(t, http.MethodPost, url, cl.Token, []byte("[1,2"), nil); code != http.StatusBadRequest {
		t.Fatalf("malformed renew body: %d", code)
	}
	if code, _ := rawDo(t, http.MethodPost, url, cl.Token, nil, nil); code != http.StatusOK {
		t.Fatalf("absent renew body means ttl 0: %d", code)
	}

	_, err = client(t, n, tenantA).Stats(ctx, cl.ID)
	wantStatus(t, err, http.StatusForbidden, sandboxd.ErrForbidden)
	_, err = root.Stats(ctx, "sb_missing")
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
}

func TestOwnerLookup(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	addr, err := root.As(cl.Token).Owner(ctx, cl.ID)
	if err != nil || addr != n.Addr() {
		t.Fatalf("owner = %q, %v", addr, err)
	}
	_, err = root.Owner(ctx, cl.ID) // the token is the ownership proof
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	_, err = client(t, n, "").Owner(ctx, cl.ID)
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)
	if got := n.Counters().OwnerLookups; got != 3 {
		t.Fatalf("OwnerLookups = %d, want 3", got)
	}
}

func TestLeaseReaping(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	cfg.ReapInterval = time.Hour // driven by hand below
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	short, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 10})
	long, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 100})
	hib, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 10})
	if err := root.Hibernate(ctx, hib.ID); err != nil {
		t.Fatal(err)
	}
	// A guest that ran leaves a scratch directory; reaping removes it.
	if _, err := n.GuestAddr(short.ID, echoPort); err != nil {
		t.Fatal(err)
	}
	dir, _ := n.ScratchDir(short.ID)
	if !dirExists(dir) {
		t.Fatalf("a started guest must have its scratch dir %s", dir)
	}

	clock.Step(9 * time.Second)
	if got := n.ReapExpired(); got != 0 {
		t.Fatalf("reaped %d before any deadline", got)
	}
	clock.Step(time.Second)
	if got := n.ReapExpired(); got != 2 {
		t.Fatalf("reaped %d at the 10s deadline, want 2 (hibernated ones too)", got)
	}
	rows, _ := root.Sandboxes(ctx, "")
	if len(rows) != 1 || rows[0].ID != long.ID {
		t.Fatalf("survivors = %+v", rows)
	}
	wantStatus(t, root.As(short.Token).Release(ctx, short.ID), http.StatusNotFound, sandboxd.ErrNotFound)
	if dirExists(dir) {
		t.Fatalf("reaped sandbox's scratch dir %s still exists", dir)
	}
	if c := n.Counters(); c.Reaps != 2 {
		t.Fatalf("reap counter = %d", c.Reaps)
	}
}

func TestBackgroundReaperRuns(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	cfg.ReapInterval = 5 * time.Millisecond
	n := startNode(t, cfg)
	root := client(t, n, rootToken)
	if _, err := root.Claim(ctxT(t), sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	clock.Step(2 * time.Second)
	poll.Until(t, "one reap", func() bool { return n.Counters().Reaps == 1 })
}

func TestIdleHibernate(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	cfg.ReapInterval = time.Hour
	cfg.Pools = []sandboxd.PoolSpec{{Template: tmpl, Warm: 1, IdleHibernateSeconds: 30}}
	n := startNode(t, cfg)
	root := client(t, n, rootToken)
	ctx := ctxT(t)
	cl, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	clock.Step(31 * time.Second)
	n.ReapExpired()
	if row, _ := root.Sandbox(ctx, cl.ID); !row.Hibernated {
		t.Fatal("an idle claim of an idle_hibernate pool must hibernate")
	}
}

func TestSnapshotForInventory(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	named, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "ns/named"})
	anon, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err := root.Hibernate(ctx, anon.ID); err != nil {
		t.Fatal(err)
	}
	waitWarm(t, n, baseKey, 4)

	s := n.Snapshot()
	if s.Node != "test-node" || s.Address != n.Addr() {
		t.Fatalf("snapshot identity = %q %q", s.Node, s.Address)
	}
	if len(s.Pools) != 1 || s.Pools[0] != (node.PoolSnapshot{Template: tmpl, Net: "none", Size: "small", Warm: 4, Target: 4}) {
		t.Fatalf("pools = %+v", s.Pools)
	}
	byID := map[string]node.EntrySnapshot{}
	for _, e := range s.Entries {
		byID[e.ID] = e
	}
	if e := byID[named.ID]; e.Name != "ns/named" || e.ClaimRef != "ns/named" || e.Phase != node.PhaseRunning ||
		e.Addr != n.Addr() || e.Template != tmpl || !e.Deadline.Equal(named.Deadline) || !e.ClaimedAt.Equal(clock.Now()) {
		t.Fatalf("named entry = %+v", e)
	}
	if e := byID[anon.ID]; e.Name != anon.ID || e.ClaimRef != "" || e.Phase != node.PhaseHibernated {
		t.Fatalf("anonymous entry = %+v", e)
	}
}
