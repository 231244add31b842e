package serve

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The socket-activation convention of systemd (sd_listen_fds(3)): a parent
// that bound the listening sockets itself hands them over at exec as the
// file descriptors ListenFDStart .. ListenFDStart+LISTEN_FDS-1, optionally
// named, colon-separated, in LISTEN_FDNAMES. LISTEN_PID names the process
// they are for; it is checked only when set, since a parent starting a
// child with fork+exec in one call (Go's os/exec) cannot know the child's
// pid in time to set it.
const (
	ListenFDsEnv     = "LISTEN_FDS"
	ListenFDNamesEnv = "LISTEN_FDNAMES"
	ListenPIDEnv     = "LISTEN_PID"
	ListenFDStart    = 3
)

// inheritedSocket is one listening socket handed over at exec, not claimed
// yet.
type inheritedSocket struct {
	name string // from LISTEN_FDNAMES, or "fd N"; for logs only
	ln   net.Listener
}

// inherited is the process's inherited sockets. They are read from the
// environment once, at the first claim; each is claimed at most once.
var inherited struct {
	once sync.Once
	mu   sync.Mutex
	left []inheritedSocket
	// problems are descriptors that could not be used (not a TCP
	// listener, a bad count) or a LISTEN_PID of another process; logged
	// once by CloseUnclaimedListeners.
	problems []string
	reported bool
}

// loadInherited reads the convention's variables and takes the
// descriptors they name, then unsets the variables, so that a process this
// one starts does not take the descriptors (which it does not have) for
// its own.
func loadInherited() {
	count, set := os.LookupEnv(ListenFDsEnv)
	names, pid := os.Getenv(ListenFDNamesEnv), os.Getenv(ListenPIDEnv)
	for _, name := range []string{ListenFDsEnv, ListenFDNamesEnv, ListenPIDEnv} {
		_ = os.Unsetenv(name)
	}
	if !set {
		return
	}
	if pid != "" && pid != strconv.Itoa(os.Getpid()) {
		// The variables leaked from an ancestor through a process that did
		// not clear them: the descriptors, if any, are not ours to take.
		inherited.problems = append(inherited.problems,
			fmt.Sprintf("%s=%s is not this process (%d): the %s=%s descriptors were left alone", ListenPIDEnv, pid, os.Getpid(), ListenFDsEnv, count))
		return
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 {
		inherited.problems = append(inherited.problems, fmt.Sprintf("%s=%q is not a count: no descriptor taken", ListenFDsEnv, count))
		return
	}
	var labels []string
	if names != "" {
		labels = strings.Split(names, ":")
	}
	for i := range n {
		fd := ListenFDStart + i
		label := "fd " + strconv.Itoa(fd)
		if i < len(labels) && labels[i] != "" {
			label = labels[i] + " (" + label + ")"
		}
		ln, err := listenerFromFD(fd, label)
		if err != nil {
			inherited.problems = append(inherited.problems, fmt.Sprintf("inherited %s: %v", label, err))
			continue
		}
		inherited.left = append(inherited.left, inheritedSocket{name: label, ln: ln})
	}
}

// listenerFromFD makes a TCP listener of the inherited descriptor fd. A
// descriptor that is not a listening socket is left alone: when the
// variables are wrong it may be anything this process opened itself. A
// socket's descriptor is closed once the listener holds its duplicate,
// which, like everything Go opens, is closed on exec, while an inherited
// descriptor is not.
func listenerFromFD(fd int, label string) (net.Listener, error) {
	if err := isListeningSocket(fd); err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), label)
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("not a usable listening socket: %w", err)
	}
	if _, ok := ln.Addr().(*net.TCPAddr); !ok {
		_ = ln.Close()
		return nil, fmt.Errorf("a %s socket, not TCP", ln.Addr().Network())
	}
	return ln, nil
}

// ClaimInheritedListener returns the listening socket this process was
// handed at exec (see the package comment) that is bound to addr, and
// takes it off the ones left, so no other listener gets it; nil when none
// is. Listen calls it: only code that binds listeners without Listen needs
// to. name is the socket's name for logs.
func ClaimInheritedListener(addr string) (ln net.Listener, name string) {
	inherited.once.Do(loadInherited)
	inherited.mu.Lock()
	defer inherited.mu.Unlock()
	for i, s := range inherited.left {
		if boundTo(s.ln.Addr().(*net.TCPAddr), addr) {
			inherited.left = append(inherited.left[:i], inherited.left[i+1:]...)
			return s.ln, s.name
		}
	}
	return nil, ""
}

// CloseUnclaimedListeners closes the inherited sockets no listener has
// claimed, so a port nothing will serve refuses connections rather than
// leaving them unanswered in its backlog, and logs them (and descriptors
// that could not be used) as warnings: a socket unit and the flags
// disagree. Server.Serve calls it the first time a server starts serving,
// when every listener of the process is bound; a process that serves
// without Server calls it once its listeners are bound.
func CloseUnclaimedListeners(logger *slog.Logger) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	inherited.once.Do(loadInherited)
	inherited.mu.Lock()
	defer inherited.mu.Unlock()
	if !inherited.reported {
		for _, p := range inherited.problems {
			logger.Warn("inherited listening socket not used", "problem", p)
		}
		inherited.reported = true
	}
	for _, s := range inherited.left {
		logger.Warn("closing an inherited listening socket no listener is configured for", "socket", s.name, "address", s.ln.Addr().String())
		_ = s.ln.Close()
	}
	inherited.left = nil
}

// boundTo reports whether a socket bound at got serves the configured
// address want: the same port (never 0: that asks for a fresh one) and
// the same IP, where an empty or unspecified host (":8080", "0.0.0.0:8080",
// "[::]:8080") matches a socket bound to any unspecified address, since Go
// and systemd both bind those dual-stack. A host name never matches: what
// it resolves to may change, and the flag should name the socket's
// address.
func boundTo(got *net.TCPAddr, want string) bool {
	host, portName, err := net.SplitHostPort(want)
	if err != nil {
		return false
	}
	port, err := net.LookupPort("tcp", portName)
	if err != nil || port == 0 || port != got.Port {
		return false
	}
	gotIP, ok := netip.AddrFromSlice(got.IP)
	if !ok {
		return false
	}
	gotIP = gotIP.Unmap()
	if host == "" {
		return gotIP.IsUnspecified()
	}
	wantIP, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	wantIP = wantIP.Unmap()
	if wantIP.IsUnspecified() {
		return gotIP.IsUnspecified()
	}
	return wantIP.WithZone("") == gotIP.WithZone("")
}
