package install

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/cocoonstack/sandbox-operator/tools/images/ociimage"
)

// chartRegistry is an OCI registry on loopback holding the packaged chart,
// so the install runs helm install oci://… as users of a published chart
// do, and the chart travels the way //images:push sends it.
type chartRegistry struct {
	srv *http.Server
	// Ref is the chart's oci:// reference, without a version.
	Ref string
	// Version is the chart's version, for --version.
	Version string
}

// startChartRegistry serves go-containerregistry's in-memory registry on a
// loopback port and pushes the package at chartPath into it.
func startChartRegistry(ctx context.Context, chartPath string) (*chartRegistry, error) {
	pkg, err := os.ReadFile(chartPath)
	if err != nil {
		return nil, err
	}
	chart, err := ociimage.ReadChart(pkg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", chartPath, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chart registry: %w", err)
	}
	r := &chartRegistry{srv: &http.Server{
		Handler:           registry.New(registry.Logger(log.New(discard{}, "", 0))),
		ReadHeaderTimeout: 30 * time.Second,
	}}
	go func() { _ = r.srv.Serve(ln) }()
	prefix := ln.Addr().String() + "/charts"
	if _, _, err := ociimage.PushChart(ctx, chart, prefix); err != nil {
		r.close()
		return nil, err
	}
	r.Ref, r.Version = "oci://"+prefix+"/"+chart.Name, chart.Version
	return r, nil
}

func (r *chartRegistry) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
