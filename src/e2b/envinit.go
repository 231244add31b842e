package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/oneshot"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// envdInit is the part of envd's internal POST /init body this surface
// sends: e2b's orchestrator hands a sandbox its access token and env vars
// this way.
type envdInit struct {
	AccessToken string            `json:"accessToken"`
	EnvVars     map[string]string `json:"envVars,omitempty"`
}

// errEnvdUnreachable: the relay to a sandbox's envd could not be opened.
var errEnvdUnreachable = errors.New("envd unreachable")

// initEnvd hands a new sandbox's envd its access token and env vars the
// way e2b's orchestrator does: envd's internal POST /init, here through the
// node's guest-port relay with the sandbox's own token. envd checks the
// access token on every request and verifies signed file URLs against it,
// so it must hold the token the SDK was given: a guest image that derives
// it itself already does (the header proves it), one that starts without a
// token takes it here. Without this a real envd would check nothing, and a
// signed-URL request (which the envd proxy admits without a token, leaving
// the signature to envd) would reach files unchecked.
//
// A relay that cannot be opened (the node died or hangs) is an error
// wrapping errEnvdUnreachable, after at most the fleet's node timeout.
func (s *Server) initEnvd(ctx context.Context, claimed fleet.Claimed, access string, env map[string]string) error {
	return s.initEnvdAs(ctx, claimed, access, access, env)
}

// errEnvdRefused: envd refused the /init's token (401).
var errEnvdRefused = errors.New("envd refused the access token")

// initEnvdAs is initEnvd authenticated with current, the token envd holds
// now, handing it access.
func (s *Server) initEnvdAs(ctx context.Context, claimed fleet.Claimed, current, access string, env map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.InitTimeout)
	defer cancel()
	body, err := json.Marshal(envdInit{AccessToken: access, EnvVars: env})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://envd/init", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Access-Token", current)
	conn, err := s.fleet.DialPort(ctx, claimed.Sandbox, claimed.Token, sandboxd.EnvdPort)
	if err != nil {
		return fmt.Errorf("envd POST /init: %w: %w", errEnvdUnreachable, err)
	}
	// One exchange on this goroutine: a Transport would add two
	// goroutines of its own for a connection it never reuses, on every
	// create (src/oneshot).
	resp, err := oneshot.RoundTrip(req, conn)
	if err != nil {
		return fmt.Errorf("envd POST /init: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("envd POST /init: %w", errEnvdRefused)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("envd POST /init answered %d", resp.StatusCode)
	}
	return nil
}
