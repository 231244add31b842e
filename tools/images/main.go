// Command images builds the project's multi-platform OCI images from
// prebuilt static binaries and pushes them, with no container daemon.
//
//	images build --name sandbox-apiserver \
//	    --binary linux/amd64=out/amd64/sandbox-apiserver \
//	    --binary linux/arm64=out/arm64/sandbox-apiserver \
//	    --version v1.2.3 --out sandbox-apiserver.oci.tar
//	images push --tag v1.2.3 sandbox-apiserver.oci.tar ...
//	images digest sandbox-apiserver.oci.tar
//
// build writes an OCI layout (a directory, or a tar when --out ends in .tar)
// holding one image index. push sends each layout's index to
// <repository-prefix>/<image name>:<tag>, or to --repository for a single
// layout, with credentials from the default keychain (the Docker config file
// and its credential helpers).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/pflag"

	"github.com/cocoonstack/sandbox-operator/tools/images/ociimage"
)

// defaultSource is the source label of the project's images.
const defaultSource = "https://github.com/cocoonstack/sandbox-operator"

// Environment fallbacks of push's flags, so `bazel run //images:push` can be
// driven from CI without editing its arguments.
const (
	envTag              = "IMAGE_TAG"
	envRepositoryPrefix = "IMAGE_REPOSITORY_PREFIX"
)

const usage = `usage:
  images build --name NAME --binary OS/ARCH=PATH [--binary ...] --out DIR|FILE.tar [flags]
  images push --tag TAG [--tag ...] [--repository-prefix P | --repository R] LAYOUT|CHART.tgz...
    (a packaged Helm chart goes to P/<chart name>:<chart version>, as helm push does)
  images digest LAYOUT...
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command line; extra remote options are for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, opts ...remote.Option) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "build":
		err = build(args[1:], stdout, stderr)
	case "push":
		err = push(ctx, args[1:], stdout, stderr, opts)
	case "digest":
		err = digest(args[1:], stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		err = usageError{fmt.Errorf("unknown command %q", args[0])}
	}
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "images: %v\n%s", err, usage)
		return 2
	default:
		fmt.Fprintf(stderr, "images: %v\n", err)
		return 1
	}
}

type usageError struct{ error }

func newFlagSet(name string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func build(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("build", stderr)
	var (
		spec     ociimage.Spec
		binaries []string
		files    []string
		created  string
		out      string
	)
	fs.StringVar(&spec.Name, "name", "", "Image name: the binary becomes "+ociimage.BinaryDir+"/NAME, the entrypoint. Required.")
	fs.StringArrayVar(&binaries, "binary", nil, "OS/ARCH=PATH of one platform's static binary (linux/amd64, linux/arm64); repeat per platform.")
	fs.StringVar(&spec.Version, "version", "dev", "org.opencontainers.image.version label, and the index's tag inside the layout.")
	fs.StringVar(&spec.Source, "source", defaultSource, "org.opencontainers.image.source label.")
	fs.StringVar(&spec.Revision, "revision", "", "org.opencontainers.image.revision label (a commit); empty leaves it out.")
	fs.StringVar(&created, "created", "", "Timestamp of every file and of the config, RFC 3339 or Unix seconds; default $SOURCE_DATE_EPOCH, else the Unix epoch.")
	fs.StringArrayVar(&files, "file", nil, "IMAGE_PATH=HOST_PATH of an extra file for every platform (e.g. a CA bundle); repeatable.")
	fs.StringVar(&out, "out", "", "Where to write the OCI layout: a new directory, or a .tar file. Required.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if spec.Name == "" || out == "" || len(binaries) == 0 || fs.NArg() > 0 {
		return usageError{errors.New("build needs --name, --out and at least one --binary, and no arguments")}
	}
	for _, b := range binaries {
		platform, path, ok := strings.Cut(b, "=")
		if !ok || path == "" {
			return usageError{fmt.Errorf("--binary %q is not OS/ARCH=PATH", b)}
		}
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			return usageError{fmt.Errorf("--binary %q: %w", b, err)}
		}
		spec.Binaries = append(spec.Binaries, ociimage.Binary{
			Platform: *p,
			Open:     func() (io.ReadCloser, error) { return os.Open(path) },
		})
	}
	for _, f := range files {
		dst, src, ok := strings.Cut(f, "=")
		if !ok || dst == "" || src == "" {
			return usageError{fmt.Errorf("--file %q is not IMAGE_PATH=HOST_PATH", f)}
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("--file %s: %w", dst, err)
		}
		if spec.ExtraFiles == nil {
			spec.ExtraFiles = map[string][]byte{}
		}
		spec.ExtraFiles[dst] = data
	}
	if created == "" {
		created = os.Getenv("SOURCE_DATE_EPOCH")
	}
	t, err := parseCreated(created)
	if err != nil {
		return usageError{err}
	}
	spec.Created = t

	idx, err := ociimage.BuildIndex(spec)
	if err != nil {
		return err
	}
	if err := ociimage.WriteLayout(idx, out, spec.Version); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s %s\n", spec.Name, d, out)
	return nil
}

// parseCreated takes RFC 3339 or Unix seconds (SOURCE_DATE_EPOCH's form);
// empty is the zero time, which the image spec turns into the epoch.
func parseCreated(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if secs, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(secs, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--created %q is neither RFC 3339 nor Unix seconds", s)
	}
	return t, nil
}

func push(ctx context.Context, args []string, stdout, stderr io.Writer, opts []remote.Option) error {
	fs := newFlagSet("push", stderr)
	var (
		tags       []string
		prefix     string
		repository string
	)
	fs.StringArrayVar(&tags, "tag", nil, "Tag to push to; repeatable. Default $"+envTag+".")
	fs.StringVar(&prefix, "repository-prefix", "", "Registry and path the images go under, as PREFIX/<image name>. Default $"+envRepositoryPrefix+", else "+ociimage.DefaultRepositoryPrefix+".")
	fs.StringVar(&repository, "repository", "", "Full repository for a single layout, instead of PREFIX/<image name>.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(tags) == 0 {
		if t := os.Getenv(envTag); t != "" {
			tags = []string{t}
		}
	}
	if prefix == "" {
		prefix = os.Getenv(envRepositoryPrefix)
	}
	if prefix == "" {
		prefix = ociimage.DefaultRepositoryPrefix
	}
	layouts := fs.Args()
	switch {
	case len(layouts) == 0:
		return usageError{errors.New("push needs at least one layout")}
	case len(tags) == 0:
		return usageError{fmt.Errorf("push needs --tag (or $%s)", envTag)}
	case repository != "" && (len(layouts) != 1 || ociimage.IsChartPackage(layouts[0])):
		return usageError{errors.New("--repository takes exactly one layout; use --repository-prefix for several")}
	}
	for _, l := range layouts {
		if ociimage.IsChartPackage(l) {
			if err := pushChart(ctx, l, strings.TrimSuffix(prefix, "/"), stdout, opts); err != nil {
				return err
			}
			continue
		}
		if err := pushLayout(ctx, l, repository, strings.TrimSuffix(prefix, "/"), tags, stdout, opts); err != nil {
			return err
		}
	}
	return nil
}

// pushChart pushes a packaged chart to PREFIX/<chart name>:<chart
// version>, where helm install oci://PREFIX/<chart name> finds it; the
// chart's version, not --tag, is its tag, as with helm push.
func pushChart(ctx context.Context, path, prefix string, stdout io.Writer, opts []remote.Option) error {
	pkg, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	c, err := ociimage.ReadChart(pkg)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ref, d, err := ociimage.PushChart(ctx, c, prefix, opts...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s@%s\n", ref, d)
	return nil
}

func pushLayout(ctx context.Context, path, repository, prefix string, tags []string, stdout io.Writer, opts []remote.Option) error {
	idx, closeLayout, err := ociimage.ReadLayout(path)
	if err != nil {
		return err
	}
	defer closeLayout()
	if repository == "" {
		title, err := ociimage.Title(idx)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		repository = prefix + "/" + title
	}
	d, err := ociimage.Push(ctx, idx, repository, tags, opts...)
	if err != nil {
		return err
	}
	for _, t := range tags {
		fmt.Fprintf(stdout, "%s:%s@%s\n", repository, t, d)
	}
	return nil
}

func digest(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("digest needs at least one layout")}
	}
	for _, path := range args {
		idx, closeLayout, err := ociimage.ReadLayout(path)
		if err != nil {
			return err
		}
		d, err := idx.Digest()
		closeLayout()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s\n", d, path)
	}
	return nil
}
