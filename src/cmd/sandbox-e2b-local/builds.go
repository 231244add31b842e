package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
)

// buildConfig is the template build API of the local system: on unless
// --builds=false, with the uploaded files kept in the user's cache, where
// they outlive a restart like the base root filesystem does.
func (o *options) buildConfig(secret []byte, logger *slog.Logger) (*e2b.BuildConfig, func(), error) {
	if !o.builds {
		return nil, func() {}, nil
	}
	dir := o.buildDir
	if dir == "" {
		cache, err := rootfs.CacheDir()
		if err != nil {
			// No user cache (no HOME): the uploads live in a directory of
			// this run's own, removed on exit.
			if dir, err = os.MkdirTemp("", "sandbox-e2b-local-builds-"); err != nil {
				return nil, nil, fmt.Errorf("--build-dir: %w", err)
			}
			logger.Warn("no user cache directory: template build uploads are kept until exit only; set --build-dir to keep them", "dir", dir)
			return o.buildStore(dir, secret, func() { _ = os.RemoveAll(dir) })
		}
		dir = filepath.Join(cache, "e2b-builds")
	}
	return o.buildStore(dir, secret, func() {})
}

// buildStore is the build API over the directory store at dir; cleanup
// runs when the system stops.
func (o *options) buildStore(dir string, secret []byte, cleanup func()) (*e2b.BuildConfig, func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("--build-dir: %w", err)
	}
	bo := e2b.NewBuildOptions()
	bo.Enabled, bo.Dir, bo.Parallel, bo.UploadMax = true, dir, o.buildParallel, o.buildUploadMax
	cfg, err := bo.Config(secret)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("template builds: %w", err)
	}
	return cfg, cleanup, nil
}
