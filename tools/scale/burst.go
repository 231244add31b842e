package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/tests/apiserverenv"
	"github.com/cocoonstack/sandbox-operator/tools/scale/procstat"
	"github.com/cocoonstack/sandbox-operator/tools/scale/writecount"
)

const (
	burstNamespace = "scale-burst"
	// runningTimeout bounds the wait for every created sandbox to be seen
	// Running, from the burst's start.
	runningTimeout = 3 * time.Minute
	// writeSettle extends the write-count window past the last Running
	// sandbox, so the nodes' publishes that carry the new claims are in
	// it.
	writeSettle = 2 * publishInterval
	// deleteParallel bounds concurrent deletes during cleanup.
	deleteParallel = 32
	// maxErrorSamples bounds the distinct errors a run keeps.
	maxErrorSamples = 5
)

// BurstResults is the burst phase: many concurrent creates, through the
// kube-apiserver and through the e2b surface.
type BurstResults struct {
	Size int `json:"size"`
	// Idle is the write counts over an idle window right before the
	// bursts (the simulated nodes publishing their NodeInventory every
	// second is the background).
	Idle writecount.WriteCounts `json:"idle"`
	// IdleServerCPUSeconds is the sandbox-apiserver's CPU time over the
	// idle window: its background (the informer decoding those publishes,
	// leader election, metrics).
	IdleServerCPUSeconds float64   `json:"idleServerCPUSeconds"`
	Kube                 *BurstRun `json:"kube,omitempty"`
	E2B                  *BurstRun `json:"e2b,omitempty"`
}

// BurstRun is one burst.
type BurstRun struct {
	Surface     string `json:"surface"`
	Description string `json:"description"`
	Requested   int    `json:"requested"`
	Created     int    `json:"created"`
	Failed      int    `json:"failed"`
	// Errors are up to maxErrorSamples distinct failures; StatusCodes
	// counts the e2b answers by HTTP status.
	Errors      []string       `json:"errors,omitempty"`
	StatusCodes map[string]int `json:"statusCodes,omitempty"`
	// Ack is the create-ack latency of each successful create, from the
	// release of the start barrier; AllAckedSeconds when the last
	// answer (success or not) came back.
	Ack             Distribution `json:"ack"`
	AllAckedSeconds float64      `json:"allAckedSeconds"`
	// Running is, per created sandbox, the time from the burst's start to
	// a watch through the kube-apiserver first seeing it Running (Ready
	// condition True); AllRunningSeconds is the last of them, SeenRunning
	// how many were seen.
	Running           Distribution `json:"running"`
	AllRunningSeconds float64      `json:"allRunningSeconds"`
	SeenRunning       int          `json:"seenRunning"`
	// ListedRunning is the Running sandboxes a list of the namespace
	// through the kube-apiserver shows once all were seen (or the wait
	// gave up).
	ListedRunning int `json:"listedRunning"`
	// WatchRestarts is how often the tracking watch had to be reopened.
	WatchRestarts int `json:"watchRestarts"`
	// Writes are the kube-apiserver's and etcd's writes over the burst
	// window: from just before the burst for as long as the idle window,
	// or until two publish intervals after the last sandbox was Running
	// if that is later.
	Writes BurstWrites `json:"writes"`
	// ServerCPUSeconds is the sandbox-apiserver's CPU time over the same
	// window, ServerPeakRSSBytes its peak resident set in it.
	ServerCPUSeconds   float64 `json:"serverCPUSeconds"`
	ServerPeakRSSBytes uint64  `json:"serverPeakRSSBytes"`
	// ServerCPUPerClaimMs is ServerCPUSeconds less the idle window's CPU
	// scaled to this window's length, per created sandbox: what one
	// create, its watch events and its share of the list after cost the
	// server.
	ServerCPUPerClaimMs float64 `json:"serverCPUPerClaimMs"`
	// CleanupSeconds is deleting every created sandbox until the fleet
	// holds no claims; DeleteFailed the deletes that failed.
	CleanupSeconds float64 `json:"cleanupSeconds"`
	DeleteFailed   int     `json:"deleteFailed"`
}

// BurstWrites splits a burst's writes into what the burst caused and the
// background.
type BurstWrites struct {
	// Raw is counted over the burst window; Idle is the idle window's
	// counts scaled to the burst window's length (a factor of about 1:
	// the windows are as long unless the burst took longer); Net = Raw -
	// Idle; NetPerClaim = Net / Created. The background is mostly the
	// nodes' publishes (one per node per publish interval), which come in
	// whole publishes, so Net is exact only to about one round of them
	// either way.
	Raw         writecount.WriteCounts `json:"raw"`
	Idle        writecount.WriteCounts `json:"idle"`
	Net         writecount.WriteCounts `json:"net"`
	NetPerClaim writecount.WriteCounts `json:"netPerClaim"`
}

func runBurstPhase(ctx context.Context, e *Env, cfg Config, log func(string, ...any)) (*BurstResults, error) {
	idle := time.Duration(cfg.IdleWindowSeconds * float64(time.Second))
	res := &BurstResults{Size: cfg.Burst}
	if err := e.waitNoClaims(ctx, time.Minute); err != nil {
		return res, err
	}
	log("burst: idle window of %v", idle)
	w0, err := e.writeCounts(ctx)
	if err != nil {
		return res, err
	}
	idleU0, err := e.serverUsage()
	if err != nil {
		return res, err
	}
	select {
	case <-time.After(idle):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	w1, err := e.writeCounts(ctx)
	if err != nil {
		return res, err
	}
	idleU1, err := e.serverUsage()
	if err != nil {
		return res, err
	}
	res.Idle = writecount.Diff(w0, w1)
	res.IdleServerCPUSeconds = procstat.CPUDelta(idleU0, idleU1)

	kube := &burster{
		e: e, n: cfg.Burst, idle: res.Idle, idleCPU: res.IdleServerCPUSeconds, namespace: burstNamespace,
		run: &BurstRun{Surface: "kube", Description: "dynamic client Create of Sandbox objects (template annotation base) through the kube-apiserver"},
	}
	kube.create, kube.remove = kube.kubeCreate, kube.kubeDelete
	res.Kube = kube.run
	if err := kube.burst(ctx, log); err != nil {
		return res, fmt.Errorf("kube burst: %w", err)
	}

	eb := &burster{
		e: e, n: cfg.Burst, idle: res.Idle, idleCPU: res.IdleServerCPUSeconds, namespace: e2bNamespace,
		run:  &BurstRun{Surface: "e2b", Description: `POST /sandboxes {"templateID":"base","timeout":300} with X-API-Key on the e2b surface; Running as seen through the kube-apiserver`, StatusCodes: map[string]int{}},
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Burst, DisableCompression: true}, Timeout: requestTimeout},
	}
	defer eb.http.CloseIdleConnections()
	eb.create, eb.remove = eb.e2bCreate, eb.e2bDelete
	res.E2B = eb.run
	if err := eb.burst(ctx, log); err != nil {
		return res, fmt.Errorf("e2b burst: %w", err)
	}
	return res, nil
}

// burster runs one burst through one surface.
type burster struct {
	e         *Env
	n         int
	idle      writecount.WriteCounts
	idleCPU   float64 // the server's CPU seconds over the idle window
	namespace string
	run       *BurstRun
	http      *http.Client

	// create makes create i and returns the key the tracker knows the
	// sandbox by (its name, or its sandboxd id for e2b) and the handle
	// remove takes.
	create func(ctx context.Context, i int) (key, handle string, err error)
	remove func(ctx context.Context, handle string) error

	mu     sync.Mutex
	errors map[string]bool
}

func (b *burster) burst(ctx context.Context, log func(string, ...any)) error {
	e, run := b.e, b.run
	run.Requested = b.n
	b.errors = map[string]bool{}
	tracker, err := trackRunning(ctx, e.sandboxes.Namespace(b.namespace))
	if err != nil {
		return err
	}
	defer tracker.stop()

	type outcome struct {
		key, handle string
		ack         time.Duration
		err         error
	}
	outcomes := make([]outcome, b.n)
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	var began time.Time
	for i := range b.n {
		ready.Add(1)
		done.Go(func() {
			ready.Done()
			<-start
			key, handle, err := b.create(ctx, i)
			outcomes[i] = outcome{key: key, handle: handle, ack: time.Since(began), err: err}
		})
	}
	// Every goroutine is at <-start, or a step from it (ready.Done is
	// the last thing it does first): closing start releases them all at
	// once either way, so nothing more is waited for.
	ready.Wait()

	w0, err := e.writeCounts(ctx)
	if err != nil {
		close(start)
		done.Wait()
		return err
	}
	_ = procstat.ResetPeakRSS(e.server.Pid())
	u0, err := e.serverUsage()
	if err != nil {
		close(start)
		done.Wait()
		return err
	}
	log("burst: %s: %d concurrent creates", run.Surface, b.n)
	began = time.Now()
	close(start)
	done.Wait()
	run.AllAckedSeconds = time.Since(began).Seconds()

	var acks []float64
	var keys, handles []string
	for _, o := range outcomes {
		if o.err != nil {
			run.Failed++
			b.noteError(o.err)
			continue
		}
		run.Created++
		acks = append(acks, o.ack.Seconds())
		keys = append(keys, o.key)
		handles = append(handles, o.handle)
	}
	run.Ack = summarize(acks)
	run.Errors = b.errorSamples()

	// Every created sandbox Running, as the watch sees it.
	rctx, cancel := context.WithDeadline(ctx, began.Add(runningTimeout))
	_ = wait.PollUntilContextCancel(rctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return tracker.count(keys) == len(keys), nil
	})
	cancel()
	var running []float64
	for _, k := range keys {
		if at, ok := tracker.seen(k); ok {
			d := max(at.Sub(began), 0)
			running = append(running, d.Seconds())
		}
	}
	run.Running = summarize(running)
	run.SeenRunning = len(running)
	run.AllRunningSeconds = run.Running.Max
	run.WatchRestarts = tracker.restarts()
	log("burst: %s: %d created, %d failed; ack p50 %.0fms p99 %.0fms; all acked %.2fs; %d Running, all after %.2fs",
		run.Surface, run.Created, run.Failed, run.Ack.P50*1e3, run.Ack.P99*1e3, run.AllAckedSeconds, run.SeenRunning, run.AllRunningSeconds)

	// The sandboxes as a list through the kube-apiserver shows them.
	if list, err := e.sandboxes.Namespace(b.namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range list.Items {
			if isRunning(&list.Items[i]) {
				run.ListedRunning++
			}
		}
	}

	// The write window is as long as the idle one (so the background is
	// the same), or longer when the burst needs it: it ends writeSettle
	// after the last sandbox was seen Running at the earliest.
	end := w0.Time().Add(time.Duration(b.idle.Seconds * float64(time.Second)))
	if settled := began.Add(time.Duration(run.AllRunningSeconds*float64(time.Second)) + writeSettle); settled.After(end) {
		end = settled
	}
	select {
	case <-time.After(time.Until(end)):
	case <-ctx.Done():
	}
	w1, werr := e.writeCounts(ctx)
	u1, uerr := e.serverUsage()
	if werr == nil {
		raw := writecount.Diff(w0, w1)
		idle := b.idle.Scaled(raw.Seconds/b.idle.Seconds, raw.Seconds)
		net := raw.Minus(idle)
		perClaim := writecount.WriteCounts{}
		if run.Created > 0 {
			perClaim = net.Scaled(1/float64(run.Created), raw.Seconds)
		}
		run.Writes = BurstWrites{Raw: raw, Idle: idle, Net: net, NetPerClaim: perClaim}
	}
	if uerr == nil {
		run.ServerCPUSeconds = procstat.CPUDelta(u0, u1)
		run.ServerPeakRSSBytes = u1.PeakRSSBytes
		if run.Created > 0 && b.idle.Seconds > 0 {
			window := time.Since(began).Seconds()
			background := b.idleCPU * window / b.idle.Seconds
			run.ServerCPUPerClaimMs = max(run.ServerCPUSeconds-background, 0) / float64(run.Created) * 1e3
		}
	}

	// Clean up whatever happened above.
	cleanupBegan := time.Now()
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer ccancel()
	run.DeleteFailed = b.removeAll(cctx, handles)
	noClaims := e.waitNoClaims(cctx, 2*time.Minute)
	run.CleanupSeconds = time.Since(cleanupBegan).Seconds()

	switch {
	case werr != nil:
		return werr
	case uerr != nil:
		return uerr
	case noClaims != nil:
		return noClaims
	case run.DeleteFailed > 0:
		return fmt.Errorf("%d deletes failed", run.DeleteFailed)
	case run.SeenRunning < run.Created:
		return fmt.Errorf("only %d of %d created sandboxes were seen Running within %v", run.SeenRunning, run.Created, runningTimeout)
	}
	return ctx.Err()
}

// removeAll removes every handle, a few at a time, and returns the
// failures.
func (b *burster) removeAll(ctx context.Context, handles []string) int {
	sem := make(chan struct{}, deleteParallel)
	var mu sync.Mutex
	failed := 0
	var wg sync.WaitGroup
	for _, h := range handles {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := b.remove(ctx, h); err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
				b.noteError(fmt.Errorf("delete: %w", err))
			}
		})
	}
	wg.Wait()
	b.run.Errors = b.errorSamples()
	return failed
}

func (b *burster) noteError(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	msg := err.Error()
	if len(b.errors) < maxErrorSamples {
		b.errors[msg] = true
	}
}

func (b *burster) errorSamples() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.errors))
	for m := range b.errors {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// kubeCreate creates Sandbox burst-<i> naming the base template.
func (b *burster) kubeCreate(ctx context.Context, i int) (string, string, error) {
	name := fmt.Sprintf("burst-%05d", i)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiserverenv.Group + "/" + apiserverenv.Version,
		"kind":       "Sandbox",
		"metadata": map[string]any{
			"name":        name,
			"namespace":   b.namespace,
			"annotations": map[string]any{sandbox.AnnotationTemplate: templateBase},
		},
		"spec": map[string]any{},
	}}
	if _, err := b.e.sandboxes.Namespace(b.namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return "", "", err
	}
	return name, name, nil
}

func (b *burster) kubeDelete(ctx context.Context, name string) error {
	err := b.e.sandboxes.Namespace(b.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// e2bCreate is the e2b SDK's create: POST /sandboxes.
func (b *burster) e2bCreate(ctx context.Context, _ int) (string, string, error) {
	body := []byte(`{"templateID":"` + templateBase + `","timeout":300}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.e.e2bURL+"/sandboxes", bytes.NewReader(body))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", b.e.e2bKey)
	resp, err := b.http.Do(req)
	if err != nil {
		b.countStatus("transport-error")
		return "", "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	b.countStatus(strconv.Itoa(resp.StatusCode))
	if err != nil {
		return "", "", err
	}
	if resp.StatusCode != http.StatusCreated {
		return "", "", fmt.Errorf("POST /sandboxes: %s: %s", resp.Status, strings.TrimSpace(string(raw)))
	}
	var sb struct {
		SandboxID string `json:"sandboxID"`
	}
	if err := json.Unmarshal(raw, &sb); err != nil || sb.SandboxID == "" {
		return "", "", fmt.Errorf("POST /sandboxes answered %s (%v)", raw, err)
	}
	return normalizeID(sb.SandboxID), sb.SandboxID, nil
}

func (b *burster) e2bDelete(ctx context.Context, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, b.e.e2bURL+"/sandboxes/"+id, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", b.e.e2bKey)
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("DELETE /sandboxes/%s: %s: %s", id, resp.Status, strings.TrimSpace(string(raw)))
	}
	return nil
}

func (b *burster) countStatus(code string) {
	b.mu.Lock()
	b.run.StatusCodes[code]++
	b.mu.Unlock()
}

// normalizeID is a sandboxd id in the DNS-safe spelling the e2b surface
// answers with (sb-…; the inventory spells it sb_…).
func normalizeID(id string) string { return strings.ReplaceAll(id, "_", "-") }

// runningTracker watches a namespace's sandboxes through the
// kube-apiserver and records when each is first seen Running, by name and
// by sandboxd id.
type runningTracker struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	first    map[string]time.Time
	nRestart int
}

// trackRunning lists the namespace and starts watching it from there.
func trackRunning(ctx context.Context, client dynamic.ResourceInterface) (*runningTracker, error) {
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list before tracking: %w", err)
	}
	// The watch lives on the tracker's own context, so stop ends it.
	ctx, cancel := context.WithCancel(ctx)
	w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch: %w", err)
	}
	t := &runningTracker{cancel: cancel, done: make(chan struct{}), first: map[string]time.Time{}}
	go t.loop(ctx, client, w, list.GetResourceVersion())
	return t, nil
}

func (t *runningTracker) loop(ctx context.Context, client dynamic.ResourceInterface, w watch.Interface, rv string) {
	defer close(t.done)
	for {
		t.follow(ctx, w, &rv)
		if ctx.Err() != nil {
			return
		}
		// The server ended the watch (a watcher that fell behind is
		// dropped): resume from the last revision, or relist when that is
		// gone.
		t.mu.Lock()
		t.nRestart++
		t.mu.Unlock()
		for {
			var err error
			if w, err = client.Watch(ctx, metav1.ListOptions{ResourceVersion: rv}); err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			list, err := client.List(ctx, metav1.ListOptions{})
			if err != nil {
				// The tool's retry pace against a server that fails the
				// relist: nothing announces it would answer now.
				select {
				case <-ctx.Done():
					return
				case <-time.After(pollEvery):
				}
				continue
			}
			now := time.Now()
			for i := range list.Items {
				t.observe(&list.Items[i], now)
			}
			rv = list.GetResourceVersion()
		}
	}
}

// follow records w's events until it ends or ctx does.
func (t *runningTracker) follow(ctx context.Context, w watch.Interface, rv *string) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			now := time.Now()
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				t.observe(u, now)
			}
			if v := u.GetResourceVersion(); v != "" && ev.Type != watch.Error {
				*rv = v
			}
		}
	}
}

// observe records u's first Running sighting.
func (t *runningTracker) observe(u *unstructured.Unstructured, at time.Time) {
	if !isRunning(u) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := []string{u.GetName()}
	if id := u.GetAnnotations()[sandbox.AnnotationID]; id != "" {
		keys = append(keys, normalizeID(id))
	}
	for _, k := range keys {
		if _, ok := t.first[k]; !ok {
			t.first[k] = at
		}
	}
}

// isRunning is the Ready condition being True, which the server sets for
// a sandbox its node reports Running.
func isRunning(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func (t *runningTracker) seen(key string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.first[key]
	return at, ok
}

func (t *runningTracker) count(keys []string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, k := range keys {
		if _, ok := t.first[k]; ok {
			n++
		}
	}
	return n
}

func (t *runningTracker) restarts() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nRestart
}

func (t *runningTracker) stop() {
	t.cancel()
	<-t.done
}
