// Package prometheus runs a real Prometheus server (Debian's package, which
// the build's root installs) for tests, and reads what it gathered through
// its HTTP API: instant and range queries, alerts, rule groups, targets.
// It also reads the chart's Grafana dashboard into the queries its panels
// send, so a test can check that every panel has data.
package prometheus
