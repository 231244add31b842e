package buildstore

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestS3RoundTrip(t *testing.T) {
	e := newS3Env(t)
	for _, tc := range []struct {
		name      string
		cfg       S3Config
		host      string // the presigned URL's host
		keyPrefix string
		urlPath   string // the presigned URL's path before the key
	}{
		{"path style, no prefix", e.pathStyle(), "127.0.0.1:" + e.port, "", "/" + testBucket + "/"},
		{"virtual host, prefix", withPrefix(e.virtualHost(), "/builds/x/"), testBucket + ".localhost:" + e.port, "builds/x/", "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := e.store(t, tc.cfg)
			hash, body := hashOf(tc.name), []byte("archive of "+tc.name)
			key := tc.keyPrefix + "e2b-files/tmpl/" + hash

			l, err := s.UploadLink(ctx, "http://the-surface-is-not-used", "tmpl", hash)
			if err != nil {
				t.Fatal(err)
			}
			if l.Present {
				t.Fatal("an archive never uploaded is present")
			}
			u, err := url.Parse(l.URL)
			if err != nil {
				t.Fatal(err)
			}
			if u.Host != tc.host || u.Path != tc.urlPath+key {
				t.Fatalf("presigned URL %s://%s%s, want host %s and path %s", u.Scheme, u.Host, u.Path, tc.host, tc.urlPath+key)
			}
			q := u.Query()
			if q.Get("X-Amz-Expires") != secondsOf(testPresign) || q.Get("X-Amz-Signature") == "" {
				t.Fatalf("presigned query %q lacks the signature or the %s expiry", u.RawQuery, testPresign)
			}
			if strings.Contains(l.URL, testSecretKey) {
				t.Fatal("the presigned URL holds the secret key")
			}

			if status, resp := put(t, e.client, l.URL, l.Headers, body); status != http.StatusOK {
				t.Fatalf("PUT to the presigned URL = %d %s", status, resp)
			}
			if !e.stored(key) {
				t.Fatalf("the bucket has no %s", key)
			}
			rc, err := s.Open(ctx, "tmpl", hash)
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, rc); string(got) != string(body) {
				t.Fatalf("Open read %q, want %q", got, body)
			}
			l, err = s.UploadLink(ctx, "", "tmpl", hash)
			if err != nil || !l.Present || l.URL != "" {
				t.Fatalf("UploadLink after the upload = %+v, %v; want present", l, err)
			}
			if _, err := s.Open(ctx, "tmpl", hashOf("missing")); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Open of a missing archive = %v, want ErrNotFound", err)
			}
		})
	}
}

func withPrefix(c S3Config, p string) S3Config {
	c.Prefix = p
	return c
}

func TestS3PresignedURLRefused(t *testing.T) {
	e := newS3Env(t)
	for name, cfg := range map[string]S3Config{"path style": e.pathStyle(), "virtual host": e.virtualHost()} {
		t.Run(name, func(t *testing.T) {
			s := e.store(t, cfg)
			hash, other := hashOf("refused "+name), hashOf("other "+name)
			l, err := s.UploadLink(context.Background(), "", "tmpl", hash)
			if err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(l.URL)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			sig := q.Get("X-Amz-Signature")
			tampered := func(k, v string) string {
				c := *u
				cq := c.Query()
				cq.Set(k, v)
				c.RawQuery = cq.Encode()
				return c.String()
			}
			for what, bad := range map[string]string{
				"tampered signature": tampered("X-Amz-Signature", flipHex(sig)),
				"longer expiry":      tampered("X-Amz-Expires", secondsOf(24*time.Hour)),
				"another archive":    strings.Replace(l.URL, hash, other, 1),
				"another template":   strings.Replace(l.URL, "/tmpl/", "/tmpl2/", 1),
				"no signature":       strings.Replace(l.URL, "X-Amz-Signature="+sig, "", 1),
			} {
				if status, _ := put(t, e.client, bad, l.Headers, []byte("x")); status != http.StatusForbidden {
					t.Errorf("%s: PUT = %d, want 403", what, status)
				}
			}

			restore := e.expire(testPresign)
			status, _ := put(t, e.client, l.URL, l.Headers, []byte("late"))
			restore()
			if status != http.StatusForbidden {
				t.Fatalf("PUT after the URL expired = %d, want 403", status)
			}
			if got, err := s.UploadLink(context.Background(), "", "tmpl", hash); err != nil || got.Present {
				t.Fatalf("after refused uploads UploadLink = %+v, %v; want absent", got, err)
			}
			// Within its lifetime the same URL works: the refusals above
			// were for what was changed, not for the URL.
			if status, resp := put(t, e.client, l.URL, l.Headers, []byte("in time")); status != http.StatusOK {
				t.Fatalf("PUT in time = %d %s", status, resp)
			}
		})
	}
}

// flipHex changes the last hex digit of s.
func flipHex(s string) string {
	last := s[len(s)-1]
	repl := byte('0')
	if last == '0' {
		repl = '1'
	}
	return s[:len(s)-1] + string(repl)
}

func TestS3DeleteTemplate(t *testing.T) {
	e := newS3Env(t)
	ctx := context.Background()
	s := e.store(t, withPrefix(e.pathStyle(), "p"))
	upload := func(id, hash string) {
		t.Helper()
		l, err := s.UploadLink(ctx, "", id, hash)
		if err != nil {
			t.Fatal(err)
		}
		if status, resp := put(t, e.client, l.URL, l.Headers, []byte(id+hash)); status != http.StatusOK {
			t.Fatalf("PUT = %d %s", status, resp)
		}
	}
	upload("abc", hashOf("1"))
	upload("abc", hashOf("2"))
	upload("abcd", hashOf("1"))

	if err := s.DeleteTemplate(ctx, "abc"); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{hashOf("1"), hashOf("2")} {
		if _, err := s.Open(ctx, "abc", h); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Open after DeleteTemplate = %v, want ErrNotFound", err)
		}
	}
	if !e.stored("p/e2b-files/abcd/" + hashOf("1")) {
		t.Fatal("DeleteTemplate of abc removed abcd's archive")
	}
	if err := s.DeleteTemplate(ctx, "never-built"); err != nil {
		t.Fatalf("deleting a template with no archives = %v", err)
	}
}

func TestS3InvalidIDs(t *testing.T) {
	e := newS3Env(t)
	s := e.store(t, e.pathStyle())
	ctx := context.Background()
	for _, tc := range []struct{ id, hash string }{{"..", hashOf("x")}, {"a/b", hashOf("x")}, {"tmpl", "x/../y"}} {
		if _, err := s.UploadLink(ctx, "", tc.id, tc.hash); !errors.Is(err, ErrInvalid) {
			t.Errorf("UploadLink(%q, %q) = %v, want ErrInvalid", tc.id, tc.hash, err)
		}
		if _, err := s.Open(ctx, tc.id, tc.hash); !errors.Is(err, ErrInvalid) {
			t.Errorf("Open(%q, %q) = %v, want ErrInvalid", tc.id, tc.hash, err)
		}
	}
	for _, id := range []string{"..", "a/b", "", "A"} {
		if err := s.DeleteTemplate(ctx, id); !errors.Is(err, ErrInvalid) {
			t.Errorf("DeleteTemplate(%q) = %v, want ErrInvalid", id, err)
		}
	}
	if n := e.verifier.seen.Load(); n != 0 {
		t.Fatalf("invalid ids reached the server %d times", n)
	}
}

// TestS3Refusals shows the store reports what the server refuses, rather
// than reading it as a missing archive.
func TestS3Refusals(t *testing.T) {
	e := newS3Env(t)
	ctx := context.Background()
	hash := hashOf("refusals")

	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	wrong := e.store(t, e.pathStyle())
	if l, err := wrong.UploadLink(ctx, "", "tmpl", hash); err == nil {
		t.Fatalf("UploadLink with a wrong secret = %+v, want an error", l)
	}
	if _, err := wrong.Open(ctx, "tmpl", hash); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("Open with a wrong secret = %v, want an error other than ErrNotFound", err)
	}
	if err := wrong.DeleteTemplate(ctx, "tmpl"); err == nil {
		t.Fatal("DeleteTemplate with a wrong secret succeeded")
	}

	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecretKey)
	cfg := e.pathStyle()
	cfg.Bucket = "no-such-bucket"
	missing := e.store(t, cfg)
	if _, err := missing.Open(ctx, "tmpl", hash); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("Open in a missing bucket = %v, want an error other than ErrNotFound", err)
	}
}

// TestS3RegionFromChain leaves the region to the AWS configuration.
func TestS3RegionFromChain(t *testing.T) {
	e := newS3Env(t)
	t.Setenv("AWS_REGION", testRegion)
	cfg := e.pathStyle()
	cfg.Region = ""
	if _, err := e.store(t, cfg).Open(context.Background(), "tmpl", hashOf("r")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open signed for the chain's region = %v, want ErrNotFound", err)
	}
}

func TestNewS3Refuses(t *testing.T) {
	for name, cfg := range map[string]S3Config{
		"no bucket":    {PresignTTL: time.Minute},
		"no ttl":       {Bucket: "b"},
		"negative ttl": {Bucket: "b", PresignTTL: -time.Second},
		"ttl too long": {Bucket: "b", PresignTTL: 7*24*time.Hour + time.Second},
	} {
		if s, err := NewS3(context.Background(), cfg); err == nil || s != nil {
			t.Errorf("%s: NewS3 = %v, %v; want an error", name, s, err)
		}
	}
}
