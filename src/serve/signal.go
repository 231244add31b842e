package serve

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext ends on SIGINT or SIGTERM, which starts a graceful
// shutdown. Once it has ended the handlers are released, so a second
// signal stops the process at once, the default way.
func SignalContext() context.Context {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx
}
