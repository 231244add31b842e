package controlplane_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"

	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// warmRequests is how many times every kind of request succeeds before
// the fault, so that connections are warm and the figures have a before.
// A soak run (testbin.SoakScale) makes it that many times more.
const warmRequests = 5

// pastWindowRequests is how many requests of every kind the load makes
// once the failure window is over, so that a failure after the window,
// which the tests forbid, has requests to show up in. Scaled like
// warmRequests.
const pastWindowRequests = 10

// kubeAPIServerRecoveryBound is how long after the restarted
// kube-apiserver answers /readyz its clients may still fail: ready means
// it serves, but the aggregator may still be loading the APIService and
// the server's delegated authentication reconnecting.
const kubeAPIServerRecoveryBound = 10 * time.Second

// etcdRecoveryBound is how long after etcd is ready again requests may
// still fail: the kube-apiserver's etcd clients redial with gRPC's
// exponential backoff (1 s growing by 1.6 per failed dial, ±20%), so
// after an outage of about 8 s the next dial comes up to about 6 s after
// etcd is back; then its watch caches relist. Twice that, for a loaded
// machine.
const etcdRecoveryBound = 15 * time.Second

// TestKubeAPIServerRestart SIGKILLs the kube-apiserver under a steady load
// of creates, deletes and lists through its aggregator and starts it again
// on the same port. While it is down every request fails (the load's only
// way in is the kube-apiserver); afterwards every kind must succeed again
// within kubeAPIServerRecoveryBound, and what the load created must be
// exactly what the fleet holds.
func TestKubeAPIServerRestart(t *testing.T) {
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*waitTimeout)
	defer cancel()
	api := e.api(ctx, t, "cp-kas")
	e.waitAnswering(ctx, t, api, "kas-warmup")
	baseline, err := e.serverGoroutines(ctx)
	if err != nil {
		t.Fatalf("read the server's goroutines before the load: %v", err)
	}

	load := startLoad(api, "kas")
	t.Cleanup(func() { load.stop() })
	load.waitWarm(t, warmRequests*testbin.SoakScale())

	f := fault{part: "the kube-apiserver", what: "kube-apiserver SIGKILLed and started again on its port", bound: kubeAPIServerRecoveryBound, start: time.Now()}
	if err := e.cluster.KillAPIServer(); err != nil {
		t.Fatalf("kill the kube-apiserver: %v", err)
	}
	killed := time.Now()
	if err := e.cluster.StartAPIServer(ctx); err != nil {
		t.Fatalf("start the kube-apiserver again: %v", err)
	}
	f.ready = time.Now()
	t.Logf("kube-apiserver killed in %v, ready again %v after the kill",
		killed.Sub(f.start).Round(time.Millisecond), f.ready.Sub(killed).Round(time.Millisecond))
	load.waitPast(t, f.windowEnd(), pastWindowRequests*testbin.SoakScale())
	outcomes := load.stop()

	figs := f.checkLoad(t, outcomes)
	// The fault must have been seen: with the only way in killed, the
	// requests made while it was down fail.
	if n := figs[kindList].failed[during]; n == 0 {
		t.Errorf("no list failed while the kube-apiserver was down (%d made): the fault did not happen as meant", figs[kindList].total[during])
	}

	e.checkState(ctx, t, api, f, outcomes)
	e.checkInformerResumed(ctx, t, api, "kas-behind-server")
	if err := e.drain(ctx, api); err != nil {
		t.Fatal(err)
	}
	e.checkNothingClaimed(t)
	e.checkGoroutinesSettle(ctx, t, baseline)
}

// TestEtcdRestart stops the etcd under the kube-apiserver for a few
// seconds under the same load and starts it again on the same URL and
// data. Lists are served from the server's informer cache and the admin's
// authorization needs no etcd, so they may keep working throughout. A
// create that reserves its name in a ConfigMap first needs etcd: it stalls
// until etcd is back, or fails (503) once it has waited longer than the
// reservation's own request bound; a create that does not reserve keeps
// working. Either way a create may fail only inside the window, and must
// succeed again within etcdRecoveryBound of etcd being back. The figures
// say which kinds kept working.
func TestEtcdRestart(t *testing.T) {
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*waitTimeout)
	defer cancel()
	api := e.api(ctx, t, "cp-etcd")
	e.waitAnswering(ctx, t, api, "etcd-warmup")
	baseline, err := e.serverGoroutines(ctx)
	if err != nil {
		t.Fatalf("read the server's goroutines before the load: %v", err)
	}

	load := startLoad(api, "etcd")
	t.Cleanup(func() { load.stop() })
	load.waitWarm(t, warmRequests*testbin.SoakScale())

	f := fault{part: "etcd", what: "etcd stopped and started again on its URL and data", bound: etcdRecoveryBound, start: time.Now()}
	// The stop closes etcd's listeners at once, then blocks for about 7 s
	// waiting out the kube-apiserver's watch streams (see
	// cluster.StopEtcd), and connections already open may be answered
	// meanwhile. Only once it has returned is etcd down for everyone.
	if err := e.cluster.StopEtcd(); err != nil {
		t.Fatalf("stop etcd: %v", err)
	}
	// Proof that etcd is down: a read the kube-apiserver must take from
	// etcd (a GET without resourceVersion is a quorum read) fails. etcd is
	// started again only after it.
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	_, probeErr := e.cluster.Dynamic().Resource(v1beta1.NodeInventoryGVR).Get(pctx, e.fleet.Node(0).Name(), metav1.GetOptions{})
	pcancel()
	stopped := time.Now()
	if err := e.cluster.StartEtcd(ctx); err != nil {
		t.Fatalf("start etcd again: %v", err)
	}
	f.ready = time.Now()
	// When the kube-apiserver has its storage back, for the report. The
	// goroutine only sends: it may outlive a test that fails meanwhile.
	type readiness struct {
		at  time.Time
		err error
	}
	apiserverReady := make(chan readiness, 1)
	go func() {
		err := e.cluster.WaitReady(ctx)
		apiserverReady <- readiness{time.Now(), err}
	}()
	t.Logf("etcd stop took %v; etcd ready again %v after the stop began", stopped.Sub(f.start).Round(time.Millisecond), f.ready.Sub(f.start).Round(time.Millisecond))
	load.waitPast(t, f.windowEnd(), pastWindowRequests*testbin.SoakScale())
	outcomes := load.stop()

	if probeErr == nil {
		t.Errorf("a quorum read through the kube-apiserver succeeded while etcd was stopped: the fault did not happen as meant")
	} else {
		t.Logf("etcd-backed read while etcd was stopped failed as it must: %v", probeErr)
	}
	if r := <-apiserverReady; r.err != nil {
		t.Errorf("the kube-apiserver's /readyz never passed again after etcd came back: %v", r.err)
	} else {
		t.Logf("kube-apiserver /readyz OK again %v after etcd was ready", r.at.Sub(f.ready).Round(time.Millisecond))
	}

	f.checkLoad(t, outcomes)
	for _, k := range kinds {
		f.logOutage(t, outcomes, k)
	}

	e.checkState(ctx, t, api, f, outcomes)
	e.checkInformerResumed(ctx, t, api, "etcd-behind-server")
	if err := e.drain(ctx, api); err != nil {
		t.Fatal(err)
	}
	e.checkNothingClaimed(t)
	e.checkGoroutinesSettle(ctx, t, baseline)
}
