package apiserverenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// pollEvery is how often the waits here look again.
const pollEvery = 100 * time.Millisecond

// probeTimeout bounds one probe, so a server that accepts but never
// answers costs a retry rather than the whole wait.
const probeTimeout = 5 * time.Second

// WaitReady waits until the aggregator reports the APIService available
// and the server's /readyz (which includes inventory-synced) answers OK
// over TLS, verified as the aggregator verifies it. ctx bounds the wait.
func (s *Server) WaitReady(ctx context.Context) error {
	if err := s.cluster.WaitAPIServiceAvailable(ctx, cluster.APIServiceName(Group, Version)); err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.caPEM)
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: servingDNSName, MinVersion: tls.VersionTLS12}}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: probeTimeout}
	if err := s.WaitHTTPOK(ctx, client, "https://"+s.addr+"/readyz"); err != nil {
		return fmt.Errorf("sandbox-apiserver not ready: %w", err)
	}
	return nil
}

// WaitHTTPOK polls url, one of the server's endpoints, with client (nil:
// plain HTTP with a per-probe timeout) until it answers 200 OK. It ends
// early when the server exits.
func (s *Server) WaitHTTPOK(ctx context.Context, client *http.Client, url string) error {
	if client == nil {
		client = &http.Client{Timeout: probeTimeout}
	}
	return pollOK(ctx, client, url, s.ExitErr)
}

// pollOK polls url until it answers 200 OK, ctx ends or exited (checked
// before every probe) reports an error. The error names the last answer,
// which says more than the deadline does.
func pollOK(ctx context.Context, client *http.Client, url string, exited func() error) error {
	last := "no answer yet"
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		if err := exited(); err != nil {
			return false, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			// A probe cut short by ctx says nothing about the server: keep
			// the answer before it.
			if ctx.Err() == nil {
				last = err.Error()
			}
			return false, nil
		}
		// Drained, so the connection is reused for the next probe.
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("GET %s (%s): %w", url, last, err)
	}
	return nil
}
