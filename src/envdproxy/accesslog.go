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
}

// recorder notes the status and size of the answer for the access line.
type recorder struct {
	serve.Recorder
	line *accessLine
}

func (p *Proxy) logAccess(line *accessLine, rec *recorder, start time.Time) {
	if !p.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	status := cmp.Or(rec.Status, http.StatusOK) // 0: the handler wrote nothing
	attrs := []slog.Attr{
		slog.String("method", line.method),
		slog.String("path", line.path),
		slog.String("proto", line.proto),
		slog.Int("status", status),
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
