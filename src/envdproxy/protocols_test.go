package envdproxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// clients returns the client-side protocol variants the proxy serves on
// e's listener.
func clientsFor(t *testing.T, e *env) map[string]*http.Client {
	t.Helper()
	out := map[string]*http.Client{}
	if e.tlsCA == nil {
		h1 := &http.Transport{}
		h2c := &http.Transport{Protocols: new(http.Protocols)}
		h2c.Protocols.SetUnencryptedHTTP2(true)
		t.Cleanup(h1.CloseIdleConnections)
		t.Cleanup(h2c.CloseIdleConnections)
		out["HTTP/1.1"] = &http.Client{Transport: h1}
		out["h2c"] = &http.Client{Transport: h2c}
		return out
	}
	tlsCfg := func(protos ...string) *tls.Config {
		return &tls.Config{RootCAs: e.tlsCA, ServerName: "49983-sb-0." + domain, NextProtos: protos, MinVersion: tls.VersionTLS12}
	}
	h1 := &http.Transport{TLSClientConfig: tlsCfg("http/1.1")}
	h2 := &http.Transport{TLSClientConfig: tlsCfg("h2"), ForceAttemptHTTP2: true}
	t.Cleanup(h1.CloseIdleConnections)
	t.Cleanup(h2.CloseIdleConnections)
	out["HTTP/1.1 over TLS"] = &http.Client{Transport: h1}
	out["h2 over TLS"] = &http.Client{Transport: h2}
	return out
}

// TestClientProtocols reaches the echo guest over every client protocol;
// the guest side stays HTTP/1.1 unless GuestHTTP2 is set.
func TestClientProtocols(t *testing.T) {
	for _, variant := range []struct {
		name       string
		tls        bool
		guestHTTP2 bool
	}{{"cleartext", false, false}, {"tls", true, false}, {"cleartext, guest h2c", false, true}} {
		t.Run(variant.name, func(t *testing.T) {
			e := newEnv(t, envOptions{nodes: 1, tls: variant.tls, guestHTTP2: variant.guestHTTP2})
			cl := e.claim(0, true)
			wantGuest := "HTTP/1.1"
			if variant.guestHTTP2 {
				wantGuest = "HTTP/2.0"
			}
			for name, hc := range clientsFor(t, e) {
				req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, e.url+"/p", strings.NewReader("over "+name))
				req.Host = host(echoPort, cl.ID)
				req.Header.Set("X-Access-Token", accessToken(cl.Token))
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("%s: %d %s", name, resp.StatusCode, body)
				}
				wantClient := 1
				if strings.Contains(name, "h2") {
					wantClient = 2
				}
				if resp.ProtoMajor != wantClient {
					t.Fatalf("%s: client leg spoke %s", name, resp.Proto)
				}
				doc := decodeEcho(t, body)
				if doc.Proto != wantGuest || doc.Body != "over "+name {
					t.Fatalf("%s: guest leg %s, body %q", name, doc.Proto, doc.Body)
				}
			}
		})
	}
}

// TestGuestHTTP2AgainstAnHTTP1Guest: envd 0.8.0 serves HTTP/1.1 only, so
// --guest-http2 in front of it fails every request, as a clean 502.
func TestGuestHTTP2AgainstAnHTTP1Guest(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, guestHTTP2: true})
	cl := e.claim(0, true)
	status, body, _ := e.do(http.MethodGet, host(49983, cl.ID), "/health", nil, withToken(accessToken(cl.Token)))
	if status != http.StatusBadGateway {
		t.Fatalf("h2c to an HTTP/1.1-only envd: %d %s", status, body)
	}
}

// TestFullDuplexStreaming sends request lines one at a time and reads
// each answer before sending the next, over every client protocol: the
// proxy must pass bytes through as they arrive, both ways.
func TestFullDuplexStreaming(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		e := newEnv(t, envOptions{nodes: 1, tls: useTLS})
		cl := e.claim(0, true)
		for name, hc := range clientsFor(t, e) {
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				pr, pw := io.Pipe()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/duplex", pr)
				req.Host = host(duplexPort, cl.ID)
				req.Header.Set("X-Access-Token", accessToken(cl.Token))
				req.Header.Set("Content-Type", "text/plain")
				type result struct {
					resp *http.Response
					err  error
				}
				got := make(chan result, 1)
				go func() {
					resp, err := hc.Do(req)
					got <- result{resp, err}
				}()
				// The first line goes out before the answer's headers can
				// come back, so the exchange starts either way.
				if _, err := io.WriteString(pw, "line-0\n"); err != nil {
					t.Fatal(err)
				}
				r := <-got
				if r.err != nil {
					t.Fatal(r.err)
				}
				defer r.resp.Body.Close()
				br := bufio.NewReader(r.resp.Body)
				for i := range 4 {
					if i > 0 {
						if _, err := io.WriteString(pw, "line-"+string(rune('0'+i))+"\n"); err != nil {
							t.Fatal(err)
						}
					}
					line, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("answer %d: %v", i, err)
					}
					if want := "echo:line-" + string(rune('0'+i)) + "\n"; line != want {
						t.Fatalf("answer %d = %q, want %q", i, line, want)
					}
				}
				_ = pw.Close()
				if rest, _ := io.ReadAll(br); len(rest) != 0 {
					t.Fatalf("trailing bytes %q", rest)
				}
			})
		}
	}
}

// TestUpgradePassthrough opens a WebSocket-style Upgrade through the
// proxy and exchanges raw bytes with the guest afterwards.
func TestUpgradePassthrough(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	cl := e.claim(0, true)
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: "+host(wsPort, cl.ID)+"\r\n"+
		"Connection: Upgrade\r\nUpgrade: websocket\r\nX-Access-Token: "+accessToken(cl.Token)+"\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") {
		t.Fatalf("upgrade answered %d %v", resp.StatusCode, resp.Header)
	}
	for _, msg := range []string{"ping", "pong-pong"} {
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(br, buf); err != nil || string(buf) != msg {
			t.Fatalf("echo %q: %q %v", msg, buf, err)
		}
	}
}
