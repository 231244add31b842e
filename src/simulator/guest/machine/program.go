package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

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
	p := &program{cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /claim", p.serveClaim)
	mux.HandleFunc("POST /exec", p.serveExec)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()

	<-ctx.Done()
	return errors.Join(srv.Close(), p.close())
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
	w.WriteHeader(http.StatusNoContent)
}

// close ends the guests (envd kills every process it started) and refuses
// any claim still to come.
func (p *program) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.guests == nil {
		return nil
	}
	return p.guests.Close()
}
