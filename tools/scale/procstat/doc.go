// Package procstat reads a process's CPU time and memory from Linux's
// /proc, so a benchmark can charge a server for what one phase cost it
// without instrumenting the server.
package procstat
