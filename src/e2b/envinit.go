package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// initEnv hands a new sandbox its env vars the way e2b's orchestrator
// does: envd's internal POST /init, here through the node's guest-port
// relay with the sandbox's own token, authenticated to envd with the
// derived access token.
func (s *Server) initEnv(ctx context.Context, claimed Claimed, access string, env map[string]string) error {
	node, err := s.fleet.Node(claimed.Sandbox)
	if err != nil {
		return err
	}
	relay := node.As(claimed.ClaimToken)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.InitTimeout)
	defer cancel()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return relay.DialPort(ctx, claimed.ID, sandboxd.EnvdPort)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	body, err := json.Marshal(envdInit{EnvVars: env})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://envd/init", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Access-Token", access)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fmt.Errorf("envd POST /init: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("envd POST /init answered %d", resp.StatusCode)
	}
	return nil
}
