package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/rest"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// testServer is a real generic apiserver on a random loopback port, serving
// from a memBackend, with every request authenticated as one user and every
// action allowed (delegated auth is exercised against a real kube-apiserver
// elsewhere).
type testServer struct {
	backend *memBackend
	config  *rest.Config
	base    string
	http    *http.Client
}

func startServer(t *testing.T) *testServer {
	t.Helper()
	o := NewRecommendedOptions()
	o.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	// A listener of our own: BindPort 0 would mean "do not serve".
	ln, port, err := genericoptions.CreateListener("tcp", "127.0.0.1:0", net.ListenConfig{})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	o.SecureServing.Listener = ln
	o.SecureServing.BindPort = port
	o.SecureServing.ServerCert.CertDirectory = t.TempDir()
	o.Authentication = nil
	o.Authorization = nil
	o.CoreAPI = nil
	o.Features.EnablePriorityAndFairness = false

	backend := newMemBackend()
	cfg, err := NewConfig(o, backend)
	if err != nil {
		t.Fatalf("NewConfig: %v", err)
	}
	cfg.Generic.Authentication.Authenticator = authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		return &authenticator.Response{User: &user.DefaultInfo{Name: "tester", Groups: []string{user.AllAuthenticated}}}, true, nil
	})
	cfg.Generic.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()

	s, err := cfg.New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.PrepareRun().RunWithContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("server exited: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("server did not stop")
		}
	})

	ts := &testServer{
		backend: backend,
		base:    "https://127.0.0.1:" + strconv.Itoa(port),
		config: &rest.Config{
			Host:            "https://127.0.0.1:" + strconv.Itoa(port),
			TLSClientConfig: rest.TLSClientConfig{Insecure: true},
			QPS:             -1,
		},
		http: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // self-signed test server
		},
	}
	t.Cleanup(ts.http.CloseIdleConnections)

	poll.UntilNil(t, "the server's /readyz to answer 200", func() error {
		resp, err := ts.http.Get(ts.base + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz answered %s", resp.Status)
		}
		return nil
	})
	return ts
}
