package serve

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsPath is where a metrics listener answers.
const MetricsPath = "/metrics"

// MetricsHandler serves the Go runtime's and the process's metrics
// (go_goroutines, process_open_fds, memory, GC) in the Prometheus text
// format. They say nothing about sandboxes, nodes or tokens, so the handler
// asks for no credential; bind it where only the scraper reaches.
func MetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// ListenMetrics binds a listener of its own for MetricsHandler at
// MetricsPath, kept off the serving ports so a scrape never competes with
// them for their per-client bounds and the metrics are not public.
func ListenMetrics(addr string, logger *slog.Logger) (*Server, error) {
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, MetricsHandler())
	return Listen(ServerConfig{Name: "metrics", Addr: addr, Handler: mux, Logger: logger})
}
