package envdproxy

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/serve"
)

// accessLine is what one request's access log line says. It carries no
// token, no query (a signed URL's signature lives there) and no body.
type accessLine struct {
	method, path, proto string
	sandbox             string
	port                int
	auth                string
	reason              string
	// probe marks the proxy's own /healthz: logged, but not data-plane
	// traffic, so the Observer is not told of it.
	probe bool
}

// recorder notes the status and size of the answer for the access line.
type recorder struct {
	serve.Recorder
	line *accessLine
}

// status is the answer's final status; a handler that wrote nothing
// answered 200, as net/http sends it.
func (r *recorder) status() int {
	return cmp.Or(r.Status, http.StatusOK)
}

func (p *Proxy) logAccess(line *accessLine, rec *recorder, start time.Time) {
	if !p.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", line.method),
		slog.String("path", line.path),
		slog.String("proto", line.proto),
		slog.Int("status", rec.status()),
		slog.Int64("bytes", rec.Bytes),
		slog.Duration("duration", p.cfg.Clock.Since(start)),
	}
	if line.sandbox != "" {
		attrs = append(attrs, slog.String("sandbox", line.sandbox), slog.Int("port", line.port))
	}
	if line.auth != "" {
		attrs = append(attrs, slog.String("auth", line.auth))
	}
	if line.reason != "" {
		attrs = append(attrs, slog.String("reason", line.reason))
	}
	p.cfg.Logger.LogAttrs(context.Background(), slog.LevelDebug, "request", attrs...)
}
