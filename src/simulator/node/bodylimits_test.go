package node_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/serve"
)

// closesWithin sends raw on conn and reads until the other side closes;
// it fails the test when that takes longer than waitTimeout. A server that waits for the rest of a
// stalled body never closes.
func closesWithin(t *testing.T, conn net.Conn, raw string) string {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("the stalled body was never given up on: %v (answer so far %q)", err, got)
	}
	return string(got)
}

// TestStalledBodiesAreCut: three bytes of a thousand, then silence, on
// the node's API and on a guest service reached through the relay. Both
// servers give up within the configured bound and close the connection.
func TestStalledBodiesAreCut(t *testing.T) {
	cfg := testConfig()
	cfg.BodyLimits = serve.BodyLimits{Idle: 200 * time.Millisecond}
	n := startNode(t, cfg)

	// A claim reads its body; an unknown path answers without reading it,
	// and net/http then reads the rest itself: both are bounded.
	for _, path := range []string{"/v1/claim", "/v1/nothing-here"} {
		api, err := net.Dial("tcp", n.Addr())
		if err != nil {
			t.Fatal(err)
		}
		got := closesWithin(t, api, "POST "+path+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+rootToken+
			"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"t")
		_ = api.Close()
		if !strings.HasPrefix(got, "HTTP/1.1 4") {
			t.Fatalf("node API answer to a stalled body on %s: %q", path, got)
		}
	}

	cl, err := client(t, n, rootToken).Claim(ctxT(t), sandboxd.ClaimRequest{Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := client(t, n, cl.Token).DialPort(ctxT(t), cl.ID, echoPort)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	got := closesWithin(t, relay, "POST / HTTP/1.1\r\nHost: guest\r\nContent-Length: 1000\r\n\r\nabc")
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(got)), nil)
	if err != nil || resp.StatusCode < 400 {
		t.Fatalf("guest answer to a stalled body: %q (%v)", got, err)
	}
}
