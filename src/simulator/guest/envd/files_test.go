package envd

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type uploaded struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

func decodeUploaded(t *testing.T, body []byte) []uploaded {
	t.Helper()
	var out []uploaded
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("upload answer %q: %v", body, err)
	}
	return out
}

func TestUploadAndDownload(t *testing.T) {
	f := newFixture(t, nil)
	for _, h2c := range []bool{false, true} {
		name := map[bool]string{false: "http1", true: "h2c"}[h2c]
		t.Run(name, func(t *testing.T) {
			c := f.client(h2c, testToken)
			dest := name + "/notes/hello.txt"

			body, ct := multipartBody(t, [][2]string{{"ignored-name.txt", "hello from " + name}})
			status, resp, _ := do(t, c, http.MethodPost, f.filesURL(dest, url.Values{"username": {"user"}}), ct, body, nil)
			if status != http.StatusOK {
				t.Fatalf("upload: %d %s", status, resp)
			}
			want := uploaded{Path: "/home/user/" + dest, Name: "hello.txt", Type: "file"}
			if got := decodeUploaded(t, resp); len(got) != 1 || got[0] != want {
				t.Fatalf("upload answer %+v, want [%+v]", got, want)
			}

			status, content, hdr := do(t, c, http.MethodGet, f.filesURL(dest, nil), "", nil, nil)
			if status != http.StatusOK || string(content) != "hello from "+name {
				t.Fatalf("download: %d %q", status, content)
			}
			if !strings.Contains(hdr.Get("Content-Disposition"), `filename=hello.txt`) || hdr.Get("Content-Type") == "" {
				t.Errorf("download headers: %v", hdr)
			}
			// The same file by its absolute guest path.
			status, content, _ = do(t, c, http.MethodGet, f.filesURL(want.Path, nil), "", nil, nil)
			if status != http.StatusOK || string(content) != "hello from "+name {
				t.Fatalf("download by absolute path: %d %q", status, content)
			}
		})
	}

	c := f.client(false, testToken)
	t.Run("octet-stream and gzip", func(t *testing.T) {
		status, resp, _ := do(t, c, http.MethodPost, f.filesURL("raw.bin", nil), "application/octet-stream", strings.NewReader("raw body"), nil)
		if status != http.StatusOK || decodeUploaded(t, resp)[0].Path != "/home/user/raw.bin" {
			t.Fatalf("raw upload: %d %s", status, resp)
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write([]byte("compressed body"))
		zw.Close()
		status, resp, _ = do(t, c, http.MethodPost, f.filesURL("raw.bin", nil), "application/octet-stream", &gz,
			http.Header{"Content-Encoding": {"gzip"}})
		if status != http.StatusOK {
			t.Fatalf("gzip upload: %d %s", status, resp)
		}
		if b, _ := os.ReadFile(filepath.Join(f.root, "raw.bin")); string(b) != "compressed body" {
			t.Fatalf("file holds %q after the gzip overwrite", b)
		}
		status, resp, _ = do(t, c, http.MethodPost, f.filesURL("", nil), "application/octet-stream", strings.NewReader("x"), nil)
		if status != http.StatusBadRequest {
			t.Fatalf("raw upload without path: %d %s", status, resp)
		}
		wantErrorBody(t, resp, http.StatusBadRequest)
	})

	t.Run("multipart names its own destinations", func(t *testing.T) {
		body, ct := multipartBody(t, [][2]string{{"multi/a.txt", "A"}, {"multi/deeper/b.txt", "B"}})
		status, resp, _ := do(t, c, http.MethodPost, f.filesURL("", nil), ct, body, nil)
		if status != http.StatusOK {
			t.Fatalf("upload: %d %s", status, resp)
		}
		got := decodeUploaded(t, resp)
		if len(got) != 2 || got[0].Path != "/home/user/multi/a.txt" || got[1].Path != "/home/user/multi/deeper/b.txt" {
			t.Fatalf("upload answer %+v", got)
		}
		if b, _ := os.ReadFile(filepath.Join(f.root, "multi/deeper/b.txt")); string(b) != "B" {
			t.Fatalf("b.txt holds %q", b)
		}
	})

	t.Run("missing, directory and unsupported", func(t *testing.T) {
		status, resp, _ := do(t, c, http.MethodGet, f.filesURL("nope.txt", nil), "", nil, nil)
		if status != http.StatusNotFound {
			t.Fatalf("missing file: %d", status)
		}
		wantErrorBody(t, resp, http.StatusNotFound)
		status, resp, _ = do(t, c, http.MethodGet, f.filesURL("multi", nil), "", nil, nil)
		if status != http.StatusBadRequest {
			t.Fatalf("directory download: %d", status)
		}
		wantErrorBody(t, resp, http.StatusBadRequest)
		status, _, _ = do(t, c, http.MethodPost, f.filesURL("x.txt", nil), "text/plain", strings.NewReader("x"), nil)
		if status != http.StatusBadRequest {
			t.Fatalf("text/plain upload: %d", status)
		}
		body, ct := multipartBody(t, [][2]string{{"x", "over a directory"}})
		status, _, _ = do(t, c, http.MethodPost, f.filesURL("multi", nil), ct, body, nil)
		if status != http.StatusBadRequest {
			t.Fatalf("upload onto a directory: %d", status)
		}
	})
}

func TestUploadSizeLimit(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxUploadBytes = 1024 })
	c := f.client(false, testToken)
	big := strings.Repeat("x", 4096)

	status, resp, _ := do(t, c, http.MethodPost, f.filesURL("big.bin", nil), "application/octet-stream", strings.NewReader(big), nil)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized raw upload: %d %s", status, resp)
	}
	wantErrorBody(t, resp, http.StatusRequestEntityTooLarge)

	// A small gzip body that expands past the limit is refused too.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(big))
	zw.Close()
	if gz.Len() >= 1024 {
		t.Fatalf("test body compresses to %d bytes, not under the limit", gz.Len())
	}
	status, _, _ = do(t, c, http.MethodPost, f.filesURL("big.bin", nil), "application/octet-stream", &gz, http.Header{"Content-Encoding": {"gzip"}})
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("gzip bomb: %d", status)
	}

	body, ct := multipartBody(t, [][2]string{{"big.bin", big}})
	status, _, _ = do(t, c, http.MethodPost, f.filesURL("", nil), ct, body, nil)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized multipart upload: %d", status)
	}

	// Nothing was left behind, not even a temporary file.
	entries, err := os.ReadDir(f.root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("root holds %v after refused uploads", entries)
	}
}
