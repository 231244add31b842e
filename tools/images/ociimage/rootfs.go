package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"
)

// NonRootUID is the user (and group) the images run as: distroless's
// "nonroot", the uid the chart's pods set as runAsUser.
const NonRootUID = 65532

// BinaryDir is where the binary lives in the image; the entrypoint is
// BinaryDir/<name>.
const BinaryDir = "/usr/local/bin"

// entry is one file or directory of the image's single layer.
type entry struct {
	path string // relative to the root, no leading slash
	dir  bool
	mode int64
	uid  int
	data []byte
}

// baseEntries is what an empty base needs for a Go binary running as a
// non-root user: /etc/passwd and /etc/group so the uid has a name and a home
// (os/user, $HOME), nsswitch.conf so Go's resolver consults /etc/hosts
// first, a writable home and a sticky /tmp.
func baseEntries() []entry {
	return []entry{
		{path: "etc", dir: true, mode: 0o755},
		{path: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUID))},
		{path: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{path: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootUID))},
		{path: "home", dir: true, mode: 0o755},
		{path: "home/nonroot", dir: true, mode: 0o700, uid: NonRootUID},
		{path: "tmp", dir: true, mode: 0o1777},
	}
}

// rootFS assembles the layer: the base entries, the extra files, the binary
// at BinaryDir/name and every parent directory, as a gzipped tar whose bytes
// depend only on the inputs and mtime.
func rootFS(name string, binary []byte, extra map[string][]byte, mtime time.Time) ([]byte, error) {
	entries := map[string]entry{}
	add := func(e entry) error {
		if old, ok := entries[e.path]; ok && (old.dir != e.dir || !e.dir) {
			return fmt.Errorf("%s is in the image twice", "/"+e.path)
		}
		entries[e.path] = e
		return nil
	}
	addParents := func(p string) {
		for dir := path.Dir(p); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if _, ok := entries[dir]; !ok {
				entries[dir] = entry{path: dir, dir: true, mode: 0o755}
			}
		}
	}
	for _, e := range baseEntries() {
		if err := add(e); err != nil {
			return nil, err
		}
	}
	for dst, data := range extra {
		rel := strings.TrimPrefix(path.Clean("/"+dst), "/")
		if rel == "" {
			return nil, fmt.Errorf("extra file %q has no path", dst)
		}
		if err := add(entry{path: rel, mode: 0o644, data: data}); err != nil {
			return nil, err
		}
		addParents(rel)
	}
	bin := strings.TrimPrefix(path.Join(BinaryDir, name), "/")
	if err := add(entry{path: bin, mode: 0o755, data: binary}); err != nil {
		return nil, err
	}
	addParents(bin)

	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	// Lexical order puts every directory before its contents.
	sort.Strings(paths)

	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	// The gzip header carries no name, no comment and a zero mtime.
	tw := tar.NewWriter(gz)
	for _, p := range paths {
		e := entries[p]
		hdr := &tar.Header{
			Name:    e.path,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing %s: %w", e.path, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("writing %s: %w", e.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
