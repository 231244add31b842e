// Command chartpkg packages a Helm chart as a byte-reproducible
// <name>-<version>.tgz stamped with the images' version.
//
//	go run ./tools/chartpkg --chart charts/sandbox-operator --image-version v1.2.3 --out-dir out
//	tools/bazel build --define IMAGE_VERSION=v1.2.3 //charts/sandbox-operator:package
//
// --image-version is the version the images are built and pushed with
// (Bazel's --define IMAGE_VERSION, default dev): it becomes appVersion and
// every image tag in values.yaml; Chart.yaml's version becomes its SemVer 2
// form (v1.2.3 -> 1.2.3, dev -> 0.0.0-dev). The chart is read with --chart
// (a directory, .helmignore applied) or, as the Bazel rule does, with one
// --file NAME=PATH per chart file. The path of the written archive is
// printed on stdout.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/cocoonstack/sandbox-operator/tools/chartpkg/chartpack"
)

const usage = `usage: chartpkg (--chart DIR | --file NAME=PATH ...) [--image-version V] [--out FILE | --out-dir DIR] [flags]
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type usageError struct{ error }

func run(args []string, stdout, stderr io.Writer) int {
	err := pack(args, stdout, stderr)
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "chartpkg: %v\n%s", err, usage)
		return 2
	default:
		fmt.Fprintf(stderr, "chartpkg: %v\n", err)
		return 1
	}
}

func pack(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("chartpkg", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		dir, version, out, outDir, mtime, expectName string
		files                                        []string
	)
	fs.StringVar(&dir, "chart", "", "Chart directory, read as Helm reads it (.helmignore applies).")
	fs.StringArrayVar(&files, "file", nil, "NAME=PATH: one chart file, NAME its path in the chart (templates/x.yaml); repeat per file. Instead of --chart.")
	fs.StringVar(&version, "image-version", chartpack.DefaultImageVersion, "Version of the images: appVersion and every image tag; Chart.yaml's version is its SemVer 2 form.")
	fs.StringVar(&out, "out", "", "Archive to write; default <out-dir>/<name>-<version>.tgz.")
	fs.StringVar(&outDir, "out-dir", ".", "Directory to write <name>-<version>.tgz into when --out is not given.")
	fs.StringVar(&mtime, "mtime", "", "Modification time of every entry, RFC 3339 or Unix seconds; default $SOURCE_DATE_EPOCH, else the Unix epoch.")
	fs.StringVar(&expectName, "expect-name", "", "Fail unless the archive is named this (<name>-<version>.tgz); the Bazel rule's check that it named its output as this program does.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if (dir == "") == (len(files) == 0) {
		return usageError{errors.New("give either --chart or --file")}
	}
	if out != "" && fs.Changed("out-dir") {
		return usageError{errors.New("--out and --out-dir exclude each other")}
	}
	when, err := parseTime(mtime)
	if err != nil {
		return usageError{err}
	}

	var chartFiles []chartpack.File
	if dir != "" {
		chartFiles, err = chartpack.LoadDir(dir)
	} else {
		paths := map[string]string{}
		for _, f := range files {
			name, p, ok := strings.Cut(f, "=")
			if !ok || name == "" || p == "" {
				return usageError{fmt.Errorf("--file %q: want NAME=PATH", f)}
			}
			if _, dup := paths[name]; dup {
				return usageError{fmt.Errorf("--file: %s given twice", name)}
			}
			paths[name] = p
		}
		chartFiles, err = chartpack.LoadFiles(paths)
	}
	if err != nil {
		return err
	}
	res, err := chartpack.Package(chartFiles, version, when)
	if err != nil {
		return err
	}
	if expectName != "" && res.FileName != expectName {
		return fmt.Errorf("image version %q packages as %s, but the build expected %s: tools/chartpkg/chart.bzl and tools/chartpkg/chartpack disagree on the chart's name or version", version, res.FileName, expectName)
	}
	if out == "" {
		out = filepath.Join(outDir, res.FileName)
	}
	if err := os.WriteFile(out, res.Archive, 0o644); err != nil {
		return err
	}
	fmt.Fprintln(stdout, out)
	return nil
}

// parseTime reads --mtime: RFC 3339 or Unix seconds, else
// $SOURCE_DATE_EPOCH, else the zero Time (the epoch).
func parseTime(s string) (time.Time, error) {
	what := "--mtime"
	if s == "" {
		s, what = os.Getenv("SOURCE_DATE_EPOCH"), "SOURCE_DATE_EPOCH"
	}
	if s == "" {
		return time.Time{}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return time.Time{}, fmt.Errorf("%s %q is before the Unix epoch", what, s)
		}
		return time.Unix(n, 0), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: want RFC 3339 or Unix seconds", what, s)
	}
	if t.Before(time.Unix(0, 0)) {
		return time.Time{}, fmt.Errorf("%s %q is before the Unix epoch", what, s)
	}
	return t, nil
}
