package rootfs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CIEnvVar names the environment variable that overrides where the
// code-interpreter layer is (tools/bazel sets it for tests).
const CIEnvVar = "SANDBOX_OPERATOR_CI_ROOTFS"

// CIMarker is the file, relative to the layer, whose presence says the
// layer is complete; its base= line names the version of the base tree the
// layer was computed over.
const CIMarker = "etc/sandbox-operator/rootfs-ci"

// CIScript provisions the code-interpreter layer, relative to the
// repository root.
const CIScript = "tools/build/rootfs-ci.sh"

// CodeInterpreter returns the directory holding the code-interpreter layer
// of the `e2b-ci` template (tools/build/rootfs-ci.sh): the IPython kernel
// and the data stack, kept as an overlay layer that only makes sense over
// the base tree it was computed on. base is that tree (Base's result); a
// layer made over another base (an older or newer one) is refused, since
// its copies of the package database and libraries would not match the
// files below them. The rules are Base's: CIEnvVar, else the link
// <cache>/rootfs/e2b-ci, complete only with CIMarker.
func CodeInterpreter(base string) (string, error) {
	def, err := CIDefaultPath()
	k := treeKind{what: "code-interpreter layer", envVar: CIEnvVar, marker: CIMarker, script: CIScript}
	dir, err := resolve(k, def, err)
	if err != nil {
		return "", err
	}
	want, err := markerField(filepath.Join(base, Marker), "version")
	if err != nil {
		return "", fmt.Errorf("code-interpreter layer: the base tree: %w", err)
	}
	got, err := markerField(filepath.Join(dir, CIMarker), "base")
	if err != nil {
		return "", fmt.Errorf("code-interpreter layer: %w", err)
	}
	if got != want {
		return "", fmt.Errorf("code-interpreter layer: %s was made over the base tree %q, not the current %q (%s); provision it again with %s as root (tools/bazel runs it)",
			dir, got, want, base, CIScript)
	}
	return dir, nil
}

// CIDefaultPath returns where tools/build/rootfs-ci.sh links the current
// layer when SANDBOX_OPERATOR_CI_ROOTFS is not set.
func CIDefaultPath() (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "rootfs", "e2b-ci"), nil
}

// markerField reads key=value's value from a marker file.
func markerField(path, key string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+"="); ok {
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return "", fmt.Errorf("%s has no %s= line", path, key)
}
