package build

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// reasonLines is how many of the failing step's last lines a failure
// reason carries, whatever the log bound dropped.
const reasonLines = 20

// maxLineBytes bounds one log line; a command printing one huge line
// must not hold the log's memory.
const maxLineBytes = 4 << 10

// Spec is what a build request names.
type Spec struct {
	Namespace string
	// Name is the template's name within Namespace; TemplateID is its
	// stable id (see TemplateID).
	Name       string
	TemplateID string
	// Tags are the tags the build publishes under; the first is the one
	// its name carried (DefaultTag when it carried none).
	Tags []string
	// Size is the sandbox size the template is built and served at.
	Size string
	// CPUCount and MemoryMB are the figures of Size, reported back.
	CPUCount int
	MemoryMB int
}

// Build is one template build. Its methods are safe for concurrent use.
type Build struct {
	ID string
	Spec

	m *Manager

	mu       sync.Mutex
	status   Status
	def      any // the definition Start was given; nil before
	queued   bool
	logs     []LogEntry
	dropped  int
	recent   []LogEntry // the current step's last lines, for a failure reason
	step     string
	reason   *Reason
	created  time.Time
	updated  time.Time
	finished time.Time
	// began is when the build got a slot; zero while it has not.
	began  time.Time
	cancel context.CancelFunc
	// queuePos is the build's 1-based place in the queue while it waits
	// for a slot, 0 otherwise.
	queuePos int
	// canceled is set by Manager.Cancel; the failure says so.
	canceled bool
	// done is closed once the build has ended.
	done chan struct{}
}

// Resize records the CPUs and memory the build's sandbox has, which the
// request may not have named.
func (b *Build) Resize(cpuCount, memoryMB int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.CPUCount, b.MemoryMB = cpuCount, memoryMB
}

// Definition is what Start was given, nil before.
func (b *Build) Definition() any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.def
}

// Log appends a line to the build's log. Lines past the manager's bound
// are dropped (and counted); the failing step's last lines are kept apart
// for the failure reason either way.
func (b *Build) Log(step, level, message string) {
	if len(message) > maxLineBytes {
		message = message[:maxLineBytes] + "…"
	}
	e := LogEntry{Timestamp: b.m.cfg.Clock.Now().UTC(), Level: level, Message: message, Step: step}
	b.mu.Lock()
	defer b.mu.Unlock()
	if step != b.step {
		b.step, b.recent = step, b.recent[:0]
	}
	if len(b.recent) == reasonLines {
		b.recent = append(b.recent[:0], b.recent[1:]...)
	}
	b.recent = append(b.recent, e)
	if len(b.logs) >= b.m.cfg.LogLines {
		b.dropped++
		return
	}
	b.logs = append(b.logs, e)
	b.updated = e.Timestamp
}

// View is a build's state at one moment.
type View struct {
	ID, TemplateID string
	Status         Status
	// Logs are the log lines from the offset asked for.
	Logs []LogEntry
	// Dropped counts the lines the log bound dropped.
	Dropped  int
	Reason   *Reason
	Created  time.Time
	Updated  time.Time
	Finished time.Time
	Spec     Spec
	// QueuePosition is the build's 1-based place in the build queue while
	// it waits for a slot (see Manager), 0 when it is not queued.
	QueuePosition int
}

// View returns the build's state with at most limit log lines from
// offset (limit 0 is all).
func (b *Build) View(offset, limit int) View {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := View{
		ID: b.ID, TemplateID: b.TemplateID, Status: b.status, Dropped: b.dropped,
		Created: b.created, Updated: b.updated, Finished: b.finished, Spec: b.Spec,
		QueuePosition: b.queuePos,
	}
	if b.reason != nil {
		r := *b.reason
		r.Logs = append([]LogEntry(nil), r.Logs...)
		v.Reason = &r
	}
	if offset < 0 {
		offset = 0
	}
	if offset < len(b.logs) {
		end := len(b.logs)
		if limit > 0 && offset+limit < end {
			end = offset + limit
		}
		v.Logs = append([]LogEntry(nil), b.logs[offset:end]...)
	}
	return v
}

// Status is the build's current state.
func (b *Build) Status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.status
}

// setQueuePosition records the build's place in the queue and, when it
// changed, logs it with what it waits for.
func (b *Build) setQueuePosition(pos, running, parallel, share int) {
	b.mu.Lock()
	changed := b.queuePos != pos
	b.queuePos = pos
	b.mu.Unlock()
	if changed {
		b.Log("", LevelInfo, QueueMessage(pos, running, parallel, share))
	}
}

// QueueMessage says where a queued build stands: its place, the slots
// taken, and the share of them one namespace may hold.
func QueueMessage(pos, running, parallel, share int) string {
	return fmt.Sprintf("Waiting for a build slot: position %d in the build queue (%d of %d slots taken; a namespace runs at most %d at once while others wait)",
		pos, running, parallel, share)
}

// finish records the build's end from the Runner's error and tells the
// Observer of a started build; a build ends once, later calls change
// nothing.
func (b *Build) finish(err error) {
	now := b.m.cfg.Clock.Now().UTC()
	b.mu.Lock()
	if b.status.Done() {
		b.mu.Unlock()
		return
	}
	b.finished, b.updated, b.cancel, b.queuePos, b.queued = now, now, nil, 0, false
	b.endLocked(err)
	started, outcome := b.def != nil, b.outcomeLocked()
	var ran time.Duration
	if !b.began.IsZero() {
		ran = now.Sub(b.began)
	}
	b.mu.Unlock()
	// Told before done closes, so whoever waits for the build's end finds
	// it counted.
	if started {
		b.m.cfg.Observer.ObserveBuild(outcome, ran)
	}
	close(b.done)
}

// endLocked sets the final status and the failure's reason.
func (b *Build) endLocked(err error) {
	if err == nil && !b.canceled {
		b.status = Ready
		return
	}
	b.status = Error
	if b.canceled {
		b.reason = &Reason{Message: errCanceled}
		return
	}
	r := &Reason{Message: err.Error()}
	if f, ok := asFailure(err); ok {
		r.Message, r.Step = f.Message, f.Step
		if f.Step == b.step {
			r.Logs = append([]LogEntry(nil), b.recent...)
		}
	}
	b.reason = r
}

// outcomeLocked is how the ended build ended: a build canceled after its
// Runner succeeded still fails as canceled, as its status says.
func (b *Build) outcomeLocked() Outcome {
	switch {
	case b.status == Ready:
		return OutcomeReady
	case b.canceled:
		return OutcomeCanceled
	default:
		return OutcomeError
	}
}
