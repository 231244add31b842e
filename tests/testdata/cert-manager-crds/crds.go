// Package certmanagercrds embeds, for tests, cert-manager's CRD manifests
// for the kinds the chart renders (Issuer and Certificate), so a test can
// install them in its own API server. tools/cert-manager-crds.sh copies
// them from the deploy/crds directory of the Go module
// github.com/cert-manager/cert-manager at the version recorded in VERSION;
// the module's LICENSE applies to them. Nothing here is shipped.
package certmanagercrds

import (
	"embed"
	"io/fs"
	"strings"
)

//go:embed *.yaml
var manifests embed.FS

//go:embed VERSION
var version string

// Version is the module and version the manifests were copied from, with
// the module's go.sum hash, e.g.
// "github.com/cert-manager/cert-manager v1.21.2 h1:...".
func Version() string { return strings.TrimSpace(version) }

// Manifests returns every embedded CRD manifest, in file name order.
func Manifests() [][]byte {
	names, err := fs.Glob(manifests, "*.yaml")
	if err != nil {
		panic(err) // the pattern is constant and valid
	}
	out := make([][]byte, 0, len(names))
	for _, name := range names {
		data, err := manifests.ReadFile(name)
		if err != nil {
			panic(err) // embedded files are always readable
		}
		out = append(out, data)
	}
	return out
}
