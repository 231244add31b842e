// Package gotool finds the module a tool under tools/ works on and the go
// command to run in it, under bazel run (the source tree and the Go SDK
// rules_go registers) and under go run (the working directory and the go on
// PATH) alike. //tools/fuzz and //tools/soak share it.
package gotool

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ModuleRoot is the directory of the module's go.mod: the source tree under
// bazel run, else the nearest go.mod above the working directory.
func ModuleRoot() (root, modPath string, err error) {
	dir := os.Getenv("BUILD_WORKSPACE_DIRECTORY")
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return "", "", err
		}
	}
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			mod := modulePath(raw)
			if mod == "" {
				return "", "", fmt.Errorf("%s/go.mod names no module", dir)
			}
			return dir, mod, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Command is the go command to run in the module at root and the
// environment to run it in: under bazel run, the go command of the Go SDK
// rules_go registers, found at the runfiles location goRlocation (a data
// dependency of the calling binary, passed in by its x_defs); otherwise,
// or when goRlocation is empty, the go on PATH.
func Command(root, goRlocation string) (string, []string) {
	env := os.Environ()
	if goRlocation != "" {
		if p, runfiles := rlocation(goRlocation); p != "" {
			// rules_go's go command finds its SDK through the runfiles
			// and runs in BUILD_WORKING_DIRECTORY.
			env = append(env, "RUNFILES_DIR="+runfiles, "BUILD_WORKING_DIRECTORY="+root)
			return p, env
		}
		fmt.Fprintf(os.Stderr, "%s is not in the runfiles; using go from PATH\n", goRlocation)
	}
	return "go", env
}

// rlocation resolves a runfiles location against the runfiles tree bazel
// run sets up beside the binary.
func rlocation(loc string) (path, root string) {
	var roots []string
	if r := os.Getenv("RUNFILES_DIR"); r != "" {
		roots = append(roots, r)
	}
	if exe, err := os.Executable(); err == nil {
		roots = append(roots, exe+".runfiles")
	}
	if wd, err := os.Getwd(); err == nil {
		roots = append(roots, filepath.Dir(wd)) // bazel run starts in <runfiles>/_main
	}
	for _, r := range roots {
		p := filepath.Join(r, loc)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			abs, err := filepath.Abs(r)
			if err != nil {
				continue
			}
			return filepath.Join(abs, loc), abs
		}
	}
	return "", ""
}
