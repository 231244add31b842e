package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/codeinterp"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// maxClaimBytes bounds a claim body: an id and a token.
const maxClaimBytes = 64 << 10

func init() {
	isolate.Register(Program, run)
}

// program is one sandbox's guest program: unclaimed until the claim, then
// serving its guests until the context ends.
type program struct {
	cfg Config

	mu      sync.Mutex
	token   string // the claim's token: the buffered exec's credential
	claimed bool
	closed  bool
	guests  *guests
	// ci is the code-interpreter server started at boot (Config.CodeInterpreter);
	// ciReady is closed once its start is over, with ciErr its failure.
	ci      *codeinterp.Server
	ciReady chan struct{}
	ciErr   error
}

// run is the program isolate starts inside the sandbox.
func run(ctx context.Context, raw []byte) error {
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("machine: config: %w", err)
	}
	if err := cfg.check(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ControlPort)))
	if err != nil {
		return fmt.Errorf("machine: control port: %w", err)
	}
	p := &program{cfg: cfg, ciReady: make(chan struct{})}
	if cfg.CodeInterpreter {
		// Started now, not at the claim: a warm sandbox's kernel is warm.
		go p.startCodeInterpreter()
	} else {
		close(p.ciReady)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /claim", p.serveClaim)
	mux.HandleFunc("GET /ready", p.serveReady)
	mux.HandleFunc("POST /exec", p.serveExec)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()

	<-ctx.Done()
	return errors.Join(srv.Close(), p.close())
}

// startCodeInterpreter starts the code-interpreter server as the sandbox's
// user, with the environment every envd process gets.
func (p *program) startCodeInterpreter() {
	defer close(p.ciReady)
	cmd := isolate.Command(context.Background(), codeinterp.Python)
	s, err := codeinterp.Start(cmd, p.cfg.Envs, os.Stderr)
	if err != nil {
		p.ciErr = fmt.Errorf("machine: %w", err)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed { // the sandbox stopped while it started
		_ = s.Close()
		p.ciErr = errors.New("machine: the sandbox is stopping")
		return
	}
	p.ci = s
}

// handOverToCodeInterpreter waits for the code-interpreter server's start
// and gives it the claim's access token (token "" when envd checks none).
// Called under p.mu by the claim.
func (p *program) handOverToCodeInterpreter(ctx context.Context, token string) error {
	if !p.cfg.CodeInterpreter {
		return nil
	}
	// The start takes p.mu before it closes ciReady: wait without it.
	p.mu.Unlock()
	select {
	case <-p.ciReady:
	case <-ctx.Done():
	}
	p.mu.Lock()
	select {
	case <-p.ciReady:
	default:
		return fmt.Errorf("machine: the code interpreter is still starting: %w", ctx.Err())
	}
	if p.ciErr != nil {
		return p.ciErr
	}
	if p.closed || p.ci == nil {
		return errors.New("machine: the sandbox is stopping")
	}
	return p.ci.SetToken(token)
}

// serveClaim accepts the one claim: it starts the guests and answers 204
// once they listen. Any later claim is 409, whether or not the first
// succeeded, because a sandbox is claimed once.
func (p *program) serveClaim(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxClaimBytes))
	if err != nil {
		http.Error(w, "could not read the claim", http.StatusBadRequest)
		return
	}
	var c Claim
	if err := json.Unmarshal(body, &c); err != nil || c.ID == "" {
		http.Error(w, "a claim is a JSON object with a non-empty id", http.StatusBadRequest)
		return
	}
	// Held while the guests start, so a concurrent claim or the program's
	// end waits for them and never sees half a start.
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		http.Error(w, "the sandbox is stopping", http.StatusServiceUnavailable)
		return
	case p.claimed:
		http.Error(w, "the sandbox is already claimed", http.StatusConflict)
		return
	}
	p.claimed = true
	p.token = c.Token
	g, err := startGuests(p.cfg, c)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p.guests = g
	if err := p.handOverToCodeInterpreter(r.Context(), accessToken(p.cfg, c)); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// close ends the guests (envd kills every process it started) and refuses
// any claim still to come.
func (p *program) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	if p.ci != nil {
		errs = append(errs, p.ci.Close())
		p.ci = nil
	}
	if p.guests != nil {
		errs = append(errs, p.guests.Close())
	}
	return errors.Join(errs...)
}

// serveReady answers once what the sandbox serves before a claim has
// started (WaitReady): at once for a plain machine, after the code
// interpreter's default kernel for a code-interpreter one.
func (p *program) serveReady(w http.ResponseWriter, r *http.Request) {
	select {
	case <-p.ciReady:
	case <-r.Context().Done():
		return
	}
	p.mu.Lock()
	err := p.ciErr
	p.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
