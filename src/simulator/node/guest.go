package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/serve"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

var (
	errNoGuestService = errors.New("no guest service on that port")
	errGuestGone      = errors.New("sandbox destroyed")
)

// guestSet is one sandbox's guest: the services of Config.Guests, each
// started on its own 127.0.0.1 listener the first time the relay reaches
// its port (a warm claim stays a map pop), stopped on hibernate and for
// good on release.
type guestSet struct {
	specs   []Guest
	scratch string
	log     *slog.Logger
	bodies  serve.BodyLimits
	// machine, when set, is the sandbox's isolated machine: its guest
	// services run inside it, and specs are not used. control is the
	// machine program's own port, which no client may reach.
	machine *isolate.Sandbox
	control int
	// handedOver is closed once the machine's program has the claim (or
	// failed to take it: handOverErr); dials wait for it, so a claim can
	// answer before the hand-over is done.
	handedOver  chan struct{}
	handOverErr error

	mu       sync.Mutex
	closed   bool
	running  map[int]*guestServer
	handlers map[int]http.Handler // built once per sandbox, kept across hibernate
}

type guestServer struct {
	ln   net.Listener
	srv  *http.Server // HTTP guests
	addr string

	mu    sync.Mutex
	conns map[net.Conn]struct{} // stream guests
	wg    sync.WaitGroup
}

func newGuestSet(specs []Guest, scratch string, log *slog.Logger, bodies serve.BodyLimits) *guestSet {
	return &guestSet{specs: specs, scratch: scratch, log: log, bodies: bodies}
}

// ensure starts the service on port if it is not running and returns its
// loopback address.
func (g *guestSet) ensure(port int, info SandboxInfo) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return "", errGuestGone
	}
	if s := g.running[port]; s != nil {
		return s.addr, nil
	}
	var spec *Guest
	for i := range g.specs {
		if g.specs[i].Port == port {
			spec = &g.specs[i]
			break
		}
	}
	if spec == nil {
		return "", errNoGuestService
	}
	if err := os.MkdirAll(g.scratch, 0o700); err != nil {
		return "", fmt.Errorf("guest scratch dir: %w", err)
	}
	info.ScratchDir = g.scratch

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("guest listener for port %d: %w", port, err)
	}
	s := &guestServer{ln: ln, addr: ln.Addr().String()}
	if spec.HTTP != nil {
		h := g.handlers[port]
		if h == nil {
			if h, err = spec.HTTP(info); err != nil {
				_ = ln.Close()
				return "", fmt.Errorf("guest handler for port %d: %w", port, err)
			}
			if g.handlers == nil {
				g.handlers = map[int]http.Handler{}
			}
			g.handlers[port] = h
		}
		// Request bodies are bounded as on every listener of the system,
		// so a client reaching the relay directly cannot park a guest
		// request (and its descriptors) on a body it never finishes.
		s.srv = &http.Server{Handler: serve.BoundBodies(h, g.bodies), ReadHeaderTimeout: 30 * time.Second,
			ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelDebug)}
		protocols := new(http.Protocols)
		protocols.SetHTTP1(true)
		protocols.SetUnencryptedHTTP2(spec.H2C)
		s.srv.Protocols = protocols
		s.wg.Add(1)
		go func() { defer s.wg.Done(); _ = s.srv.Serve(ln) }()
	} else {
		s.conns = map[net.Conn]struct{}{}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.acceptStreams(spec.Stream, info) }()
	}
	if g.running == nil {
		g.running = map[int]*guestServer{}
	}
	g.running[port] = s
	return s.addr, nil
}

func (s *guestServer) acceptStreams(handle func(SandboxInfo, net.Conn), info SandboxInfo) {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.conns == nil { // stopping
			s.mu.Unlock()
			_ = conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, conn)
				s.mu.Unlock()
				_ = conn.Close()
			}()
			handle(info, conn)
		}()
	}
}

func (s *guestServer) close() {
	if s.srv != nil {
		_ = s.srv.Close()
	} else {
		_ = s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			_ = c.Close()
		}
		s.conns = nil
		s.mu.Unlock()
	}
	s.wg.Wait()
}

// attach makes m the sandbox's machine; its claim is yet to be handed over.
func (g *guestSet) attach(m *isolate.Sandbox, control int) {
	g.machine, g.control, g.handedOver = m, control, make(chan struct{})
}

// guestDialTimeout bounds one connection to a guest port once the guest
// is there to take it.
const guestDialTimeout = 5 * time.Second

// dial connects to the guest service on port: inside the machine, or the
// in-process service (started if needed).
func (g *guestSet) dial(ctx context.Context, port int, info SandboxInfo) (net.Conn, error) {
	if g.machine != nil {
		if port == g.control {
			return nil, errNoGuestService
		}
		// The hand-over ends by itself within deliverTimeout (taken, or
		// failed and the sandbox released), so the wait needs no bound of
		// its own beyond the caller's: a shorter one turned a claim whose
		// machine was slow to take it on a loaded host into "guest
		// unreachable" while the hand-over was still going to succeed.
		select {
		case <-g.handedOver:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if g.handOverErr != nil {
			return nil, g.handOverErr
		}
		ctx, cancel := context.WithTimeout(ctx, guestDialTimeout)
		defer cancel()
		return g.machine.Dial(ctx, port)
	}
	addr, err := g.ensure(port, info)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: guestDialTimeout}
	return d.DialContext(ctx, "tcp", addr)
}

// saveDisk copies the sandbox's disk (fork, checkpoint) to dst: the
// machine's writable layer, or the in-process guests' scratch directory.
func (g *guestSet) saveDisk(dst string) error {
	if g.machine != nil {
		return g.machine.SaveLayer(dst)
	}
	return copyTreeIfExists(g.scratch, dst)
}

// wake resumes a stopped guest: a machine thaws with its memory intact;
// in-process services start again on their next dial.
func (g *guestSet) wake() {
	if g.machine != nil {
		if err := g.machine.Thaw(); err != nil {
			g.log.Warn("wake: thawing the machine failed", "sandbox", g.machine.ID(), "err", err)
		}
	}
}

// stop shuts every running service down (hibernate); ensure may start them
// again after a wake. A machine is frozen instead: its processes stop
// where they are and keep their memory.
func (g *guestSet) stop() {
	if g.machine != nil {
		if err := g.machine.Freeze(); err != nil {
			g.log.Warn("hibernate: freezing the machine failed", "sandbox", g.machine.ID(), "err", err)
		}
		return
	}
	g.mu.Lock()
	running := g.running
	g.running = nil
	g.mu.Unlock()
	for _, s := range running {
		s.close()
	}
}

// destroy stops the guest for good (release, reap, node close) and closes
// every handler that is an io.Closer, so a guest can end what it started.
func (g *guestSet) destroy() {
	if g.machine != nil {
		_ = g.machine.Close()
		return
	}
	g.mu.Lock()
	g.closed = true
	handlers := g.handlers
	g.handlers = nil
	g.mu.Unlock()
	g.stop()
	for _, h := range handlers {
		if c, ok := h.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// GuestAddr starts (if needed) the guest service of a live, running
// sandbox on port and returns its loopback address, for tests that want to
// reach a guest without the relay.
func (n *Node) GuestAddr(id string, port int) (string, error) {
	n.mu.Lock()
	sb := n.sandboxes[id]
	if sb == nil {
		n.mu.Unlock()
		return "", fmt.Errorf("node %s: no sandbox %s", n.cfg.Name, id)
	}
	if sb.hibernated {
		n.mu.Unlock()
		return "", fmt.Errorf("node %s: sandbox %s is hibernated", n.cfg.Name, id)
	}
	info := SandboxInfo{ID: sb.id, Token: sb.token, Key: sb.key, ClaimRef: sb.claimRef, Tenant: sb.tenant}
	guests := sb.guests
	n.mu.Unlock()
	if guests.machine != nil {
		return "", fmt.Errorf("node %s: sandbox %s runs isolated; reach its ports through the relay", n.cfg.Name, id)
	}
	return guests.ensure(port, info)
}
