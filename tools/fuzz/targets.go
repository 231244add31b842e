package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// target is one fuzz function and the package that holds it.
type target struct {
	Name string // FuzzX
	Pkg  string // import path
	Dir  string // package directory, relative to the module root
}

// discover parses every *_test.go file of the module under root and
// returns its fuzz targets, sorted by package and name. Directories the go
// tool ignores (testdata, names starting with . or _), Bazel's output
// links, node_modules and nested modules are skipped.
func discover(root, modPath string) ([]target, error) {
	var out []target
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p == root {
				return nil
			}
			if name == "testdata" || name == "node_modules" || name == "vendor" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || strings.HasPrefix(name, "bazel-") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := modPath
		if rel != "." {
			pkg = path.Join(modPath, filepath.ToSlash(rel))
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && isFuzzFunc(fn) {
				out = append(out, target{Name: fn.Name.Name, Pkg: pkg, Dir: rel})
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pkg != out[j].Pkg {
			return out[i].Pkg < out[j].Pkg
		}
		return out[i].Name < out[j].Name
	})
	return out, err
}

// isFuzzFunc reports whether fn is a fuzz target as go test sees one:
// func FuzzXxx(f *testing.F), where Xxx does not start with a lower-case
// letter.
func isFuzzFunc(fn *ast.FuncDecl) bool {
	name, ok := strings.CutPrefix(fn.Name.Name, "Fuzz")
	if !ok || fn.Recv != nil || fn.Type.TypeParams != nil || fn.Type.Results != nil {
		return false
	}
	if name != "" && name[0] >= 'a' && name[0] <= 'z' {
		return false
	}
	params := fn.Type.Params.List
	if len(params) != 1 || len(params[0].Names) > 1 {
		return false
	}
	star, ok := params[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "F"
}
