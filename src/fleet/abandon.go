package fleet

import (
	"context"
	"errors"
)

// Abandon releases sb in the background: a sandbox the caller claimed but
// cannot use, typically because its node stopped answering right after the
// claim. A hung node cannot be released now, and its sandbox would stay
// claimed for nobody until its lease ends, so the release is retried with
// the backoff of the late-grant checks (orphanFirstWait doubling to
// orphanMaxWait) until the node answers it (released, or already gone),
// the sandbox's lease ends, or Close.
func (f *Fleet) Abandon(sb Sandbox) {
	f.bg.Go(func() {
		for wait := orphanFirstWait; ; wait = min(2*wait, orphanMaxWait) {
			err := f.Release(context.Background(), sb)
			if err == nil || errors.Is(err, ErrNotFound) {
				return
			}
			if !sb.Deadline.IsZero() && f.cfg.Clock.Now().After(sb.Deadline) {
				f.log.Info("Gave up releasing an abandoned sandbox; its lease ended", "sandbox", sb.ID, "err", err)
				return
			}
			select {
			case <-f.done:
				return
			case <-f.cfg.Clock.After(wait):
			}
		}
	})
}
