package buildstore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestUploadExpiry(t *testing.T) {
	e := newDirEnv(t, t.TempDir(), testKey, testMaxBytes)
	hash := hashOf("e")
	u := e.link(t, "tmpl", hash)

	e.clk.SetTime(e.clk.Now().Add(testTTL + time.Second))
	status, body := put(t, e.srv.Client(), u, nil, []byte("late"))
	if status != http.StatusForbidden {
		t.Fatalf("PUT after the deadline = %d, want 403", status)
	}
	errorBody(t, status, body)
	if got := filesUnder(t, e.dir); len(got) != 0 {
		t.Fatalf("a refused upload left %v", got)
	}

	// The deadline itself is still in time: expiry is strictly after it.
	e.clk.SetTime(e.clk.Now().Add(-time.Second))
	if status, _ := put(t, e.srv.Client(), u, nil, []byte("just in time")); status != http.StatusOK {
		t.Fatalf("PUT at the deadline = %d, want 200", status)
	}
}

func TestUploadRefusesBadSignatures(t *testing.T) {
	e := newDirEnv(t, t.TempDir(), testKey, testMaxBytes)
	hash, other := hashOf("s"), hashOf("other")
	good, err := url.Parse(e.link(t, "tmpl", hash))
	if err != nil {
		t.Fatal(err)
	}
	q := good.Query()
	sig, exp := q.Get("signature"), q.Get("expires")
	flipped := flipHex(sig)
	later := fmt.Sprint(e.clk.Now().Add(24 * time.Hour).Unix())
	base := e.srv.URL + "/e2b-files/"
	for name, u := range map[string]string{
		"tampered signature":        base + "tmpl/" + hash + "?expires=" + exp + "&signature=" + flipped,
		"extended expiry":           base + "tmpl/" + hash + "?expires=" + later + "&signature=" + sig,
		"expiry with a plus sign":   base + "tmpl/" + hash + "?expires=%2B" + exp + "&signature=" + sig,
		"another template":          base + "tmpl2/" + hash + "?" + good.RawQuery,
		"another archive":           base + "tmpl/" + other + "?" + good.RawQuery,
		"no signature":              base + "tmpl/" + hash + "?expires=" + exp,
		"no expiry":                 base + "tmpl/" + hash + "?signature=" + sig,
		"no query":                  base + "tmpl/" + hash,
		"signature twice":           base + "tmpl/" + hash + "?" + good.RawQuery + "&signature=" + sig,
		"short signature":           base + "tmpl/" + hash + "?expires=" + exp + "&signature=" + sig[:32],
		"non-hex signature":         base + "tmpl/" + hash + "?expires=" + exp + "&signature=" + strings.Repeat("zz", 32),
		"signed by another key":     signedBy(t, bytes.Repeat([]byte{1}, 32), e, "tmpl", hash),
		"another template's signed": e.link(t, "tmpl2", hash),
	} {
		if name == "another template's signed" {
			// A valid URL for tmpl2, pointed at tmpl's archive.
			u = strings.Replace(u, "/tmpl2/", "/tmpl/", 1)
		}
		status, body := put(t, e.srv.Client(), u, nil, []byte("x"))
		if status != http.StatusForbidden {
			t.Errorf("%s: PUT = %d, want 403", name, status)
			continue
		}
		errorBody(t, status, body)
	}
	if got := filesUnder(t, e.dir); len(got) != 0 {
		t.Fatalf("refused uploads left %v", got)
	}
}

// signedBy is e's upload URL for (templateID, hash) as a Dir with key
// would sign it.
func signedBy(t *testing.T, key []byte, e *dirEnv, templateID, hash string) string {
	t.Helper()
	d, err := NewDir(t.TempDir(), key, testMaxBytes, testTTL, e.clk)
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.UploadLink(context.Background(), e.srv.URL, templateID, hash)
	if err != nil {
		t.Fatal(err)
	}
	return l.URL
}

func TestUploadMethodAndPath(t *testing.T) {
	e := newDirEnv(t, t.TempDir(), testKey, testMaxBytes)
	hash := hashOf("m")
	u := e.link(t, "tmpl", hash)
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		req, _ := http.NewRequest(method, u, strings.NewReader("x"))
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPut {
			t.Errorf("%s = %d (Allow %q), want 405 with Allow: PUT", method, resp.StatusCode, resp.Header.Get("Allow"))
		}
		errorBody(t, resp.StatusCode, body)
	}
	query := "?" + strings.SplitN(u, "?", 2)[1]
	for _, p := range []string{
		"/e2b-files/TMPL/" + hash,
		"/e2b-files/tmpl/" + strings.ToUpper(hash),
		"/e2b-files/tmpl/" + hash[:63],
		"/e2b-files/tmpl/" + hash + "/x",
		"/e2b-files/tmpl",
		"/e2b-files/../" + hash,
		"/e2b-files/tmpl%2F..%2F/" + hash,
		"/e2b-files/" + strings.Repeat("a", 65) + "/" + hash,
		"/other/tmpl/" + hash,
	} {
		status, body := rawPut(t, e, p+query, fmt.Sprintf("Content-Length: 1\r\n\r\nx"))
		if status != http.StatusNotFound {
			t.Errorf("PUT %s = %d, want 404", p, status)
			continue
		}
		errorBody(t, status, body)
	}
	if got := filesUnder(t, e.dir); len(got) != 0 {
		t.Fatalf("refused uploads left %v", got)
	}
}

// rawPut writes a PUT of target with the given header tail over a raw
// connection, so the path goes out exactly as written, and reads the
// answer without sending anything more.
func rawPut(t *testing.T, e *dirEnv, target, rest string) (int, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\n%s", target, e.srv.Listener.Addr(), rest); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to PUT %s: %v", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func TestUploadDeclaredTooLarge(t *testing.T) {
	e := newDirEnv(t, t.TempDir(), testKey, testMaxBytes)
	u, err := url.Parse(e.link(t, "tmpl", hashOf("big")))
	if err != nil {
		t.Fatal(err)
	}
	// No body follows the headers: the answer arriving at all shows the
	// size was refused before the server read a byte of it.
	status, body := rawPut(t, e, u.RequestURI(), fmt.Sprintf("Content-Length: %d\r\n\r\n", testMaxBytes+1))
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("PUT declaring %d bytes = %d, want 413", testMaxBytes+1, status)
	}
	errorBody(t, status, body)

	// The bound itself is allowed.
	status, _ = put(t, e.srv.Client(), u.String(), nil, bytes.Repeat([]byte("a"), testMaxBytes))
	if status != http.StatusOK {
		t.Fatalf("PUT of exactly the bound = %d, want 200", status)
	}
}

// chunked is a body of unknown length, so the client sends it chunked
// with no Content-Length.
type chunked struct{ io.Reader }

func TestUploadChunkedBody(t *testing.T) {
	e := newDirEnv(t, t.TempDir(), testKey, testMaxBytes)
	over := hashOf("chunked over")
	req, _ := http.NewRequest(http.MethodPut, e.link(t, "tmpl", over), chunked{bytes.NewReader(make([]byte, testMaxBytes+1))})
	if req.ContentLength != 0 && req.ContentLength != -1 {
		t.Fatalf("the request declares %d bytes; it must not", req.ContentLength)
	}
	resp, err := e.srv.Client().Do(req)
	// The server may close the connection before the client has sent the
	// whole body; either way nothing may be kept.
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked PUT over the bound = %d, want 413", resp.StatusCode)
		}
		errorBody(t, resp.StatusCode, body)
	}
	waitServed(t, e)
	if got := filesUnder(t, e.dir); len(got) != 0 {
		t.Fatalf("an oversized chunked upload left %v", got)
	}

	within := hashOf("chunked within")
	req, _ = http.NewRequest(http.MethodPut, e.link(t, "tmpl", within), chunked{bytes.NewReader([]byte("small"))})
	resp, err = e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chunked PUT within the bound = %d, want 200", resp.StatusCode)
	}
	rc, err := e.d.Open(context.Background(), "tmpl", within)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); string(got) != "small" {
		t.Fatalf("chunked upload reads %q", got)
	}
}

func waitServed(t *testing.T, e *dirEnv) {
	t.Helper()
	select {
	case <-e.served:
	case <-time.After(10 * time.Second):
		t.Fatal("the upload handler did not return")
	}
}

func TestUploadClientDisconnects(t *testing.T) {
	e := newDirEnv(t, t.TempDir(), testKey, testMaxBytes)
	u, err := url.Parse(e.link(t, "tmpl", hashOf("partial")))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// Half the declared body, then the client goes away.
	_, err = fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n%s",
		u.RequestURI(), e.srv.Listener.Addr(), strings.Repeat("x", 50))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	waitServed(t, e)
	if got := filesUnder(t, e.dir); len(got) != 0 {
		t.Fatalf("a broken upload left %v", got)
	}
	if _, err := e.d.Open(context.Background(), "tmpl", hashOf("partial")); err == nil {
		t.Fatal("a broken upload can be opened")
	}
}

// TestUploadAcrossReplicas has one replica sign and another take the
// upload: same key, same directory.
func TestUploadAcrossReplicas(t *testing.T) {
	dir := t.TempDir()
	a := newDirEnv(t, dir, testKey, testMaxBytes)
	b := newDirEnv(t, dir, testKey, testMaxBytes)
	hash := hashOf("replicas")

	u := strings.Replace(a.link(t, "tmpl", hash), a.srv.URL, b.srv.URL, 1)
	if status, _ := put(t, b.srv.Client(), u, nil, []byte("shared")); status != http.StatusOK {
		t.Fatalf("replica b refused replica a's URL: %d", status)
	}
	rc, err := a.d.Open(context.Background(), "tmpl", hash)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); string(got) != "shared" {
		t.Fatalf("replica a reads %q", got)
	}
	l, err := b.d.UploadLink(context.Background(), b.srv.URL, "tmpl", hash)
	if err != nil || !l.Present {
		t.Fatalf("replica b's UploadLink = %+v, %v; want present", l, err)
	}
}

// TestUploadConcurrent races uploads of one archive, each with different
// bytes so a mix of two would show: the file left is one whole body.
func TestUploadConcurrent(t *testing.T) {
	const n, size = 8, 256 << 10
	e := newDirEnv(t, t.TempDir(), testKey, size)
	hash := hashOf("race")
	u := e.link(t, "tmpl", hash)
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = bytes.Repeat([]byte{byte('a' + i)}, size)
	}
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPut, u, bytes.NewReader(bodies[i]))
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Fatalf("upload %d = %d, want 200", i, s)
		}
	}
	rc, err := e.d.Open(context.Background(), "tmpl", hash)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, rc)
	if !slices.ContainsFunc(bodies, func(b []byte) bool { return bytes.Equal(b, got) }) {
		t.Fatalf("the archive (%d bytes) is none of the uploaded bodies whole", len(got))
	}
	want := []string{filepath.Join(filesDir, "tmpl", hash)}
	if files := filesUnder(t, e.dir); !slices.Equal(files, want) {
		t.Fatalf("files = %v, want only %v", files, want)
	}
}
