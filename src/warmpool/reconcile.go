package warmpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// NodeLister is the fleet view the driver places pools on; an
// *inventory.Store satisfies it. Nodes must answer fresh nodes only.
type NodeLister interface {
	Nodes() []inventory.Node
}

// reconciler is the leader-only loop: a pass on every watched change, on
// every poll tick (which notices node set changes and retries refusals)
// and a full pass, which re-PUTs every node and samples the warm counts,
// every sync interval.
type reconciler struct {
	client client.Client
	cache  cache.Cache
	nodes  NodeLister
	push   *pusher
	events *eventLog
	log    *slog.Logger
	clock  clock.WithTicker
	sync   time.Duration
	poll   time.Duration
	// leading is told when the loop starts and stops driving.
	leading func(bool)
	// observe hears how each pass ended.
	observe Observer
}

// NeedLeaderElection makes the manager start the loop only in the leader.
func (r *reconciler) NeedLeaderElection() bool { return true }

// Start runs the loop until ctx ends (the manager stops or the lease is lost).
func (r *reconciler) Start(ctx context.Context) error {
	kick := make(chan struct{}, 1)
	wake := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { wake() },
		UpdateFunc: func(any, any) { wake() },
		DeleteFunc: func(any) { wake() },
	}
	for _, obj := range []client.Object{&extv1beta1.SandboxWarmPool{}, &extv1beta1.SandboxTemplate{}} {
		inf, err := r.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("warm-pool driver: informer for %T: %w", obj, err)
		}
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			return fmt.Errorf("warm-pool driver: watch %T: %w", obj, err)
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
	}
	if !r.cache.WaitForCacheSync(ctx) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("warm-pool driver: caches did not sync")
	}
	r.leading(true)
	defer r.leading(false)
	r.log.Info("driving the warm pools", "syncInterval", r.sync)

	full := r.clock.NewTicker(r.sync)
	defer full.Stop()
	poll := r.clock.NewTicker(r.poll)
	defer poll.Stop()
	r.passLogged(ctx, true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-full.C():
			r.passLogged(ctx, true)
		case <-kick:
			r.passLogged(ctx, false)
		case <-poll.C():
			r.passLogged(ctx, false)
		}
	}
}

// passLogged runs a pass and tells of its end, unless this replica
// stopped driving meanwhile: a pass cut short by that neither succeeded
// nor failed.
func (r *reconciler) passLogged(ctx context.Context, full bool) {
	start := r.clock.Now()
	err := r.pass(ctx, full)
	if ctx.Err() != nil {
		return
	}
	r.observe.ObservePass(r.clock.Since(start), err)
	if err != nil {
		r.log.Error("warm-pool pass failed; retrying on the next tick", "err", err)
	}
}

// poolState is one SandboxWarmPool as a pass resolved it.
type poolState struct {
	obj     *extv1beta1.SandboxWarmPool
	demand  demand
	problem *verdict // set when the pool places nothing
}

// pass computes every node's desired pool set, PUTs what changed (or
// everything when full), then writes statuses and records events.
func (r *reconciler) pass(ctx context.Context, full bool) error {
	var list extv1beta1.SandboxWarmPoolList
	if err := r.client.List(ctx, &list); err != nil {
		return fmt.Errorf("listing SandboxWarmPools: %w", err)
	}
	pools := make([]*poolState, 0, len(list.Items))
	var demands []demand
	live := make(map[types.NamespacedName]bool, len(list.Items))
	for i := range list.Items {
		ps, err := r.resolve(ctx, &list.Items[i])
		if err != nil {
			return err
		}
		pools = append(pools, ps)
		live[ps.demand.Pool] = true
		if ps.problem == nil {
			demands = append(demands, ps.demand)
		}
	}
	r.events.forgetExcept(live)

	targets := usableNodes(r.nodes.Nodes())
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	totals := totalsByKey(demands)
	sets := desiredSets(totals, names)
	refused := r.push.push(ctx, targets, sets, full)
	for node, err := range refused {
		r.log.Info("node refused its pool set", "node", node, "err", err)
	}
	seen := observedByKey(r.push.infos(targets), totals)
	r.settle(ctx, pools, totals, seen, names, refused)
	return nil
}

// resolve maps a SandboxWarmPool to the pool key its template names.
func (r *reconciler) resolve(ctx context.Context, wp *extv1beta1.SandboxWarmPool) (*poolState, error) {
	replicas := 1 // the CRD's default, for an object that bypassed defaulting
	if wp.Spec.Replicas != nil {
		replicas = int(*wp.Spec.Replicas)
	}
	ps := &poolState{obj: wp, demand: demand{
		Pool: types.NamespacedName{Namespace: wp.Namespace, Name: wp.Name}, Replicas: replicas,
	}}
	ref := wp.Spec.TemplateRef.Name
	var tpl extv1beta1.SandboxTemplate
	err := r.client.Get(ctx, types.NamespacedName{Namespace: wp.Namespace, Name: ref}, &tpl)
	switch {
	case ref == "" || apierrors.IsNotFound(err):
		v := warning(ReasonTemplateNotFound, fmt.Sprintf("SandboxTemplate %q not found in namespace %s", ref, wp.Namespace))
		ps.problem = &v
		return ps, nil
	case err != nil:
		return nil, fmt.Errorf("reading SandboxTemplate %s/%s: %w", wp.Namespace, ref, err)
	}
	var image string
	if cs := tpl.Spec.PodTemplate.Spec.Containers; len(cs) > 0 {
		image = cs[0].Image
	}
	key, ok := sandbox.PoolKeyOf(tpl.Annotations, image)
	if !ok {
		v := warning(ReasonTemplateInvalid, fmt.Sprintf("SandboxTemplate %q names no pool template: set spec.podTemplate.spec.containers[0].image or the %s annotation", ref, sandbox.AnnotationTemplate))
		ps.problem = &v
		return ps, nil
	}
	ps.demand.Key = key
	return ps, nil
}

// usableNodes are the fresh nodes with a sandboxd address, by name.
func usableNodes(nodes []inventory.Node) []target {
	out := make([]target, 0, len(nodes))
	for _, n := range nodes {
		if n.Address != "" {
			out = append(out, target{Name: n.Name, Addr: n.Address})
		}
	}
	slices.SortFunc(out, func(a, b target) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// settle writes each pool's status (only when it changed) and records
// the pass's verdict on it.
func (r *reconciler) settle(ctx context.Context, pools []*poolState, totals map[sandbox.PoolKey]int,
	seen map[sandbox.PoolKey]observed, nodes []string, refused map[string]error) {
	// Pools sharing a key report shares of the key's counts, in
	// proportion to their replicas; order by name so every pass splits
	// the same way.
	byKey := map[sandbox.PoolKey][]*poolState{}
	for _, ps := range pools {
		if ps.problem == nil {
			byKey[ps.demand.Key] = append(byKey[ps.demand.Key], ps)
		}
	}
	want := make(map[*poolState]observed, len(pools))
	for key, group := range byKey {
		slices.SortFunc(group, func(a, b *poolState) int {
			return strings.Compare(a.demand.Pool.String(), b.demand.Pool.String())
		})
		weights := make([]int, len(group))
		for i, ps := range group {
			weights[i] = ps.demand.Replicas
		}
		o := seen[key]
		reps, ready := splitShares(o.Replicas, weights), splitShares(o.Ready, weights)
		for i, ps := range group {
			want[ps] = observed{Replicas: reps[i], Ready: ready[i]}
		}
	}

	for _, ps := range pools {
		r.events.record(ps.obj, r.verdictFor(ps, totals, nodes, refused))
		if err := r.writeStatus(ctx, ps.obj, want[ps]); err != nil && ctx.Err() == nil {
			r.log.Error("writing SandboxWarmPool status", "err", err, "pool", ps.demand.Pool.String())
		}
	}
}

func (r *reconciler) verdictFor(ps *poolState, totals map[sandbox.PoolKey]int, nodes []string, refused map[string]error) verdict {
	if ps.problem != nil {
		return *ps.problem
	}
	key, total := ps.demand.Key, totals[ps.demand.Key]
	if ps.demand.Replicas <= 0 {
		return normal(ReasonPlaced, fmt.Sprintf("no replicas wanted for pool %s", key))
	}
	if len(nodes) == 0 {
		return warning(ReasonNoNodes, fmt.Sprintf("no fresh node advertises a sandboxd address; %d replicas of pool %s wait", ps.demand.Replicas, key))
	}
	shares := Place(key, total, nodes)
	var bad []string
	for node := range shares {
		if refused[node] != nil {
			bad = append(bad, node)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return warning(ReasonNodeRefused, fmt.Sprintf("node %s refused its pool set: %v", bad[0], refused[bad[0]])+
			more(len(bad)-1))
	}
	if r.push.token == "" {
		return warning(ReasonNoToken, "the driver has no sandboxd token and sets no pools")
	}
	return normal(ReasonPlaced, fmt.Sprintf("pool %s: %d replicas over %d nodes", key, total, len(shares)))
}

func more(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d more nodes)", n)
}

// writeStatus patches status.replicas, status.readyReplicas and
// status.observedGeneration when any differs.
func (r *reconciler) writeStatus(ctx context.Context, wp *extv1beta1.SandboxWarmPool, o observed) error {
	st := wp.Status
	if int(st.Replicas) == o.Replicas && int(st.ReadyReplicas) == o.Ready && st.ObservedGeneration == wp.Generation {
		return nil
	}
	orig := wp.DeepCopy()
	wp.Status.Replicas = int32(o.Replicas)
	wp.Status.ReadyReplicas = int32(o.Ready)
	wp.Status.ObservedGeneration = wp.Generation
	if err := r.client.Status().Patch(ctx, wp, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("patching status: %w", err)
	}
	return nil
}
