// Package layout_test checks the README's Layout table against the tree:
// every folder it names exists, and every Bazel package of the folders it
// covers is named, so the table that says it lists every folder stays
// true.
package layout_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// covered are the top folders whose every Bazel package the table names.
var covered = []string{"src", "tests", "tools", "charts", "images", "examples"}

// skipped are folders below them that hold data, not packages of ours.
var skipped = []string{"testdata", "node_modules"}

// workspace finds the source tree from README.md, a runfile under Bazel
// (whose link leads back to the tree) or the file two levels up under go
// test.
func workspace(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"README.md", "../../README.md"} {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real)
		}
	}
	t.Fatal("README.md not found")
	return ""
}

// layoutPaths returns the paths and patterns in the first column of the
// Layout section's tables. A bare name after a path in the same cell is
// that path's sibling (`tools/kube/kubectl`, `kubelet`).
func layoutPaths(t *testing.T, readme string) []string {
	t.Helper()
	start := strings.Index(readme, "\n## Layout\n")
	if start < 0 {
		t.Fatal("README.md has no Layout section")
	}
	section := readme[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	tick := regexp.MustCompile("`([^`]+)`")
	var out []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell, _, _ := strings.Cut(line[1:], " | ")
		base := ""
		for _, m := range tick.FindAllStringSubmatch(cell, -1) {
			p := strings.TrimSuffix(m[1], "/")
			if strings.Contains(p, "/") || base == "" {
				base = path.Dir(p)
			} else {
				p = path.Join(base, p)
			}
			out = append(out, p)
		}
	}
	return out
}

func TestLayoutTableMatchesTheTree(t *testing.T) {
	root := workspace(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := layoutPaths(t, string(readme))
	if len(listed) < 50 {
		t.Fatalf("the Layout section names %d paths; the table was not found", len(listed))
	}
	for _, p := range listed {
		if m, err := filepath.Glob(filepath.Join(root, p)); err != nil || len(m) == 0 {
			t.Errorf("the Layout table names %s, which is not in the tree", p)
		}
	}
	named := func(dir string) bool {
		for _, p := range listed {
			if ok, _ := path.Match(p, dir); ok {
				return true
			}
		}
		return false
	}
	for _, top := range covered {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if slices.Contains(skipped, d.Name()) || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "BUILD.bazel")); err != nil {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			if !named(filepath.ToSlash(rel)) {
				t.Errorf("%s is a Bazel package the Layout table does not name", rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
