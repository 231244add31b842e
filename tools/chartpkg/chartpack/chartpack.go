// Package chartpack packages a Helm chart as a byte-reproducible .tgz,
// stamped with the version the project's images are built with.
//
// The stamp is one image version (IMAGE_VERSION, the tag the images are
// pushed under): Chart.yaml's appVersion and every image tag in values.yaml
// become that version, and Chart.yaml's version becomes its SemVer 2 form
// (see ChartVersion).
//
// The archive is what `helm package` writes in layout (every file under a
// top directory named after the chart, <name>-<version>.tgz) but with
// nothing taken from the machine or the clock: entries in lexical order,
// regular files only, mode 0644, owner 0:0 without names, one fixed
// modification time (the Unix epoch unless given), and a gzip header with
// no file name and a zero time. The same files and version give the same
// bytes.
package chartpack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/ignore"
)

// File is one chart file at its slash-separated path under the chart root.
type File struct {
	Name string
	Data []byte
}

// Result is a packaged chart.
type Result struct {
	// FileName is <chart name>-<chart version>.tgz.
	FileName string
	// Archive is the .tgz.
	Archive []byte
	// Metadata is the stamped Chart.yaml.
	Metadata *chart.Metadata
	// ImageTags are the dotted paths of the values that were stamped
	// (apiserver.image.tag, ...).
	ImageTags []string
}

// LoadDir reads a chart directory as `helm package` and `helm install DIR`
// do, through Helm's loader: .helmignore applies and a UTF-8 byte order
// mark is dropped. The .helmignore file itself is left out: it steers the
// directory load and is no part of the packaged chart.
func LoadDir(dir string) ([]File, error) {
	c, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart directory %s: %w", dir, err)
	}
	files := make([]File, 0, len(c.Raw))
	for _, f := range c.Raw {
		if f.Name == ignore.HelmIgnore {
			continue
		}
		files = append(files, File{Name: f.Name, Data: f.Data})
	}
	sortFiles(files)
	return files, nil
}

// LoadFiles reads the named files (chart path -> file on disk) as LoadDir
// reads a directory holding exactly them: they are staged into a temporary
// directory that is then loaded, so .helmignore (when among them) applies
// the same way.
func LoadFiles(paths map[string]string) ([]File, error) {
	dir, err := os.MkdirTemp("", "chartpack-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for name, src := range paths {
		clean := path.Clean(name)
		if name == "" || path.IsAbs(clean) || clean == "." || strings.HasPrefix(clean, "../") || clean == ".." {
			return nil, fmt.Errorf("chart file name %q is not a path inside the chart", name)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		dst := filepath.Join(dir, filepath.FromSlash(clean))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return nil, err
		}
	}
	return LoadDir(dir)
}

// Package stamps the chart files with imageVersion and archives them.
// mtime is every entry's modification time (the zero Time means the Unix
// epoch).
func Package(files []File, imageVersion string, mtime time.Time) (*Result, error) {
	version, err := ChartVersion(imageVersion)
	if err != nil {
		return nil, err
	}
	stamped := make([]File, 0, len(files))
	var tags []string
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f.Name] {
			return nil, fmt.Errorf("chart file %s given twice", f.Name)
		}
		seen[f.Name] = true
		data := f.Data
		switch f.Name {
		case "Chart.yaml":
			if data, err = stampChartYAML(data, version, imageVersion); err != nil {
				return nil, err
			}
		case "values.yaml":
			if data, tags, err = stampValuesYAML(data, imageVersion); err != nil {
				return nil, err
			}
		}
		stamped = append(stamped, File{Name: f.Name, Data: data})
	}
	sortFiles(stamped)

	// Helm's own checks on what it would load: metadata (SemVer version,
	// name, type), values that parse, templates under templates/.
	buffered := make([]*loader.BufferedFile, 0, len(stamped))
	for _, f := range stamped {
		buffered = append(buffered, &loader.BufferedFile{Name: f.Name, Data: f.Data})
	}
	c, err := loader.LoadFiles(buffered)
	if err != nil {
		return nil, fmt.Errorf("the stamped chart does not load: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("the stamped chart is invalid: %w", err)
	}
	if c.Metadata.Version != version || c.Metadata.AppVersion != imageVersion {
		return nil, fmt.Errorf("the stamped chart says version %q appVersion %q, want %q and %q", c.Metadata.Version, c.Metadata.AppVersion, version, imageVersion)
	}

	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	archive, err := writeArchive(c.Name(), stamped, mtime.UTC().Truncate(time.Second))
	if err != nil {
		return nil, err
	}
	// And the archive reads back as the same chart.
	back, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("the archive does not load back: %w", err)
	}
	if len(back.Raw) != len(stamped) {
		return nil, fmt.Errorf("the archive loads back with %d files, want %d", len(back.Raw), len(stamped))
	}
	return &Result{
		FileName:  fmt.Sprintf("%s-%s.tgz", c.Name(), version),
		Archive:   archive,
		Metadata:  c.Metadata,
		ImageTags: tags,
	}, nil
}

// writeArchive writes files, already sorted, under top/ as a gzipped tar.
func writeArchive(top string, files []File, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	// No name, no time, no comment: the header is the same everywhere.
	zw.Header = gzip.Header{OS: 255}
	tw := tar.NewWriter(zw)
	for _, f := range files {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     top + "/" + f.Name,
			Mode:     0o644,
			Size:     int64(len(f.Data)),
			ModTime:  mtime,
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("archiving %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func sortFiles(files []File) {
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
}
