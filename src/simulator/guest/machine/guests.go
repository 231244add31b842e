package machine

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/echo"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/envd"
)

// guests are what a claimed sandbox serves inside: envd and the echo
// guests, each on 127.0.0.1, so they are reached the way any listener a
// command opens is, through the sandbox's own loopback.
type guests struct {
	closers []io.Closer // in start order; closed in reverse
}

// startGuests starts every guest cfg asks for, for claim c. It returns once
// all of them listen, or fails having closed the ones it started.
func startGuests(cfg Config, c Claim) (_ *guests, err error) {
	g := &guests{}
	defer func() {
		if err != nil {
			_ = g.Close()
		}
	}()
	if cfg.Envd {
		h, err := newEnvd(cfg, c)
		if err != nil {
			return nil, err
		}
		// The guest closes after its server, so no request starts a
		// process once the processes are being killed.
		g.closers = append(g.closers, h)
		// envd 0.8.0 speaks HTTP/1.1 only, as the unisolated node does.
		if err := g.serveHTTP(EnvdPort, h, false); err != nil {
			return nil, err
		}
	}
	for _, port := range cfg.EchoPorts {
		if err := g.serveHTTP(port, echo.Handler(c.ID, port), true); err != nil {
			return nil, err
		}
	}
	for _, port := range cfg.TCPEchoPorts {
		ln, err := listen(port)
		if err != nil {
			return nil, err
		}
		g.closers = append(g.closers, serveStreams(ln))
	}
	return g, nil
}

// newEnvd builds envd for the whole sandbox: its root is "/" (the sandbox's
// overlay root, all the guest's now) and its default user the sandbox's,
// whose ids its commands take.
func newEnvd(cfg Config, c Claim) (*envd.Guest, error) {
	u := currentUser()
	m := &envd.Machine{Path: u.path}
	if u.account != nil {
		m.Accounts = map[string]envd.Account{u.name: *u.account}
	}
	g, err := envd.NewHandler(envd.Config{
		Root:           "/",
		AccessToken:    accessToken(cfg, c),
		Version:        cfg.EnvdVersion,
		User:           u.name,
		Envs:           cfg.Envs,
		MaxUploadBytes: cfg.MaxUploadBytes,
		HTTP1Only:      true,
		Machine:        m,
	})
	if err != nil {
		return nil, fmt.Errorf("machine: envd: %w", err)
	}
	return g, nil
}

// accessToken is the envd access token of claim c: the value the e2b
// surface hands the SDK for it, which envd and the code interpreter both
// require; "" (no check) when cfg has no secret.
func accessToken(cfg Config, c Claim) string {
	if len(cfg.EnvdSecret) == 0 {
		return ""
	}
	return envd.DeriveAccessToken(cfg.EnvdSecret, c.Token)
}

// serveHTTP serves h on port, with h2c (prior knowledge) when asked.
func (g *guests) serveHTTP(port int, h http.Handler, h2c bool) error {
	ln, err := listen(port)
	if err != nil {
		return err
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(h2c)
	srv := &http.Server{Handler: h, Protocols: &protocols, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	// Close, not Shutdown: the sandbox is going away, and a long command
	// stream would hold a graceful shutdown up.
	g.closers = append(g.closers, srv)
	return nil
}

func listen(port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("machine: listen on port %d: %w", port, err)
	}
	return ln, nil
}

// Close stops every guest, the last started first.
func (g *guests) Close() error {
	var errs []error
	for i := len(g.closers) - 1; i >= 0; i-- {
		if err := g.closers[i].Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	g.closers = nil
	return errors.Join(errs...)
}
