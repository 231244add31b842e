package ociimage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// OCI annotation and label keys the images carry (image-spec annotations.md).
const (
	AnnotationTitle    = "org.opencontainers.image.title"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationCreated  = "org.opencontainers.image.created"
	// AnnotationRefName tags a manifest inside an OCI layout's index.json.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// maxBinaryBytes bounds a binary read into memory; the project's binaries
// are well under 200 MiB, and a wrong path (a disk image, a device) must not
// be read whole.
const maxBinaryBytes = 512 << 20

// Binary is one platform's build of the image's program.
type Binary struct {
	Platform v1.Platform
	// Open returns the binary's bytes; it is called once.
	Open func() (io.ReadCloser, error)
}

// Spec describes one image index.
type Spec struct {
	// Name is the program's name: the binary is BinaryDir/Name, the
	// entrypoint, and the title label. Required.
	Name string
	// Binaries are the per-platform builds, one per platform. Required.
	Binaries []Binary
	// Version is the version label (a release tag, or "dev").
	Version string
	// Source is the source repository label.
	Source string
	// Revision is the VCS revision label; empty leaves it out.
	Revision string
	// Created is every timestamp in the image; the zero time means the Unix
	// epoch, so an unset value is reproducible too.
	Created time.Time
	// ExtraFiles are added to every platform's root filesystem at their
	// absolute paths (e.g. a CA bundle at /etc/ssl/certs/ca-certificates.crt).
	ExtraFiles map[string][]byte
}

func (s Spec) created() time.Time {
	if s.Created.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return s.Created.UTC().Truncate(time.Second)
}

// Labels are the OCI labels of the image config; the manifests and the index
// carry the same set as annotations.
func (s Spec) Labels() map[string]string {
	l := map[string]string{
		AnnotationTitle:   s.Name,
		AnnotationCreated: s.created().Format(time.RFC3339),
	}
	if s.Version != "" {
		l[AnnotationVersion] = s.Version
	}
	if s.Source != "" {
		l[AnnotationSource] = s.Source
	}
	if s.Revision != "" {
		l[AnnotationRevision] = s.Revision
	}
	return l
}

// Entrypoint is the image's entrypoint: the binary alone.
func (s Spec) Entrypoint() []string { return []string{path.Join(BinaryDir, s.Name)} }

func (s Spec) validate() error {
	if s.Name == "" || strings.ContainsAny(s.Name, "/\\ \t\n") || s.Name == "." || s.Name == ".." {
		return fmt.Errorf("image name %q must be a plain file name", s.Name)
	}
	if len(s.Binaries) == 0 {
		return errors.New("no binaries: give at least one platform's build")
	}
	seen := map[string]bool{}
	for _, b := range s.Binaries {
		key := b.Platform.String()
		if seen[key] {
			return fmt.Errorf("platform %s given twice", key)
		}
		seen[key] = true
	}
	return nil
}

// BuildIndex builds the multi-platform image index: one OCI image per
// binary, in platform order, each a single layer on an empty base.
func BuildIndex(s Spec) (v1.ImageIndex, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	bins := slices.Clone(s.Binaries)
	slices.SortFunc(bins, func(a, b Binary) int { return strings.Compare(a.Platform.String(), b.Platform.String()) })

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range bins {
		img, err := buildImage(s, b)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", s.Name, b.Platform.String(), err)
		}
		p := b.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &p},
		})
	}
	annotated, ok := mutate.Annotations(idx, s.Labels()).(v1.ImageIndex)
	if !ok {
		return nil, errors.New("annotating the index lost its type")
	}
	return annotated, nil
}

func buildImage(s Spec, b Binary) (v1.Image, error) {
	data, err := readBinary(b)
	if err != nil {
		return nil, err
	}
	if err := checkStaticBinary(bytes.NewReader(data), b.Platform); err != nil {
		return nil, err
	}
	created := s.created()
	layerBytes, err := rootFS(s.Name, data, s.ExtraFiles, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("building the layer: %w", err)
	}

	labels := s.Labels()
	cfg := &v1.ConfigFile{
		Architecture: b.Platform.Architecture,
		OS:           b.Platform.OS,
		Variant:      b.Platform.Variant,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:       fmt.Sprintf("%d:%d", NonRootUID, NonRootUID),
			Entrypoint: s.Entrypoint(),
			Env:        []string{"PATH=" + BinaryDir + ":/usr/bin:/bin"},
			WorkingDir: "/home/nonroot",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: plainLayer{layer},
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "tools/images: " + s.Name + " on an empty base",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the layer: %w", err)
	}
	annotated, ok := mutate.Annotations(img, maps.Clone(labels)).(v1.Image)
	if !ok {
		return nil, errors.New("annotating the image lost its type")
	}
	return annotated, nil
}

func readBinary(b Binary) ([]byte, error) {
	if b.Open == nil {
		return nil, errors.New("binary has no source")
	}
	rc, err := b.Open()
	if err != nil {
		return nil, fmt.Errorf("opening the binary: %w", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxBinaryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	if len(data) > maxBinaryBytes {
		return nil, fmt.Errorf("binary is larger than %d bytes", maxBinaryBytes)
	}
	return data, nil
}

// plainLayer hides the tarball layer's own Descriptor method, which carries
// an empty (not absent) annotations map: the manifest would then differ
// from its own serialized form, and the descriptor is computed from the
// digest, size and media type instead.
type plainLayer struct{ v1.Layer }
