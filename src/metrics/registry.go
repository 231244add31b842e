package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every metric of this project.
const Namespace = "sandbox_operator"

// NewRegistry is a process's registry: the Go runtime's and the process's
// own collectors (go_goroutines, process_open_fds, memory, GC), to which
// the domain metrics of this package are added.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// register adds c to reg, or returns the collector of the same
// description reg already holds: a process that builds its parts twice
// (sandbox-apiserver's tests run it more than once, against the Kubernetes
// libraries' one global registry) counts into one series, and anything
// else wrong with a metric's definition stops the process at startup.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(err)
}
