// Command sync-use-repo rewrites the use_repo(go_deps, ...) list in
// MODULE.bazel from go.mod.
//
// gazelle's go_deps extension makes one repository per module, and expects the
// root module to import exactly those it reports as direct dependencies: the
// requirements go.mod does not mark "// indirect", plus every module that
// provides a package named by a tool directive. Run it after `go mod tidy`:
//
//	go run ./tools/sync-use-repo          # rewrite MODULE.bazel
//	go run ./tools/sync-use-repo -check   # exit 1 if it is out of date
//
// //tools/sync-use-repo:sync-use-repo_test fails when the list is out of date.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
)

// RepoName is gazelle's default repository name for a module path.
func RepoName(module string) string {
	host, rest, _ := strings.Cut(module, "/")
	labels := strings.Split(host, ".")
	parts := make([]string, 0, len(labels)+1)
	for i := len(labels) - 1; i >= 0; i-- {
		parts = append(parts, labels[i])
	}
	if rest != "" {
		parts = append(parts, strings.Split(rest, "/")...)
	}
	name := strings.ReplaceAll(strings.Join(parts, "_"), "-", "_")
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r - 'A' + 'a')
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// DirectRepos returns the sorted repository names go_deps reports as the root
// module's direct dependencies, given go.mod's content.
func DirectRepos(goMod []byte) ([]string, error) {
	f, err := modfile.Parse("go.mod", goMod, nil)
	if err != nil {
		return nil, err
	}
	// Like gazelle, treat every path prefix of a tool package as a possible
	// module providing it.
	toolPrefixes := map[string]bool{}
	for _, t := range f.Tool {
		p := t.Path
		for {
			toolPrefixes[p] = true
			i := strings.LastIndex(p, "/")
			if i < 0 {
				break
			}
			p = p[:i]
		}
	}
	seen := map[string]bool{}
	var names []string
	for _, r := range f.Require {
		if r.Indirect && !toolPrefixes[r.Mod.Path] {
			continue
		}
		if n := RepoName(r.Mod.Path); !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

var useRepoBlock = regexp.MustCompile(`(?ms)^use_repo\(\n    go_deps,\n.*?^\)`)

// Rewrite returns MODULE.bazel's content with its use_repo(go_deps, ...)
// block listing names.
func Rewrite(module []byte, names []string) ([]byte, error) {
	if n := len(useRepoBlock.FindAllIndex(module, -1)); n != 1 {
		return nil, fmt.Errorf("MODULE.bazel: expected exactly one use_repo(go_deps, ...) block, found %d", n)
	}
	var b bytes.Buffer
	b.WriteString("use_repo(\n    go_deps,\n")
	for _, n := range names {
		fmt.Fprintf(&b, "    %q,\n", n)
	}
	b.WriteString(")")
	return useRepoBlock.ReplaceAllLiteral(module, b.Bytes()), nil
}

// Sync computes MODULE.bazel's content for go.mod's content, and whether it
// differs from what is there.
func Sync(goMod, module []byte) (want []byte, changed bool, err error) {
	names, err := DirectRepos(goMod)
	if err != nil {
		return nil, false, err
	}
	want, err = Rewrite(module, names)
	if err != nil {
		return nil, false, err
	}
	return want, !bytes.Equal(want, module), nil
}

// workspace finds the repository root: the directory bazel run was started
// in, else the nearest parent of the working directory holding MODULE.bazel.
func workspace() (string, error) {
	if d := os.Getenv("BUILD_WORKSPACE_DIRECTORY"); d != "" {
		return d, nil
	}
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "MODULE.bazel")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("no MODULE.bazel in the working directory or above it")
		}
		d = parent
	}
}

func main() {
	check := flag.Bool("check", false, "only report whether MODULE.bazel is current; exit 1 if not")
	flag.Parse()
	if err := run(*check); err != nil {
		fmt.Fprintln(os.Stderr, "sync-use-repo:", err)
		os.Exit(1)
	}
}

func run(check bool) error {
	ws, err := workspace()
	if err != nil {
		return err
	}
	goMod, err := os.ReadFile(filepath.Join(ws, "go.mod"))
	if err != nil {
		return err
	}
	path := filepath.Join(ws, "MODULE.bazel")
	module, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	want, changed, err := Sync(goMod, module)
	switch {
	case err != nil:
		return err
	case !changed:
		return nil
	case check:
		return errors.New("MODULE.bazel's use_repo(go_deps, ...) does not match go.mod; run go run ./tools/sync-use-repo")
	}
	return os.WriteFile(path, want, 0o644)
}
