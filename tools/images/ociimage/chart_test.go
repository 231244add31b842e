package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// chartPackage is a .tgz as helm package writes it: every file under the
// chart's directory.
func chartPackage(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestChartPushedAsHelmWritesIt(t *testing.T) {
	pkg := chartPackage(t, map[string]string{
		"demo/Chart.yaml":            "apiVersion: v2\nname: demo\nversion: 1.2.3+build.4\nappVersion: v1.2.3\n",
		"demo/values.yaml":           "a: 1\n",
		"demo/charts/sub/Chart.yaml": "apiVersion: v2\nname: sub\nversion: 9.9.9\n",
	})
	c, err := ReadChart(pkg)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "demo" || c.Version != "1.2.3+build.4" {
		t.Fatalf("read %s %s, want the top chart demo 1.2.3+build.4", c.Name, c.Version)
	}
	reg := httptest.NewServer(registry.New())
	t.Cleanup(reg.Close)
	prefix := strings.TrimPrefix(reg.URL, "http://") + "/charts"
	ref, digest, err := PushChart(context.Background(), c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if want := prefix + "/demo:1.2.3_build.4"; ref != want {
		t.Fatalf("pushed to %s, want %s", ref, want)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(tag)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := img.Digest(); got != digest {
		t.Errorf("the registry holds %s, PushChart answered %s", got, digest)
	}
	if m.Config.MediaType != ChartConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != ChartContentMediaType {
		t.Fatalf("manifest %+v is not a Helm chart's", m)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(config), `"name":"demo"`) || !strings.Contains(string(config), `"appVersion":"v1.2.3"`) {
		t.Errorf("config %s is not the chart's metadata", config)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, pkg) {
		t.Error("the chart's layer is not the package byte for byte")
	}
}

func TestReadChartRefusesWhatIsNotAChart(t *testing.T) {
	for name, pkg := range map[string][]byte{
		"not gzip":      []byte("hello"),
		"no Chart.yaml": chartPackage(t, map[string]string{"demo/values.yaml": "a: 1\n"}),
		"no version":    chartPackage(t, map[string]string{"demo/Chart.yaml": "apiVersion: v2\nname: demo\n"}),
		"not YAML":      chartPackage(t, map[string]string{"demo/Chart.yaml": "name: [\n"}),
	} {
		if _, err := ReadChart(pkg); err == nil {
			t.Errorf("%s: read as a chart", name)
		}
	}
}
