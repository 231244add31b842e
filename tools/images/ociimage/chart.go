package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// The media types of a Helm chart in an OCI registry, as helm push writes
// it and helm pull, install and upgrade read it from an oci:// reference.
const (
	ChartConfigMediaType  types.MediaType = "application/vnd.cncf.helm.config.v1+json"
	ChartContentMediaType types.MediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// maxChartYAML bounds the Chart.yaml read from a package.
const maxChartYAML = 1 << 20

// Chart is a packaged Helm chart as an OCI artifact: a manifest whose
// config is the chart's metadata as JSON and whose one layer is the
// package itself.
type Chart struct {
	Name, Version string
	Image         v1.Image
}

// IsChartPackage reports whether path names a packaged chart (what helm
// package writes), which push sends as a chart rather than an image.
func IsChartPackage(path string) bool { return strings.HasSuffix(path, ".tgz") }

// ReadChart makes the OCI artifact of a packaged chart.
func ReadChart(pkg []byte) (Chart, error) {
	raw, err := chartYAML(pkg)
	if err != nil {
		return Chart{}, err
	}
	config, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return Chart{}, fmt.Errorf("Chart.yaml: %w", err)
	}
	var meta struct{ Name, Version string }
	if err := json.Unmarshal(config, &meta); err != nil {
		return Chart{}, fmt.Errorf("Chart.yaml: %w", err)
	}
	if meta.Name == "" || meta.Version == "" {
		return Chart{}, errors.New("Chart.yaml names no chart name or version")
	}
	img, err := partial.CompressedToImage(chartArtifact{config: config, content: static.NewLayer(pkg, ChartContentMediaType)})
	if err != nil {
		return Chart{}, err
	}
	return Chart{Name: meta.Name, Version: meta.Version, Image: img}, nil
}

// chartYAML is the Chart.yaml at the package's top directory.
func chartYAML(pkg []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(pkg))
	if err != nil {
		return nil, fmt.Errorf("not a chart package: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, errors.New("the chart package holds no Chart.yaml")
		}
		if err != nil {
			return nil, fmt.Errorf("reading the chart package: %w", err)
		}
		dir, file := path.Split(path.Clean(h.Name))
		if file == "Chart.yaml" && strings.Count(dir, "/") == 1 {
			data, err := io.ReadAll(io.LimitReader(tr, maxChartYAML+1))
			if err != nil {
				return nil, err
			}
			if len(data) > maxChartYAML {
				return nil, errors.New("Chart.yaml is over 1 MiB")
			}
			return data, nil
		}
	}
}

// chartArtifact is the manifest helm push writes: config and one layer.
type chartArtifact struct {
	config  []byte
	content v1.Layer
}

func (c chartArtifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

func (c chartArtifact) RawConfigFile() ([]byte, error) { return c.config, nil }

func (c chartArtifact) RawManifest() ([]byte, error) {
	configDigest, configSize, err := v1.SHA256(bytes.NewReader(c.config))
	if err != nil {
		return nil, err
	}
	digest, err := c.content.Digest()
	if err != nil {
		return nil, err
	}
	size, err := c.content.Size()
	if err != nil {
		return nil, err
	}
	return json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: ChartConfigMediaType, Size: configSize, Digest: configDigest},
		Layers:        []v1.Descriptor{{MediaType: ChartContentMediaType, Size: size, Digest: digest}},
	})
}

func (c chartArtifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := c.content.Digest(); err == nil && d == h {
		return c.content, nil
	}
	return nil, fmt.Errorf("the chart artifact has no layer %s", h)
}

// ChartTag is the tag helm gives a chart version: OCI tags have no '+',
// so build metadata is written after '_'.
func ChartTag(version string) string { return strings.ReplaceAll(version, "+", "_") }

// PushChart pushes c to prefix/<chart name>:<version>, where helm install
// oci://prefix/<chart name> --version <version> finds it, and returns that
// reference and the manifest's digest.
func PushChart(ctx context.Context, c Chart, prefix string, opts ...remote.Option) (string, v1.Hash, error) {
	ref := strings.TrimSuffix(prefix, "/") + "/" + c.Name + ":" + ChartTag(c.Version)
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", v1.Hash{}, fmt.Errorf("chart reference %q: %w", ref, err)
	}
	digest, err := c.Image.Digest()
	if err != nil {
		return "", v1.Hash{}, err
	}
	opts = append([]remote.Option{
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithContext(ctx),
		remote.WithTransport(TLSUnlessLoopback(remote.DefaultTransport)),
	}, opts...)
	if err := remote.Write(tag, c.Image, opts...); err != nil {
		return "", v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref, digest, nil
}
