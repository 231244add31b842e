package testbin

import (
	"fmt"
	"os"
	"path/filepath"
)

// Runfile resolves the $(rlocationpath) in env against the runfiles tree
// (RUNFILES_DIR under bazel run, TEST_SRCDIR under bazel test); an
// absolute path is taken as it is, and an unset variable gives "".
func Runfile(env string) (string, error) {
	p := os.Getenv(env)
	if p == "" || filepath.IsAbs(p) {
		return p, nil
	}
	for _, root := range []string{os.Getenv("RUNFILES_DIR"), os.Getenv("TEST_SRCDIR")} {
		if root == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			return filepath.Join(root, p), nil
		}
	}
	// bazel run without RUNFILES_DIR: the runfiles tree sits beside the binary.
	if exe, err := os.Executable(); err == nil {
		cand := filepath.Join(exe+".runfiles", p)
		if _, err := os.Stat(cand); err == nil {
			return cand, nil
		}
	}
	return "", fmt.Errorf("%s=%s: not found in the runfiles", env, p)
}
