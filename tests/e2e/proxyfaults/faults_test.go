package proxyfaults_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

const (
	// The two replicas: A is killed, B survives.
	replicaA, replicaB = 0, 1
	// transferBytes is one bulk transfer. 64 MiB stays under both the
	// replicas' --max-upload-bytes and the simulated envd's own upload
	// limit (100 MiB each by default), so neither needs raising.
	transferBytes = 64 << 20
	// holdAt is where every transfer of the fault phase waits until the
	// kill: half-way, so each replica's connections are mid-body in both
	// directions when A dies.
	holdAt = transferBytes / 2
	// hangAfter ends, as hung, a transfer still running this long after
	// the kill; a broken connection is noticed in milliseconds.
	hangAfter = 20 * time.Second
	// workTimeout bounds the retries and read-backs after the kill.
	workTimeout = time.Minute
	// perSandbox is how many uploads, and how many downloads, each replica
	// carries to each sandbox at once.
	perSandbox = 2
	// fdSlack is how many more descriptors B may hold afterwards than
	// before: keep-alive connections to the nodes and a listener's
	// accept-side stragglers, never one per transfer.
	fdSlack = 8
)

// transfer is one bulk transfer of the fault phase and what became of it.
type transfer struct {
	upload bool
	via    int
	sb     claimed
	// path is the guest file uploaded to or downloaded.
	path string
	// sent is what an upload sends; want what a download must read.
	sent content
	want digest
	hold *hold

	err   error
	ended time.Time
	// retryErr and retryTook are the retry through B of a transfer that
	// failed through A, read-back included.
	retried   bool
	retryErr  error
	retryTook time.Duration
}

func (tr *transfer) String() string {
	op := "download"
	if tr.upload {
		op = "upload"
	}
	return fmt.Sprintf("%s %s of %s via %s", op, tr.path, tr.sb.ID, replicaName(tr.via))
}

func replicaName(p int) string { return string(rune('A' + p)) }

// TestEnvdProxyReplicaKilledDuringTransfer runs bulk envd uploads and
// downloads through two sandbox-envd-proxy replicas at once and SIGKILLs
// replica A while every transfer is half-way. B's transfers complete with
// the right bytes; A's fail as broken connections, promptly, none
// hanging; each of them retried through B succeeds and leaves exactly the
// retried bytes (an upload is retried with other content, so a mix of the
// broken and the retried upload cannot pass); every sandbox still answers
// through B; B holds no more descriptors than before; nothing stays
// claimed.
func TestEnvdProxyReplicaKilledDuringTransfer(t *testing.T) {
	s := startStack(t)
	began := time.Now()

	// Each sandbox gets a source file for the downloads, uploaded through
	// B before the fault.
	seeded := make([]digest, len(s.sandboxes))
	seedErrs := make([]error, len(s.sandboxes))
	var seedMoved atomic.Int64
	var seedWG sync.WaitGroup
	for i, sb := range s.sandboxes {
		seedWG.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), workTimeout)
			defer cancel()
			seeded[i], seedErrs[i] = s.upload(ctx, replicaB, sb, "bulk/source.bin", content{seed: uint64(100 + i), size: transferBytes}, &seedMoved, nil)
		})
	}
	seedWG.Wait()
	if err := errors.Join(seedErrs...); err != nil {
		t.Fatalf("seeding the download sources: %v", err)
	}
	fdsBefore := s.settledFDs(t, replicaB)
	goroutinesBefore := s.goroutines(t, replicaB)

	// Every replica carries perSandbox uploads (each to a file of its own)
	// and perSandbox downloads (of the sandbox's source) to each sandbox.
	var reached [2]sync.WaitGroup
	var release [2]chan struct{}
	var transfers []*transfer
	for p := range s.proxies {
		release[p] = make(chan struct{})
		for i, sb := range s.sandboxes {
			for j := range 2 * perSandbox {
				reached[p].Add(1)
				tr := &transfer{upload: j%2 == 0, via: p, sb: sb, path: "bulk/source.bin", want: seeded[i],
					hold: &hold{at: holdAt, reached: reached[p].Done, release: release[p]}}
				if tr.upload {
					tr.path = fmt.Sprintf("bulk/upload-%s-%d.bin", replicaName(p), j)
					tr.sent = content{seed: uint64(1000 + 100*p + 10*i + j), size: transferBytes}
				}
				transfers = append(transfers, tr)
			}
		}
	}
	var moved [2]atomic.Int64
	// phase ends the original transfers: at the watchdog after the kill,
	// or when the test gives up before it.
	phase, endPhase := context.WithCancel(context.Background())
	defer endPhase()
	work, endWork := context.WithTimeout(context.Background(), workTimeout+hangAfter)
	defer endWork()
	var releaseOnce [2]sync.Once
	releaseAll := func() {
		for p := range release {
			releaseOnce[p].Do(func() { close(release[p]) })
		}
	}
	defer releaseAll()

	var wg sync.WaitGroup
	for _, tr := range transfers {
		wg.Go(func() {
			tr.err = s.run(phase, work, tr, &moved[tr.via])
			tr.ended = time.Now()
			// One that failed before the hold point must not keep the
			// test waiting for it to get there.
			tr.hold.arrive()
			if tr.via != replicaA || tr.err == nil {
				return
			}
			// A client whose replica died retries through another; the
			// guest must then hold exactly the retried bytes.
			tr.retried = true
			start := time.Now()
			tr.retryErr = s.retry(work, tr, &moved[replicaB])
			tr.retryTook = time.Since(start)
		})
	}
	holding := make(chan struct{})
	go func() { reached[replicaA].Wait(); reached[replicaB].Wait(); close(holding) }()
	select {
	case <-holding:
	case <-time.After(workTimeout):
		endPhase()
		releaseAll()
		wg.Wait()
		t.Fatalf("the transfers never all got half-way: %v", transferErrors(transfers))
	}
	for _, tr := range transfers {
		if tr.err != nil {
			endPhase()
			releaseAll()
			wg.Wait()
			t.Fatalf("%s failed before the kill: %v", tr, tr.err)
		}
	}
	bFDsMidway := s.fds(t, replicaB)

	// B's transfers go on first, so its relays are moving bytes, not idle,
	// when A dies; then A is killed and its clients carry on as if nothing
	// happened.
	releaseOnce[replicaB].Do(func() { close(release[replicaB]) })
	killed := time.Now()
	if err := s.proxies[replicaA].Kill(); err != nil {
		t.Fatal(err)
	}
	// Kill returns once the process is reaped: its sockets are closed by
	// then, so this bounds how much of the time to the first error is
	// the kernel's.
	reaped := time.Since(killed)
	releaseOnce[replicaA].Do(func() { close(release[replicaA]) })
	watchdog := time.AfterFunc(hangAfter, endPhase)
	defer watchdog.Stop()
	wg.Wait()

	var firstErr, lastErr, retryMax, bSlowest time.Duration
	firstErr = hangAfter
	var aFailed, bOK, retriesOK int
	for _, tr := range transfers {
		if tr.via == replicaB {
			if tr.err != nil {
				t.Errorf("%s, through the surviving replica: %v", tr, tr.err)
				continue
			}
			if !tr.ended.After(killed) {
				t.Errorf("%s finished before the kill; it was not in flight across it", tr)
			}
			bSlowest = max(bSlowest, tr.ended.Sub(killed))
			bOK++
			continue
		}
		switch {
		case tr.err == nil:
			t.Errorf("%s completed although its replica was killed half-way", tr)
			continue
		case errors.Is(tr.err, context.Canceled):
			t.Errorf("%s hung: still running %v after the kill (%v)", tr, hangAfter, tr.err)
		case !brokenConnection(tr.err):
			t.Errorf("%s failed with something other than a broken connection: %v", tr, tr.err)
		default:
			aFailed++
		}
		t.Logf("%s: failed %v after the kill: %v", tr, tr.ended.Sub(killed).Round(time.Microsecond), tr.err)
		after := tr.ended.Sub(killed)
		firstErr, lastErr = min(firstErr, after), max(lastErr, after)
		if tr.retryErr != nil {
			t.Errorf("retrying %s through B: %v", tr, tr.retryErr)
			continue
		}
		retriesOK++
		retryMax = max(retryMax, tr.retryTook)
	}

	// The sandboxes still answer through B, A's death notwithstanding.
	for _, sb := range s.sandboxes {
		if err := s.health(context.Background(), replicaB, sb); err != nil {
			t.Errorf("after the kill: %v", err)
		}
	}
	fdsAfter := s.waitFDs(t, replicaB, fdsBefore, fdSlack)
	goroutinesAfter := s.waitGoroutines(t, replicaB, goroutinesBefore, fdsBefore)

	perReplica := len(transfers) / 2
	t.Logf("FAULT envd-proxy-sigkill-transfer: sandboxes=%d transfer=%dMiB held-at=%dMiB "+
		"via-A=%d (broken %d) via-B=%d (complete %d) retried-via-B=%d (complete %d) "+
		"bytes via-A=%dMiB via-B=%dMiB (seed %dMiB, not counted) "+
		"A-reaped-after=%v kill-to-first-error-on-A=%v kill-to-last-error-on-A=%v B-finished-after-kill<=%v retry-max=%v "+
		"B-fds before=%d midway=%d after=%d B-goroutines before=%d after=%d elapsed=%v",
		len(s.sandboxes), transferBytes>>20, holdAt>>20,
		perReplica, aFailed, perReplica, bOK, perReplica, retriesOK,
		moved[replicaA].Load()>>20, moved[replicaB].Load()>>20, seedMoved.Load()>>20,
		reaped.Round(time.Microsecond), firstErr.Round(time.Microsecond), lastErr.Round(time.Microsecond), bSlowest.Round(time.Millisecond),
		retryMax.Round(time.Millisecond), fdsBefore, bFDsMidway, fdsAfter, goroutinesBefore, goroutinesAfter, time.Since(began).Round(time.Millisecond))
}

// run does tr through its replica: an upload is read back through the
// same replica and must match what was sent, a download must match the
// source. phase bounds the transfer itself, work the read-back.
func (s *stack) run(phase, work context.Context, tr *transfer, moved *atomic.Int64) error {
	if !tr.upload {
		got, err := s.download(phase, tr.via, tr.sb, tr.path, moved, tr.hold)
		if err != nil {
			return err
		}
		return same(tr.path, got, tr.want)
	}
	sent, err := s.upload(phase, tr.via, tr.sb, tr.path, tr.sent, moved, tr.hold)
	if err != nil {
		return err
	}
	got, err := s.download(work, tr.via, tr.sb, tr.path, moved, nil)
	if err != nil {
		return fmt.Errorf("reading back: %w", err)
	}
	return same(tr.path, got, sent)
}

// retry redoes a transfer that failed through A through B. An upload
// sends other bytes than the broken attempt, and the file read back must
// be exactly those: any trace of the first attempt changes its digest.
func (s *stack) retry(ctx context.Context, tr *transfer, moved *atomic.Int64) error {
	if !tr.upload {
		got, err := s.download(ctx, replicaB, tr.sb, tr.path, moved, nil)
		if err != nil {
			return err
		}
		return same(tr.path, got, tr.want)
	}
	again := content{seed: tr.sent.seed + 1<<32, size: tr.sent.size}
	sent, err := s.upload(ctx, replicaB, tr.sb, tr.path, again, moved, nil)
	if err != nil {
		return err
	}
	got, err := s.download(ctx, replicaB, tr.sb, tr.path, moved, nil)
	if err != nil {
		return fmt.Errorf("reading back: %w", err)
	}
	return same(tr.path, got, sent)
}

func same(path string, got, want digest) error {
	if got != want {
		return fmt.Errorf("%s holds %v, want %v", path, got, want)
	}
	return nil
}

// brokenConnection is an error that says the connection broke mid-body
// (reset, broken pipe, a body cut short): no HTTP answer, no content
// mismatch, and no deadline of the test's own.
func brokenConnection(err error) bool {
	var answered *statusError
	if errors.As(err, &answered) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// A dial that failed would be an OpError too, but it is no transfer
	// broken mid-way: the replica was already gone.
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	// The client's own transport closes the connection once its reader
	// sees the replica's end, so the writer of an upload body may see
	// net.ErrClosed rather than the reset itself.
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed)
}

// transferErrors lists the transfers that failed so far.
func transferErrors(transfers []*transfer) error {
	var errs []error
	for _, tr := range transfers {
		if tr.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", tr, tr.err))
		}
	}
	return errors.Join(errs...)
}

// settledFDs counts replica p's descriptors once the client's idle
// connections are closed and the count stopped falling: two counts at
// least settleGap apart agree.
func (s *stack) settledFDs(t *testing.T, p int) int {
	t.Helper()
	const settleGap = 100 * time.Millisecond
	s.clients[p].CloseIdleConnections()
	last, lastAt := s.fds(t, p), time.Now()
	poll.UntilNil(t, fmt.Sprintf("replica %d's descriptor count to settle", p), func() error {
		if time.Since(lastAt) < settleGap {
			return fmt.Errorf("%d descriptors, not compared yet", last)
		}
		now := s.fds(t, p)
		if now == last {
			return nil
		}
		err := fmt.Errorf("%d descriptors, %d a moment before", now, last)
		last, lastAt = now, time.Now()
		return err
	})
	return last
}
