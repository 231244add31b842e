// Package serve is the serving lifecycle every binary of this repository
// shares: a Group runs the long-lived parts of a process (listeners,
// informers, background loops) under one context and joins them; a Server
// binds an HTTP listener at startup and drains it on the way out;
// CertFiles serves a certificate pair that may rotate on disk; and
// SignalContext ends on SIGINT or SIGTERM.
//
// # Inherited listeners
//
// A Server can take over a listening socket that was bound before the
// process started, following systemd's socket activation (sd_listen_fds):
// the sockets are the descriptors from 3 on, LISTEN_FDS says how many, and
// LISTEN_FDNAMES may name them (colon-separated; the names only label them
// in logs). LISTEN_PID, when set, must be this process's pid or the
// descriptors are left alone; it may be unset, as a parent that forks and
// execs in one call (Go's os/exec) cannot know the pid in time.
//
// A socket is matched to a listener by the address it is bound to, read
// from the socket itself, not by name: Listen with Addr "127.0.0.1:8080"
// takes the inherited socket bound to 127.0.0.1:8080, and ":8080" or
// "0.0.0.0:8080" one bound to any unspecified address on port 8080. A
// host name or port 0 never matches. (A name could not be the address:
// LISTEN_FDNAMES separates names with colons.) So a binary needs nothing
// for it, and its flags keep naming the addresses it serves.
//
// The variables are read once, at the first Listen, and unset then, so the
// process's own children do not take the descriptors for theirs. Each
// socket goes to one listener at most; the first Serve closes the sockets
// no listener claimed, and logs them as warnings with the descriptors
// that were not listening sockets (which are left open).
//
// Tests use it so that no port is ever picked, released and bound again
// by another process (tests/testbin: Listen, StartProcess).
package serve
