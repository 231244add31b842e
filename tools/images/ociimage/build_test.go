package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/cocoonstack/sandbox-operator/tools/images/ociimage/elftest"
)

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = v1.Platform{OS: "linux", Architecture: "arm64"}
)

func bin(p v1.Platform, data []byte) Binary {
	return Binary{Platform: p, Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}
}

// testSpec is a two-platform spec whose binaries differ per platform.
func testSpec() Spec {
	return Spec{
		Name: "sandbox-apiserver",
		// Deliberately listed arm64 first: the index orders platforms itself.
		Binaries: []Binary{
			bin(arm64, elftest.Static("arm64", "arm64 build")),
			bin(amd64, elftest.Static("amd64", "amd64 build")),
		},
		Version:  "v1.2.3",
		Source:   "https://github.com/cocoonstack/sandbox-operator",
		Revision: "0123abcd",
	}
}

func mustBuild(t *testing.T, s Spec) v1.ImageIndex {
	t.Helper()
	idx, err := BuildIndex(s)
	if err != nil {
		t.Fatalf("BuildIndex: %v", err)
	}
	return idx
}

func TestBuildIndex(t *testing.T) {
	s := testSpec()
	idx := mustBuild(t, s)
	// go-containerregistry's own validator: every digest, size and diff ID
	// in the index, the manifests and the configs matches the blobs.
	if err := validate.Index(idx); err != nil {
		t.Fatalf("invalid index: %v", err)
	}

	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", im.MediaType, types.OCIImageIndex)
	}
	if im.Annotations[AnnotationTitle] != "sandbox-apiserver" || im.Annotations[AnnotationVersion] != "v1.2.3" {
		t.Errorf("index annotations %v", im.Annotations)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s manifest media type %s", d.Platform, d.MediaType)
		}
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("platforms %v, want linux/amd64 then linux/arm64", platforms)
	}

	for _, d := range im.Manifests {
		t.Run(d.Platform.String(), func(t *testing.T) {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture {
				t.Errorf("config platform %s/%s under descriptor %s", cf.OS, cf.Architecture, d.Platform)
			}
			if cf.Config.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532", cf.Config.User)
			}
			if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/sandbox-apiserver"}) || len(cf.Config.Cmd) != 0 {
				t.Errorf("entrypoint %v cmd %v, want the binary alone", cf.Config.Entrypoint, cf.Config.Cmd)
			}
			for k, want := range map[string]string{
				AnnotationSource:   "https://github.com/cocoonstack/sandbox-operator",
				AnnotationVersion:  "v1.2.3",
				AnnotationRevision: "0123abcd",
				AnnotationTitle:    "sandbox-apiserver",
				AnnotationCreated:  "1970-01-01T00:00:00Z",
			} {
				if got := cf.Config.Labels[k]; got != want {
					t.Errorf("label %s = %q, want %q", k, got, want)
				}
			}
			if !cf.Created.Equal(time.Unix(0, 0)) {
				t.Errorf("created %v, want the epoch", cf.Created)
			}
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer || m.Config.MediaType != types.OCIConfigJSON {
				t.Fatalf("manifest layers %v config %s, want one OCI gzip layer on an OCI config", m.Layers, m.Config.MediaType)
			}

			files := layerFiles(t, img)
			want := "amd64 build"
			if d.Platform.Architecture == "arm64" {
				want = "arm64 build"
			}
			binary := files["usr/local/bin/sandbox-apiserver"]
			if binary.hdr == nil || !strings.HasSuffix(string(binary.data), want) || binary.hdr.Mode != 0o755 || binary.hdr.Uid != 0 {
				t.Errorf("binary entry %+v does not hold the %s build as root-owned 0755", binary.hdr, d.Platform)
			}
			if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") {
				t.Errorf("/etc/passwd has no nonroot user: %q", files["etc/passwd"].data)
			}
			if h := files["home/nonroot/"].hdr; h == nil || h.Uid != NonRootUID {
				t.Errorf("/home/nonroot is not owned by the user: %+v", h)
			}
			if h := files["tmp/"].hdr; h == nil || h.Mode != 0o1777 {
				t.Errorf("/tmp is not sticky and world-writable: %+v", h)
			}
			for name, f := range files {
				if !f.hdr.ModTime.Equal(time.Unix(0, 0)) {
					t.Errorf("%s mtime %v, want the epoch", name, f.hdr.ModTime)
				}
			}
		})
	}
}

type tarFile struct {
	hdr  *tar.Header
	data []byte
}

func layerFiles(t *testing.T, img v1.Image) map[string]tarFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]tarFile{}
	tr := tar.NewReader(rc)
	var order []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = tarFile{hdr: h, data: data}
		order = append(order, h.Name)
	}
	if !slices.IsSorted(order) {
		t.Errorf("layer entries are not in lexical order: %v", order)
	}
	return files
}

func TestBuildIsReproducible(t *testing.T) {
	a, err := mustBuild(t, testSpec()).Digest()
	if err != nil {
		t.Fatal(err)
	}
	b, err := mustBuild(t, testSpec()).Digest()
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("two builds of the same inputs: %s and %s", a, b)
	}

	// Every input that should matter does.
	for name, change := range map[string]func(*Spec){
		"binary":  func(s *Spec) { s.Binaries[0] = bin(arm64, elftest.Static("arm64", "other build")) },
		"version": func(s *Spec) { s.Version = "v1.2.4" },
		"created": func(s *Spec) { s.Created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
		"file":    func(s *Spec) { s.ExtraFiles = map[string][]byte{"/etc/ssl/certs/ca-certificates.crt": []byte("pem")} },
	} {
		s := testSpec()
		change(&s)
		c, err := mustBuild(t, s).Digest()
		if err != nil {
			t.Fatal(err)
		}
		if c == a {
			t.Errorf("changing the %s left the digest %s", name, a)
		}
	}
}

func TestBuildRejectsUnusableBinaries(t *testing.T) {
	for name, tc := range map[string]struct {
		bins []Binary
		want string
	}{
		"wrong architecture": {[]Binary{bin(arm64, elftest.Static("amd64", "x"))}, "not for linux/arm64"},
		"dynamically linked": {[]Binary{bin(amd64, elftest.Dynamic("amd64", "x", "/lib64/ld-linux-x86-64.so.2"))}, "CGO_ENABLED=0"},
		"not an ELF":         {[]Binary{bin(amd64, []byte("#!/bin/sh\necho hi\n"))}, "not an ELF"},
		"unsupported OS":     {[]Binary{bin(v1.Platform{OS: "darwin", Architecture: "arm64"}, elftest.Static("arm64", "x"))}, "unsupported platform"},
		"same platform twice": {
			[]Binary{bin(amd64, elftest.Static("amd64", "a")), bin(amd64, elftest.Static("amd64", "b"))}, "given twice",
		},
		"no binaries": {nil, "no binaries"},
	} {
		t.Run(name, func(t *testing.T) {
			s := testSpec()
			s.Binaries = tc.bins
			_, err := BuildIndex(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("BuildIndex error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	s := testSpec()
	s.Name = "../escape"
	if _, err := BuildIndex(s); err == nil {
		t.Fatal("a name with a path separator was accepted")
	}
}

func TestExtraFilesLandInEveryPlatform(t *testing.T) {
	s := testSpec()
	s.ExtraFiles = map[string][]byte{"/etc/ssl/certs/ca-certificates.crt": []byte("PEM")}
	idx := mustBuild(t, s)
	im, _ := idx.IndexManifest()
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		files := layerFiles(t, img)
		if got := string(files["etc/ssl/certs/ca-certificates.crt"].data); got != "PEM" {
			t.Errorf("%s: CA bundle %q", d.Platform, got)
		}
		if files["etc/ssl/"].hdr == nil || files["etc/ssl/certs/"].hdr == nil {
			t.Errorf("%s: parent directories of the extra file missing", d.Platform)
		}
	}

	s.ExtraFiles = map[string][]byte{"/usr/local/bin/sandbox-apiserver": []byte("shadow")}
	if _, err := BuildIndex(s); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("an extra file over the binary: %v, want a refusal", err)
	}
}
