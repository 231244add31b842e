package serve

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsPath is where a metrics listener answers.
const MetricsPath = "/metrics"

// MetricsHandler serves what g gathers in the Prometheus text format:
// the process's registry (package metrics), whose metrics carry no
// sandbox id, name or token, so the handler asks for no credential; bind
// it where only the scraper reaches.
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// ListenMetrics binds a listener of its own for MetricsHandler at
// MetricsPath, kept off the serving ports so a scrape never competes with
// them for their per-client bounds and the metrics are not public.
func ListenMetrics(addr string, g prometheus.Gatherer, logger *slog.Logger) (*Server, error) {
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, MetricsHandler(g))
	return Listen(ServerConfig{Name: "metrics", Addr: addr, Handler: mux, Logger: logger})
}
