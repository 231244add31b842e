package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

func TestLayoutRoundTrip(t *testing.T) {
	idx := mustBuild(t, testSpec())
	want, _ := idx.Digest()
	for _, out := range []string{"layout-dir", "layout.tar"} {
		t.Run(out, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), out)
			if err := WriteLayout(idx, path, "v1.2.3"); err != nil {
				t.Fatal(err)
			}
			got, closeLayout, err := ReadLayout(path)
			if err != nil {
				t.Fatal(err)
			}
			defer closeLayout()
			if d, _ := got.Digest(); d != want {
				t.Fatalf("read back %s, wrote %s", d, want)
			}
			if err := validate.Index(got); err != nil {
				t.Fatalf("read-back index invalid: %v", err)
			}
			if title, err := Title(got); err != nil || title != "sandbox-apiserver" {
				t.Fatalf("Title = %q, %v", title, err)
			}
		})
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stray"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteLayout(idx, dir, ""); err == nil {
		t.Fatal("wrote a layout into a non-empty directory")
	}
}

// TestLayoutTarIsReproducible: the tar Bazel caches and pushes is the same
// bytes for the same inputs, not merely the same index digest.
func TestLayoutTarIsReproducible(t *testing.T) {
	var tars [][]byte
	for range 2 {
		path := filepath.Join(t.TempDir(), "image.tar")
		if err := WriteLayout(mustBuild(t, testSpec()), path, "v1.2.3"); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		tars = append(tars, b)
	}
	if !bytes.Equal(tars[0], tars[1]) {
		t.Fatal("two layout tars of the same build differ")
	}
	tr := tar.NewReader(bytes.NewReader(tars[0]))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(time.Unix(0, 0)) || h.Uid != 0 {
			t.Errorf("%s: mtime %v uid %d", h.Name, h.ModTime, h.Uid)
		}
	}
	for _, want := range []string{"oci-layout", "index.json", "blobs/sha256/"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("layout tar lacks %s: %v", want, names)
		}
	}
}

func TestReadLayoutRejectsEscapingTar(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evil.tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadLayout(path); err == nil || !strings.Contains(err.Error(), "leaves the layout") {
		t.Fatalf("ReadLayout of an escaping tar: %v", err)
	}
}

// startRegistry runs go-containerregistry's in-memory registry on loopback.
func startRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestPushAndPullBack(t *testing.T) {
	host := startRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Push what a build wrote to disk, as the push command does.
	path := filepath.Join(t.TempDir(), "image.tar")
	if err := WriteLayout(mustBuild(t, testSpec()), path, "v1.2.3"); err != nil {
		t.Fatal(err)
	}
	idx, closeLayout, err := ReadLayout(path)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLayout()
	repo := host + "/cocoonstack/sandbox-apiserver"
	pushed, err := Push(ctx, idx, repo, []string{"v1.2.3", "latest"})
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	if want, _ := idx.Digest(); pushed != want {
		t.Fatalf("Push returned %s for index %s", pushed, want)
	}

	for _, tag := range []string{"v1.2.3", "latest"} {
		ref, err := name.ParseReference(repo + ":" + tag)
		if err != nil {
			t.Fatal(err)
		}
		pulled, err := remote.Index(ref, remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("pulling %s: %v", ref, err)
		}
		if d, _ := pulled.Digest(); d != pushed {
			t.Fatalf("%s is %s, pushed %s", ref, d, pushed)
		}
		// Pulling validates every blob against its digest.
		if err := validate.Index(pulled); err != nil {
			t.Fatalf("pulled index invalid: %v", err)
		}
		im, _ := pulled.IndexManifest()
		local, _ := idx.IndexManifest()
		for i, d := range im.Manifests {
			if d.Digest != local.Manifests[i].Digest || d.Platform.String() != local.Manifests[i].Platform.String() {
				t.Errorf("manifest %d: pulled %s %s, pushed %s %s", i, d.Platform, d.Digest, local.Manifests[i].Platform, local.Manifests[i].Digest)
			}
		}
	}

	// A platform-specific pull resolves through the index.
	ref, _ := name.ParseReference(repo + ":v1.2.3")
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithPlatform(arm64))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil || cf.Architecture != "arm64" {
		t.Fatalf("arm64 pull got %v (%v)", cf, err)
	}
}

func TestPushRejectsBadInput(t *testing.T) {
	idx := mustBuild(t, testSpec())
	ctx := context.Background()
	if _, err := Push(ctx, idx, "127.0.0.1:1/x", nil); err == nil {
		t.Error("a push with no tag was accepted")
	}
	if _, err := Push(ctx, idx, "Not A Repo", []string{"v1"}); err == nil {
		t.Error("an invalid repository was accepted")
	}
}

// recordingTransport answers every request with 200 and records its URL.
type recordingTransport struct{ urls []string }

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.urls = append(rt.urls, r.URL.String())
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
}

func TestTLSUnlessLoopback(t *testing.T) {
	for url, allowed := range map[string]bool{
		"http://127.0.0.1:5000/v2/":        true,
		"http://127.1.2.3/v2/":             true,
		"http://[::1]:5000/v2/":            true,
		"http://localhost:5000/v2/":        true,
		"http://LocalHost/v2/":             true,
		"https://ghcr.io/v2/":              true,
		"https://10.0.0.1:5000/v2/":        true,
		"https://192.168.1.10/v2/":         true,
		"http://ghcr.io/v2/":               false,
		"http://10.0.0.1:5000/v2/":         false,
		"http://172.16.0.1/v2/":            false,
		"http://192.168.1.10/v2/":          false,
		"http://registry.local:5000/v2/":   false,
		"http://localhost.example.com/v2/": false,
		"http://0.0.0.0:5000/v2/":          false,
		"http://[fd00::1]:5000/v2/":        false,
	} {
		next := &recordingTransport{}
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := TLSUnlessLoopback(next).RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		switch {
		case allowed && (err != nil || len(next.urls) != 1):
			t.Errorf("%s: refused (%v), want it sent", url, err)
		case !allowed && (err == nil || len(next.urls) != 0):
			t.Errorf("%s: sent, want it refused", url)
		case !allowed && !strings.Contains(err.Error(), "only over HTTPS"):
			t.Errorf("%s: error %q does not say why", url, err)
		}
	}
}
