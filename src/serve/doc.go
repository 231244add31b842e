// Package serve is the serving lifecycle every binary of this repository
// shares: a Group runs the long-lived parts of a process (listeners,
// informers, background loops) under one context and joins them; a Server
// binds an HTTP listener at startup and drains it on the way out;
// CertFiles serves a certificate pair that may rotate on disk; and
// SignalContext ends on SIGINT or SIGTERM.
package serve
