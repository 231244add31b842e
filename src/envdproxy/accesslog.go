package envdproxy

import (
	"context"
	"log/slog"
	"net/http"
	"time"
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

// recorder notes the status and size of the answer. Unwrap lets
// http.ResponseController reach the server's writer for flushing,
// hijacking (Upgrade) and full duplex.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	line   *accessLine
}

func (r *recorder) WriteHeader(code int) {
	// 1xx answers other than 101 are interim; the final status follows.
	if r.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() {
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (p *Proxy) logAccess(line *accessLine, rec *recorder, start time.Time) {
	if !p.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	status := rec.status
	if status == 0 {
		status = http.StatusSwitchingProtocols // hijacked by an Upgrade
	}
	attrs := []slog.Attr{
		slog.String("method", line.method),
		slog.String("path", line.path),
		slog.String("proto", line.proto),
		slog.Int("status", status),
		slog.Int64("bytes", rec.bytes),
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
