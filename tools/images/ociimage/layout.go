package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// maxLayoutBytes bounds what ReadLayout extracts from a layout tar.
const maxLayoutBytes = 4 << 30

// IsTar reports whether out names a layout tar rather than a directory.
func IsTar(out string) bool { return strings.HasSuffix(out, ".tar") }

// WriteLayout writes idx as the only entry of an OCI image layout at out: a
// directory, or, when out ends in .tar, a tar of that directory whose bytes
// depend only on idx (entries in lexical order, fixed owner, modes and
// mtime). refName tags the index inside the layout (empty leaves it
// untagged). A directory out must not exist yet or be empty.
func WriteLayout(idx v1.ImageIndex, out, refName string) error {
	if !IsTar(out) {
		return writeLayoutDir(idx, out, refName)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".layout-")
	if err != nil {
		return fmt.Errorf("creating a staging directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "layout")
	if err := writeLayoutDir(idx, dir, refName); err != nil {
		return err
	}
	part := filepath.Join(tmp, "layout.tar")
	if err := tarDir(dir, part); err != nil {
		return err
	}
	if err := os.Rename(part, out); err != nil {
		return fmt.Errorf("moving the layout tar into place: %w", err)
	}
	return nil
}

func writeLayoutDir(idx v1.ImageIndex, dir, refName string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s exists and is not empty", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("creating the OCI layout %s: %w", dir, err)
	}
	var opts []layout.Option
	if refName != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{AnnotationRefName: refName}))
	}
	if err := p.AppendIndex(idx, opts...); err != nil {
		return fmt.Errorf("writing the index to %s: %w", dir, err)
	}
	return nil
}

// tarDir writes dir's regular files and directories to dst in lexical order
// with fixed metadata.
func tarDir(dir, dst string) (err error) {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	epoch := time.Unix(0, 0).UTC()
	// WalkDir visits entries in lexical order.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			hdr.Typeflag, hdr.Mode, hdr.Name = tar.TypeDir, 0o755, hdr.Name+"/"
			return tw.WriteHeader(hdr)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			defer src.Close()
			_, err = io.Copy(tw, src)
			return err
		default:
			return fmt.Errorf("%s: unexpected file type %v in the layout", p, d.Type())
		}
	})
	if err != nil {
		return fmt.Errorf("writing the layout tar: %w", err)
	}
	return tw.Close()
}

// ReadLayout opens the image index written by WriteLayout at path (a
// directory or a .tar). A tar is extracted to a temporary directory that
// close removes; call close once the index is no longer read.
func ReadLayout(path string) (idx v1.ImageIndex, close func(), err error) {
	dir, close := path, func() {}
	if IsTar(path) {
		tmp, err := os.MkdirTemp("", "oci-layout-")
		if err != nil {
			return nil, nil, err
		}
		close = func() { os.RemoveAll(tmp) }
		if err := untar(path, tmp); err != nil {
			close()
			return nil, nil, err
		}
		dir = tmp
	}
	idx, err = openIndex(dir)
	if err != nil {
		close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return idx, close, nil
}

func openIndex(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("not an OCI layout: %w", err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 || m.Manifests[0].MediaType != types.OCIImageIndex {
		return nil, fmt.Errorf("the layout holds %d entries, want exactly one image index", len(m.Manifests))
	}
	return top.ImageIndex(m.Manifests[0].Digest)
}

// untar extracts a layout tar, refusing anything but plain files and
// directories inside dst and bounding the total size.
func untar(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", src, err)
		}
		name := filepath.FromSlash(strings.TrimSuffix(hdr.Name, "/"))
		if !filepath.IsLocal(name) {
			return fmt.Errorf("%s: entry %q leaves the layout", src, hdr.Name)
		}
		target := filepath.Join(dst, name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			total += hdr.Size
			if total > maxLayoutBytes {
				return fmt.Errorf("%s: layout larger than %d bytes", src, int64(maxLayoutBytes))
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := writeFile(target, io.LimitReader(tr, hdr.Size)); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entry %q has unsupported type %q", src, hdr.Name, hdr.Typeflag)
		}
	}
}

func writeFile(path string, r io.Reader) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = io.Copy(f, r)
	return err
}
