package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// ParseVolumeSpecs reads volume flags (sandboxd-sim and sandbox-e2b-local
// --volume): <name>=<host dir>[,writable][,tenants=<a>+<b>…].
// Tenant names never hold '+' or ',' (the claim name grammar), so both
// separate unambiguously.
func ParseVolumeSpecs(specs []string) ([]Volume, error) {
	var out []Volume
	seen := map[string]bool{}
	for _, spec := range specs {
		name, rest, ok := strings.Cut(spec, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want <name>=<host dir>[,writable][,tenants=<a>+<b>]", spec)
		}
		if !sandboxd.ValidVolumeName(name) {
			return nil, fmt.Errorf("%q: name %q: want 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", spec, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("volume %q given twice", name)
		}
		seen[name] = true
		parts := strings.Split(rest, ",")
		v := Volume{Name: name, Dir: parts[0]}
		if !filepath.IsAbs(v.Dir) {
			return nil, fmt.Errorf("%q: the host directory must be an absolute path", spec)
		}
		if fi, err := os.Stat(v.Dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%q: %s is not a directory", spec, v.Dir)
		}
		for _, opt := range parts[1:] {
			switch list, isTenants := strings.CutPrefix(opt, "tenants="); {
			case opt == "writable" && !v.Writable:
				v.Writable = true
			case isTenants && v.Tenants == nil && list != "":
				v.Tenants = strings.Split(list, "+")
				for _, t := range v.Tenants {
					if t == "" {
						return nil, fmt.Errorf("%q: empty tenant name in tenants=", spec)
					}
				}
			default:
				return nil, fmt.Errorf("%q: option %q: want writable or tenants=<a>+<b>, each at most once", spec, opt)
			}
		}
		out = append(out, v)
	}
	return out, nil
}
