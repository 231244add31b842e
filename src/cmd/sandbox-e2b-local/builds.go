package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
)

// buildConfig is the template build API of the local system: on unless
// --builds=false, with the uploaded files kept in the user's cache, where
// they outlive a restart like the base root filesystem does.
func (o *options) buildConfig(secret []byte) (*e2b.BuildConfig, error) {
	if !o.builds {
		return nil, nil
	}
	dir := o.buildDir
	if dir == "" {
		cache, err := rootfs.CacheDir()
		if err != nil {
			return nil, fmt.Errorf("--build-dir: %w; set --build-dir", err)
		}
		dir = filepath.Join(cache, "e2b-builds")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--build-dir: %w", err)
	}
	bo := e2b.NewBuildOptions()
	bo.Enabled, bo.Dir, bo.Parallel, bo.UploadMax = true, dir, o.buildParallel, o.buildUploadMax
	cfg, err := bo.Config(secret)
	if err != nil {
		return nil, fmt.Errorf("template builds: %w", err)
	}
	return cfg, nil
}
