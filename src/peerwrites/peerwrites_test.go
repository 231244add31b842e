package peerwrites

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

var testKey, _ = DeriveKey("fleet-root-token")

func write(id string) Write {
	return Write{At: time.Unix(1700000000, 0), Entry: Entry{Node: "n1", Address: "10.0.0.1:7777", ID: id,
		Phase: "Running", Namespace: "team", ObjectName: "x"}}
}

// receiver is a Handler that records what it applied.
type receiver struct {
	mu      sync.Mutex
	got     []Write
	batches atomic.Int32
	entered chan struct{} // receives once per batch, before it is applied
	srv     *httptest.Server
	clk     *clocktesting.FakeClock
}

func newReceiver(t *testing.T, key []byte, slow chan struct{}) *receiver {
	t.Helper()
	r := &receiver{clk: clocktesting.NewFakeClock(time.Now()), entered: make(chan struct{}, 100)}
	h, err := NewHandler(HandlerConfig{Key: key, Clock: r.clk, Apply: func(ws []Write) {
		r.entered <- struct{}{}
		if slow != nil {
			<-slow
		}
		r.mu.Lock()
		r.got = append(r.got, ws...)
		r.mu.Unlock()
		r.batches.Add(1)
	}})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(h)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) addr() string { return strings.TrimPrefix(r.srv.URL, "http://") }

func (r *receiver) applied() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Write(nil), r.got...)
}

func startSharer(t *testing.T, key []byte, clk *clocktesting.FakeClock, timeout time.Duration, peers ...string) *Sharer {
	t.Helper()
	s, err := NewSharer(SharerConfig{Key: key, Clock: clk, Timeout: timeout, Peers: StaticPeers(peers)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func (s *Sharer) queuedLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queued)
}

// TestShareReturnsOnceEveryPeerHasTheWrite: Share is what makes a write
// visible everywhere before it is answered, so it must not return before
// each peer applied it.
func TestShareReturnsOnceEveryPeerHasTheWrite(t *testing.T) {
	a := newReceiver(t, testKey, nil)
	b := newReceiver(t, testKey, nil)
	s := startSharer(t, testKey, a.clk, 10*time.Second, a.addr(), b.addr())
	s.Share(write("sb_a1"))
	for name, r := range map[string]*receiver{"a": a, "b": b} {
		if got := r.applied(); len(got) != 1 || got[0].Entry.ID != "sb_a1" {
			t.Errorf("peer %s had applied %+v when Share returned", name, got)
		}
	}
}

// TestSharesQueuedDuringABatchGoTogether: writes made while a batch is in
// flight travel in the next one.
func TestSharesQueuedDuringABatchGoTogether(t *testing.T) {
	slow := make(chan struct{})
	r := newReceiver(t, testKey, slow)
	s := startSharer(t, testKey, r.clk, 10*time.Second, r.addr())
	var wg sync.WaitGroup
	wg.Go(func() { s.Share(write("sb_first")) })
	<-r.entered // the first batch is held at the receiver
	for i := range 50 {
		wg.Go(func() { s.Share(write("sb_more" + strconv.Itoa(i))) })
	}
	for s.queuedLen() < 50 {
		runtime.Gosched() // a condition, not a duration: the 50 Shares queue behind the held batch
	}
	close(slow)
	wg.Wait()
	if got := len(r.applied()); got != 51 {
		t.Fatalf("the peer applied %d writes, want 51", got)
	}
	if n := r.batches.Load(); n != 2 {
		t.Fatalf("51 writes went out in %d batches, want 2 (the first, then everything queued behind it)", n)
	}
}

// TestHandlerRefusesWhatItCannotTrust: a wrong key, a stale or future
// time, a missing signature, a body over the bound and a wrong method are
// refused, and nothing is applied.
func TestHandlerRefusesWhatItCannotTrust(t *testing.T) {
	r := newReceiver(t, testKey, nil)
	body, _ := json.Marshal([]Write{write("sb_x")})
	other, _ := DeriveKey("another-token")
	now := r.clk.Now()
	cases := []struct {
		name   string
		method string
		at     time.Time
		key    []byte
		body   []byte
		sig    string
		want   int
	}{
		{name: "another key", at: now, key: other, body: body, want: http.StatusUnauthorized},
		{name: "a batch from a minute ago", at: now.Add(-time.Minute), key: testKey, body: body, want: http.StatusUnauthorized},
		{name: "a batch from the future", at: now.Add(time.Minute), key: testKey, body: body, want: http.StatusUnauthorized},
		{name: "no signature", at: now, body: body, sig: "-", want: http.StatusUnauthorized},
		{name: "a signature of another body", at: now, key: testKey, body: body, sig: sign(testKey, now, []byte("[]")), want: http.StatusUnauthorized},
		{name: "over the size bound", at: now, key: testKey, body: bytes.Repeat([]byte(" "), MaxBodyBytes+1), want: http.StatusRequestEntityTooLarge},
		{name: "not JSON", at: now, key: testKey, body: []byte("{"), want: http.StatusBadRequest},
		{name: "GET", method: http.MethodGet, at: now, key: testKey, body: body, want: http.StatusMethodNotAllowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(cmp.Or(c.method, http.MethodPost), r.srv.URL+Path, bytes.NewReader(c.body))
			req.Header.Set(headerTime, strconv.FormatInt(c.at.UnixNano(), 10))
			switch {
			case c.sig == "-":
			case c.sig != "":
				req.Header.Set(headerSignature, c.sig)
			default:
				req.Header.Set(headerSignature, sign(c.key, c.at, c.body))
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("answered %d, want %d", resp.StatusCode, c.want)
			}
		})
	}
	if got := r.applied(); len(got) != 0 {
		t.Fatalf("refused batches were applied: %+v", got)
	}
}

// TestAPeerThatDoesNotAnswerCostsOneTimeout: Share is bounded, so a
// replica that hangs cannot hold up every write.
func TestAPeerThatDoesNotAnswerCostsOneTimeout(t *testing.T) {
	// An hour: were Share timed by the real clock, the test would hang
	// rather than pass.
	const timeout = time.Hour
	entered := make(chan struct{}, 1)
	hang := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang); hung.Close() })
	clk := clocktesting.NewFakeClock(time.Now())
	s := startSharer(t, testKey, clk, timeout, strings.TrimPrefix(hung.URL, "http://"))
	returned := make(chan struct{})
	go func() { s.Share(write("sb_h")); close(returned) }()
	<-entered
	// The peer holds the request; Share's timer and the request's bound
	// are both on the clock now.
	poll.Until(t, "Share and the send to wait on the clock", func() bool { return clk.Waiters() == 2 })
	clk.Step(timeout - time.Nanosecond)
	select {
	case <-returned:
		t.Fatal("Share returned before its Timeout while the peer hung")
	default:
	}
	clk.Step(time.Nanosecond)
	select {
	case <-returned:
	case <-time.After(poll.Timeout):
		t.Fatal("Share did not return once its Timeout passed on the clock")
	}
}

func TestEntryInventoryRefusesWhatNamesNoSandbox(t *testing.T) {
	good := Entry{Node: "n1", Address: "a:1", ID: "sb_0123456789abcdef", Phase: "Running", Namespace: "team", ObjectName: "x"}
	if _, ok := good.Inventory(); !ok {
		t.Fatal("a complete entry was refused")
	}
	for name, mutate := range map[string]func(*Entry){
		"no id":        func(e *Entry) { e.ID = "" },
		"a DNS id":     func(e *Entry) { e.ID = "sb-0123456789abcdef" },
		"no address":   func(e *Entry) { e.Address = "" },
		"no node":      func(e *Entry) { e.Node = "" },
		"bad name":     func(e *Entry) { e.ObjectName = "Not/A/Name" },
		"no namespace": func(e *Entry) { e.Namespace = "" },
		"bad phase":    func(e *Entry) { e.Phase = "Gone" },
	} {
		e := good
		mutate(&e)
		if _, ok := e.Inventory(); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}
