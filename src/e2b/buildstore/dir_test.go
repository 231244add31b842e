package buildstore

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

const (
	testTTL      = 10 * time.Minute
	testMaxBytes = 1024
)

var testKey = bytes.Repeat([]byte{0x5a}, 32)

// dirEnv is a Dir behind a loopback server, as the surface mounts it.
type dirEnv struct {
	d      *Dir
	dir    string
	clk    *clocktesting.FakePassiveClock
	srv    *httptest.Server
	served chan struct{} // a value each time the handler returns
}

func newDirEnv(t *testing.T, dir string, key []byte, maxBytes int64) *dirEnv {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_700_000_000, 0))
	d, err := NewDir(dir, key, maxBytes, testTTL, clk)
	if err != nil {
		t.Fatal(err)
	}
	e := &dirEnv{d: d, dir: dir, clk: clk, served: make(chan struct{}, 64)}
	h := d.UploadHandler()
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			select {
			case e.served <- struct{}{}:
			default:
			}
		}()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// link asks for an upload URL and fails unless the archive is absent.
func (e *dirEnv) link(t *testing.T, templateID, hash string) string {
	t.Helper()
	l, err := e.d.UploadLink(context.Background(), e.srv.URL, templateID, hash)
	if err != nil {
		t.Fatal(err)
	}
	if l.Present || l.URL == "" || len(l.Headers) != 0 {
		t.Fatalf("link of an absent archive = %+v, want a URL and no headers", l)
	}
	return l.URL
}

func (e *dirEnv) upload(t *testing.T, templateID, hash string, body []byte) {
	t.Helper()
	if status, resp := put(t, e.srv.Client(), e.link(t, templateID, hash), nil, body); status != http.StatusOK || len(resp) != 0 {
		t.Fatalf("upload = %d %q, want 200 and an empty body", status, resp)
	}
}

func TestDirRoundTrip(t *testing.T) {
	e := newDirEnv(t, t.TempDir(), testKey, testMaxBytes)
	ctx := context.Background()
	hash, body := hashOf("a"), []byte("an archive")

	u := e.link(t, "tmpl", hash)
	status, resp := put(t, e.srv.Client(), u, nil, body)
	if status != http.StatusOK || len(resp) != 0 {
		t.Fatalf("PUT = %d %q, want 200 and an empty body", status, resp)
	}
	rc, err := e.d.Open(ctx, "tmpl", hash)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); !bytes.Equal(got, body) {
		t.Fatalf("Open read %q, want %q", got, body)
	}
	l, err := e.d.UploadLink(ctx, e.srv.URL, "tmpl", hash)
	if err != nil || !l.Present || l.URL != "" {
		t.Fatalf("UploadLink after the upload = %+v, %v; want present and no URL", l, err)
	}
	want := []string{filepath.Join(filesDir, "tmpl", hash)}
	if got := filesUnder(t, e.dir); !slices.Equal(got, want) {
		t.Fatalf("files = %v, want only %v", got, want)
	}
}

// TestDirSignedURLFormat pins the documented URL: anyone holding the key
// can recompute the signature from the doc comment alone.
func TestDirSignedURLFormat(t *testing.T) {
	e := newDirEnv(t, t.TempDir(), testKey, testMaxBytes)
	hash := hashOf("b")
	l, err := e.d.UploadLink(context.Background(), "https://e2b.example:8443/", "tmpl", hash)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "https" || u.Host != "e2b.example:8443" || u.Path != "/e2b-files/tmpl/"+hash {
		t.Fatalf("URL %s: wrong scheme, host or path", l.URL)
	}
	expires := strconv.FormatInt(e.clk.Now().Add(testTTL).Unix(), 10)
	mac := hmac.New(sha256.New, testKey)
	mac.Write([]byte("PUT\ntmpl\n" + hash + "\n" + expires))
	q := u.Query()
	if q.Get("expires") != expires || q.Get("signature") != hex.EncodeToString(mac.Sum(nil)) || len(q) != 2 {
		t.Fatalf("query %q, want expires=%s and the documented signature only", u.RawQuery, expires)
	}

	l, err = e.d.UploadLink(context.Background(), "http://h/api/", "tmpl", hash)
	if err != nil || !bytes.HasPrefix([]byte(l.URL), []byte("http://h/api/e2b-files/tmpl/"+hash+"?")) {
		t.Fatalf("a base with a path gave %q, %v", l.URL, err)
	}
	for _, base := range []string{"", "h", "ftp://h", "http://", "http://u:p@h", "http://h?x=1", "http://h#f", "://h"} {
		if _, err := e.d.UploadLink(context.Background(), base, "tmpl", hash); err == nil {
			t.Errorf("base %q was accepted", base)
		}
	}
}

func TestDirOpenMissing(t *testing.T) {
	e := newDirEnv(t, t.TempDir(), testKey, testMaxBytes)
	_, err := e.d.Open(context.Background(), "tmpl", hashOf("nope"))
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open of a missing archive = %v, want ErrNotFound", err)
	}
}

func TestDirDeleteTemplate(t *testing.T) {
	e := newDirEnv(t, t.TempDir(), testKey, testMaxBytes)
	ctx := context.Background()
	e.upload(t, "abc", hashOf("1"), []byte("one"))
	e.upload(t, "abc", hashOf("2"), []byte("two"))
	e.upload(t, "abcd", hashOf("1"), []byte("other template"))

	if err := e.d.DeleteTemplate(ctx, "abc"); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{hashOf("1"), hashOf("2")} {
		if _, err := e.d.Open(ctx, "abc", h); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Open after DeleteTemplate = %v, want ErrNotFound", err)
		}
	}
	rc, err := e.d.Open(ctx, "abcd", hashOf("1"))
	if err != nil {
		t.Fatalf("another template's archive went too: %v", err)
	}
	if got := readAll(t, rc); string(got) != "other template" {
		t.Fatalf("other template's archive reads %q", got)
	}
	if err := e.d.DeleteTemplate(ctx, "never-built"); err != nil {
		t.Fatalf("deleting a template with no archives = %v, want nil", err)
	}
}

func TestDirInvalidIDs(t *testing.T) {
	dir := t.TempDir()
	e := newDirEnv(t, dir, testKey, testMaxBytes)
	ctx := context.Background()
	for _, tc := range []struct{ id, hash string }{
		{"..", hashOf("x")},
		{"a/b", hashOf("x")},
		{"tmpl", "../../etc/passwd"},
		{"tmpl", ""},
		{"", hashOf("x")},
	} {
		if _, err := e.d.UploadLink(ctx, e.srv.URL, tc.id, tc.hash); !errors.Is(err, ErrInvalid) {
			t.Errorf("UploadLink(%q, %q) = %v, want ErrInvalid", tc.id, tc.hash, err)
		}
		if _, err := e.d.Open(ctx, tc.id, tc.hash); !errors.Is(err, ErrInvalid) {
			t.Errorf("Open(%q, %q) = %v, want ErrInvalid", tc.id, tc.hash, err)
		}
	}
	for _, id := range []string{"..", ".", "", "a/../..", "A"} {
		if err := e.d.DeleteTemplate(ctx, id); !errors.Is(err, ErrInvalid) {
			t.Errorf("DeleteTemplate(%q) = %v, want ErrInvalid", id, err)
		}
	}
	if got := filesUnder(t, dir); len(got) != 0 {
		t.Fatalf("invalid ids left files: %v", got)
	}
}

func TestNewDirRefuses(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	dir := t.TempDir()
	for name, f := range map[string]func() (*Dir, error){
		"no dir":      func() (*Dir, error) { return NewDir("", testKey, 1, time.Minute, clk) },
		"short key":   func() (*Dir, error) { return NewDir(dir, testKey[:15], 1, time.Minute, clk) },
		"zero max":    func() (*Dir, error) { return NewDir(dir, testKey, 0, time.Minute, clk) },
		"zero ttl":    func() (*Dir, error) { return NewDir(dir, testKey, 1, 0, clk) },
		"no clock":    func() (*Dir, error) { return NewDir(dir, testKey, 1, time.Minute, nil) },
		"dir is file": func() (*Dir, error) { return NewDir("/dev/null", testKey, 1, time.Minute, clk) },
	} {
		if d, err := f(); err == nil || d != nil {
			t.Errorf("%s: NewDir = %v, %v; want an error", name, d, err)
		}
	}
}
