package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/echo"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

const (
	tcpEchoPort  = 7
	shutFirstPrt = 9000 // a guest that closes its write side first
)

// relayNode adds a TCP echo and a guest that half-closes first, reporting
// what it read afterwards on got.
func relayNode(t *testing.T) (*node.Node, chan string) {
	got := make(chan string, 4)
	cfg := testConfig()
	cfg.Guests = append(cfg.Guests,
		node.Guest{Port: tcpEchoPort, Stream: func(_ node.SandboxInfo, c net.Conn) { echo.ServeStream(c) }},
		node.Guest{Port: shutFirstPrt, Stream: func(_ node.SandboxInfo, c net.Conn) {
			_, _ = io.WriteString(c, "greeting")
			_ = c.(*net.TCPConn).CloseWrite()
			b, _ := io.ReadAll(c)
			got <- string(b)
		}},
	)
	return startNode(t, cfg), got
}

// transportOver returns an HTTP transport whose every dial opens a new
// relay to the guest port; h2 selects cleartext HTTP/2 with prior knowledge.
func transportOver(c *sandboxd.Client, id string, port int, h2 bool) *http.Transport {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return c.DialPort(ctx, id, port) },
	}
	if h2 {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	return tr
}

func echoRoundTrip(t *testing.T, tr *http.Transport) echo.Request {
	t.Helper()
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, "http://guest.invalid/some/path?q=1&q=2", strings.NewReader("payload"))
	req.Header.Set("X-Probe", "relay")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("request through relay: %v", err)
	}
	defer resp.Body.Close()
	var doc echo.Request
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("decode echo: %v", err)
	}
	return doc
}

func TestRelayCarriesHTTP1AndH2C(t *testing.T) {
	n, _ := relayNode(t)
	ctx := ctxT(t)
	cl, _ := client(t, n, rootToken).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	own := client(t, n, cl.Token)

	for _, h2 := range []bool{false, true} {
		doc := echoRoundTrip(t, transportOver(own, cl.ID, echoPort, h2))
		wantProto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]
		if doc.Proto != wantProto || doc.Method != http.MethodPost || doc.Path != "/some/path" ||
			doc.RawQuery != "q=1&q=2" || len(doc.Query["q"]) != 2 || doc.Body != "payload" ||
			doc.Headers["X-Probe"][0] != "relay" || doc.Sandbox != cl.ID || doc.Port != echoPort {
			t.Fatalf("h2=%v: echo = %+v", h2, doc)
		}
	}
	if c := n.Counters(); c.Relays < 2 {
		t.Fatalf("relays counted: %+v", c)
	}
}

func TestRelayForwardsBytesSentRightBehindTheUpgrade(t *testing.T) {
	n, _ := relayNode(t)
	ctx := ctxT(t)
	cl, _ := client(t, n, rootToken).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})

	conn, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	// One write: the upgrade request and the guest's request together.
	_, err = io.WriteString(conn, "GET /v1/sandboxes/"+cl.ID+"/ports/8080 HTTP/1.1\r\nHost: x\r\n"+
		"Authorization: Bearer "+cl.Token+"\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"+
		"GET /early HTTP/1.1\r\nHost: guest\r\nConnection: close\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	up, err := http.ReadResponse(br, nil)
	if err != nil || up.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(up.Header.Get("Upgrade"), "tcp") {
		t.Fatalf("upgrade answer: %+v %v", up, err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("guest answer: %v", err)
	}
	var doc echo.Request
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || doc.Path != "/early" {
		t.Fatalf("early request lost: %+v %v", doc, err)
	}
}

func TestRelayHalfCloseBothDirections(t *testing.T) {
	n, got := relayNode(t)
	ctx := ctxT(t)
	cl, _ := client(t, n, rootToken).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	own := client(t, n, cl.Token)

	// Client stops sending: the guest sees EOF and still replies in full.
	conn, err := own.DialPort(ctx, cl.ID, tcpEchoPort)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	payload := strings.Repeat("abc", 50_000) // several segments
	if _, err := io.WriteString(conn, payload); err != nil {
		t.Fatal(err)
	}
	if err := conn.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(conn)
	if err != nil || string(back) != payload {
		t.Fatalf("echo after client half-close: %d bytes, %v", len(back), err)
	}
	_ = conn.Close()

	// Guest stops sending: the client reads EOF and can still send.
	conn, err = own.DialPort(ctx, cl.ID, shutFirstPrt)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	greeting, err := io.ReadAll(conn)
	if err != nil || string(greeting) != "greeting" {
		t.Fatalf("guest half-close: %q %v", greeting, err)
	}
	if _, err := io.WriteString(conn, "still talking"); err != nil {
		t.Fatalf("write after guest half-close: %v", err)
	}
	_ = conn.CloseWrite()
	select {
	case s := <-got:
		if s != "still talking" {
			t.Fatalf("guest read %q after its own half-close", s)
		}
	case <-time.After(waitTimeout):
		t.Fatal("guest never saw the client's bytes")
	}
}

func TestRelayErrors(t *testing.T) {
	n, _ := relayNode(t)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	other, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	own := root.As(cl.Token)

	for _, port := range []int{0, -1, 65536} {
		_, err := own.DialPort(ctx, cl.ID, port)
		wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
	}
	_, err := root.As("").DialPort(ctx, cl.ID, echoPort)
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)
	for _, tok := range []string{other.Token, tenantA, "garbage"} {
		_, err = root.As(tok).DialPort(ctx, cl.ID, echoPort)
		wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	}
	_, err = own.DialPort(ctx, "sb_missing", echoPort)
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	// Nothing listens on 9999, and envd is not configured: 502.
	for _, port := range []int{9999, sandboxd.EnvdPort} {
		_, err = own.DialPort(ctx, cl.ID, port)
		wantStatus(t, err, http.StatusBadGateway, sandboxd.ErrGuestUnreachable)
	}
	// A bare GET must not be served (426).
	code, body := rawDo(t, http.MethodGet, "http://"+n.Addr()+"/v1/sandboxes/"+cl.ID+"/ports/8080", cl.Token, nil, nil)
	if code != http.StatusUpgradeRequired || !strings.Contains(body, `"error"`) {
		t.Fatalf("bare GET: %d %s", code, body)
	}
	code, _ = rawDo(t, http.MethodGet, "http://"+n.Addr()+"/v1/sandboxes/"+cl.ID+"/ports/http", cl.Token, nil, map[string]string{"Upgrade": "tcp", "Connection": "Upgrade"})
	if code != http.StatusBadRequest {
		t.Fatalf("non-numeric port: %d", code)
	}
}

func TestRelayWakesOnOwnTokenAndRootStaysPassive(t *testing.T) {
	n, _ := relayNode(t)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})

	// Root reaches a running guest.
	doc := echoRoundTrip(t, transportOver(root, cl.ID, echoPort, false))
	if doc.Sandbox != cl.ID {
		t.Fatalf("root relay reached %q", doc.Sandbox)
	}
	if err := root.Hibernate(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	// Root never consumes a hibernate snapshot: 409 at once.
	_, err := root.DialPort(ctx, cl.ID, echoPort)
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	if !strings.Contains(err.Error(), "sandbox is paused") {
		t.Fatalf("passive relay refusal: %v", err)
	}
	if row, _ := root.Sandbox(ctx, cl.ID); !row.Hibernated {
		t.Fatal("passive relay must not wake")
	}
	// The sandbox's own token wakes it transparently.
	doc = echoRoundTrip(t, transportOver(root.As(cl.Token), cl.ID, echoPort, true))
	if doc.Sandbox != cl.ID {
		t.Fatalf("woken guest answered as %q", doc.Sandbox)
	}
	if row, _ := root.Sandbox(ctx, cl.ID); row.Hibernated {
		t.Fatal("relay with the own token must wake the sandbox")
	}
}

func TestReleaseCutsOpenRelay(t *testing.T) {
	n, _ := relayNode(t)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	conn, err := root.As(cl.Token).DialPort(ctx, cl.ID, tcpEchoPort)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "ping"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
	if err := root.Release(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(conn); err != nil && !isClosedErr(err) {
		t.Fatalf("relay after release: %v", err)
	}
}

func isClosedErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "reset") || strings.Contains(s, "closed") || strings.Contains(s, "EOF")
}
