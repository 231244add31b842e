package buildsteps

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
)

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// memArchives is Archives over archives held in memory, keyed by their
// SHA-256 as the SDK keys its uploads.
type memArchives map[string][]byte

func (m memArchives) Open(_ context.Context, hash string) (io.ReadCloser, error) {
	b, ok := m[hash]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// add stores an archive and returns its filesHash.
func (m memArchives) add(b []byte) string {
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:])
	m[h] = b
	return h
}

// makeTar lays files out as the SDK does: paths relative to the context
// directory, a directory entry ("name/") before what is below it. A value
// of "" under a name ending in "/" is a directory.
func makeTar(t *testing.T, gz bool, entries [][2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		name, body := e[0], e[1]
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg, Uid: 501, Gid: 20}
		if strings.HasSuffix(name, "/") {
			hdr.Mode, hdr.Size, hdr.Typeflag = 0o755, 0, tar.TypeDir
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// brokenHash names the archive brokenArchives fails to read.
const brokenHash = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

// brokenArchives is memArchives plus brokenHash, whose reader fails after
// 1 MiB, as a store losing its disk mid-read would.
type brokenArchives struct{ memArchives }

func (b brokenArchives) Open(ctx context.Context, hash string) (io.ReadCloser, error) {
	if hash == brokenHash {
		return io.NopCloser(io.MultiReader(io.LimitReader(zeros{}, 1<<20), failingReader{})), nil
	}
	return b.memArchives.Open(ctx, hash)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk gone") }
