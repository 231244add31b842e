package envdproxy_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// The benchmarks put the proxy next to the same traffic sent straight to
// the node's relay (DialPort with the claim token, one relay per request,
// as the proxy itself does), so the difference is what the proxy adds:
// routing, the cached token check, one more loopback hop and the copy.
//
//	go test -run XXX -bench . -benchtime 2s ./src/envdproxy/

const bulkBytes = 8 << 20

type benchTarget struct {
	name string
	hc   *http.Client
	url  string
	host string
}

func benchTargets(b *testing.B) []benchTarget {
	e := newEnv(b, envOptions{nodes: 1})
	cl := e.claim(0, true)
	c, err := sandboxd.New(e.fleet.Node(0).Addr(), sandboxd.WithToken(cl.Token))
	if err != nil {
		b.Fatal(err)
	}
	direct := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return c.DialPort(ctx, cl.ID, bulkPort)
		},
	}
	b.Cleanup(direct.CloseIdleConnections)
	tok := accessToken(cl.Token)
	proxied := &http.Client{Transport: headerTransport{base: e.hc.Transport, token: tok}}
	return []benchTarget{
		{name: "direct", hc: &http.Client{Transport: direct}, url: "http://guest", host: "guest"},
		{name: "proxy", hc: proxied, url: e.url, host: host(bulkPort, cl.ID)},
	}
}

type headerTransport struct {
	base  http.RoundTripper
	token string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r.Header.Set("X-Access-Token", h.token)
	return h.base.RoundTrip(r)
}

func (t benchTarget) do(b *testing.B, method, pathQuery string, body io.Reader) int64 {
	req, err := http.NewRequest(method, t.url+pathQuery, body)
	if err != nil {
		b.Fatal(err)
	}
	req.Host = t.host
	resp, err := t.hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("%s %s: %d %v", method, pathQuery, resp.StatusCode, err)
	}
	return n
}

// BenchmarkSmallRequest is the latency of one small GET (128-byte answer).
func BenchmarkSmallRequest(b *testing.B) {
	for _, t := range benchTargets(b) {
		b.Run(t.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if n := t.do(b, http.MethodGet, "/bytes?n=128", nil); n != 128 {
					b.Fatalf("read %d bytes", n)
				}
			}
		})
	}
}

// BenchmarkBulkDownload streams 8 MiB from the guest per op.
func BenchmarkBulkDownload(b *testing.B) {
	for _, t := range benchTargets(b) {
		b.Run(t.name, func(b *testing.B) {
			b.SetBytes(bulkBytes)
			for b.Loop() {
				if n := t.do(b, http.MethodGet, "/bytes?n="+strconv.Itoa(bulkBytes), nil); n != bulkBytes {
					b.Fatalf("read %d bytes", n)
				}
			}
		})
	}
}

// BenchmarkBulkUpload streams 8 MiB to the guest per op.
func BenchmarkBulkUpload(b *testing.B) {
	payload := make([]byte, bulkBytes)
	for _, t := range benchTargets(b) {
		b.Run(t.name, func(b *testing.B) {
			b.SetBytes(bulkBytes)
			for b.Loop() {
				t.do(b, http.MethodPost, "/upload", bytes.NewReader(payload))
			}
		})
	}
}
