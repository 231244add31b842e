// Package images_test checks the images Bazel builds the way their users
// meet them: `bazel run //images:push` against a real registry on loopback,
// read back through the registry API, and the single-platform host variants
// a local cluster imports into containerd.
//
// It needs the Bazel-built layouts, so it runs only under Bazel:
//
//	tools/bazel test //tests/integration/images:images_test
//
// Under plain `go test` it skips.
package images_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tools/images/ociimage"
)

// Set by BUILD.bazel: paths relative to the main repository's runfiles
// directory, which is where `bazel run` starts a program.
const (
	// envPush holds the files of //images:push: the executable
	// `bazel run //images:push` starts (images/push) and its source.
	envPush = "IMAGES_PUSH"
	// envPushArgs are the arguments BUILD.bazel gives it (push_args in
	// images/image.bzl), space-separated.
	envPushArgs = "IMAGES_PUSH_ARGS"
	// envPushedLayouts are the multi-platform layouts push sends.
	envPushedLayouts = "IMAGES_PUSHED_LAYOUTS"
	// envHostLayouts are every image's <name>.host layout.
	envHostLayouts = "IMAGES_HOST_LAYOUTS"
	// envChartPackage is the packaged chart push sends with the images.
	envChartPackage = "IMAGES_CHART_PACKAGE"
)

// imagePlatforms are the platforms of every multi-platform image, in index
// order.
var imagePlatforms = []string{"linux/amd64", "linux/arm64"}

// mainRunfiles returns the main repository's directory in the runfiles
// tree, skipping the test outside Bazel.
func mainRunfiles(t *testing.T) string {
	t.Helper()
	if os.Getenv(envPush) == "" {
		t.Skipf("$%s is unset: this test runs the Bazel-built images; run tools/bazel test //tests/integration/images:images_test", envPush)
	}
	root := os.Getenv("RUNFILES_DIR")
	if root == "" {
		root = os.Getenv("TEST_SRCDIR")
	}
	if root == "" {
		t.Fatal("neither RUNFILES_DIR nor TEST_SRCDIR is set")
	}
	repo := os.Getenv("TEST_WORKSPACE")
	if repo == "" {
		repo = "_main"
	}
	return filepath.Join(root, repo)
}

// layoutInfo is what a built layout holds.
type layoutInfo struct {
	path      string
	title     string
	version   string
	refName   string // index.json's org.opencontainers.image.ref.name
	digest    v1.Hash
	manifests map[string]v1.Hash // platform -> manifest digest
	platforms []string           // in index order
}

func readLayout(t *testing.T, path string) layoutInfo {
	t.Helper()
	idx, closeLayout, err := ociimage.ReadLayout(path)
	if err != nil {
		t.Fatalf("reading layout %s: %v", path, err)
	}
	defer closeLayout()
	info := layoutInfo{path: path, manifests: map[string]v1.Hash{}}
	if info.digest, err = idx.Digest(); err != nil {
		t.Fatal(err)
	}
	if info.title, err = ociimage.Title(idx); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	info.version = m.Annotations[ociimage.AnnotationVersion]
	for _, d := range m.Manifests {
		if d.Platform == nil {
			t.Fatalf("%s: manifest %s has no platform", path, d.Digest)
		}
		p := d.Platform.String()
		info.manifests[p] = d.Digest
		info.platforms = append(info.platforms, p)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatalf("%s: invalid index: %v", path, err)
	}
	info.refName = layoutRefName(t, path)
	return info
}

// layoutRefName reads the ref.name annotation of the one entry in the layout
// tar's index.json: the name containerd's import gives the image's tag.
func layoutRefName(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no index.json: %v", path, err)
		}
		if h.Name != "index.json" {
			continue
		}
		var top v1.IndexManifest
		if err := json.NewDecoder(tr).Decode(&top); err != nil {
			t.Fatalf("%s: index.json: %v", path, err)
		}
		if len(top.Manifests) != 1 {
			t.Fatalf("%s: index.json has %d entries, want 1", path, len(top.Manifests))
		}
		return top.Manifests[0].Annotations[ociimage.AnnotationRefName]
	}
}

// startRegistry serves go-containerregistry's in-memory registry over plain
// HTTP on a loopback port and returns host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:           registry.New(registry.Logger(log.New(testWriter{t}, "registry: ", 0))),
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return ln.Addr().String()
}

// testWriter sends the registry's request log to the test log, shown when
// the test fails.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestPushToLoopbackRegistry runs //images:push exactly as
// `bazel run //images:push -- --tag T --repository-prefix 127.0.0.1:PORT/it`
// does, then reads every image back through the registry API.
func TestPushToLoopbackRegistry(t *testing.T) {
	dir := mainRunfiles(t)
	host := startRegistry(t)
	const tag = "v0.0.0-it"
	prefix := host + "/it"

	var layouts []layoutInfo
	for _, p := range strings.Fields(os.Getenv(envPushedLayouts)) {
		layouts = append(layouts, readLayout(t, filepath.Join(dir, p)))
	}
	if len(layouts) == 0 {
		t.Fatalf("$%s names no layouts", envPushedLayouts)
	}

	// bazel run starts the script in the runfiles tree with BUILD.bazel's
	// args first, then the caller's.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append(strings.Fields(os.Getenv(envPushArgs)), "--tag", tag, "--repository-prefix", prefix)
	cmd := exec.CommandContext(ctx, filepath.Join(dir, pushExecutable(t)), args...)
	cmd.Dir = dir
	// No credentials from this machine, and no tag or prefix from its
	// environment: only the flags above decide.
	cmd.Env = append(withoutEnv(os.Environ(), "IMAGE_TAG", "IMAGE_REPOSITORY_PREFIX", "DOCKER_CONFIG"),
		"DOCKER_CONFIG="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("push %q: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	t.Logf("push printed:\n%s", stdout.String())

	t.Run("chart", func(t *testing.T) {
		pkg, err := os.ReadFile(filepath.Join(dir, os.Getenv(envChartPackage)))
		if err != nil {
			t.Fatalf("$%s: %v", envChartPackage, err)
		}
		checkPushedChart(ctx, t, pkg, prefix, stdout.String())
	})
	for _, l := range layouts {
		t.Run(l.title, func(t *testing.T) {
			repo := prefix + "/" + l.title
			if want := fmt.Sprintf("%s:%s@%s\n", repo, tag, l.digest); !strings.Contains(stdout.String(), want) {
				t.Errorf("push output lacks %q", want)
			}
			checkPushed(ctx, t, repo, tag, l)
		})
	}
}

// pushExecutable picks the executable out of //images:push's files: the
// one named after the target, as bazel run names it.
func pushExecutable(t *testing.T) string {
	t.Helper()
	for _, p := range strings.Fields(os.Getenv(envPush)) {
		if filepath.Base(p) == "push" {
			return p
		}
	}
	t.Fatalf("$%s=%q has no executable named push", envPush, os.Getenv(envPush))
	return ""
}

// checkPushed reads repo:tag back and compares it with the layout.
func checkPushed(ctx context.Context, t *testing.T, repo, tag string, l layoutInfo) {
	t.Helper()
	ref, err := name.NewTag(repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	opts := []remote.Option{remote.WithContext(ctx)}

	// The tag resolves to the layout's index.
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		t.Fatalf("resolving %s: %v", ref, err)
	}
	if desc.Digest != l.digest || desc.MediaType != types.OCIImageIndex {
		t.Fatalf("%s is %s %s, want the layout's index %s", ref, desc.MediaType, desc.Digest, l.digest)
	}
	tags, err := remote.List(ref.Context(), opts...)
	if err != nil || !slices.Contains(tags, tag) {
		t.Errorf("tags of %s: %v (%v), want %s among them", ref.Context(), tags, err, tag)
	}

	idx, err := remote.Index(ref, opts...)
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	if d, err := idx.Digest(); err != nil || d != l.digest {
		t.Fatalf("pulled index %s (%v), want %s", d, err, l.digest)
	}
	// Every manifest, config and layer arrived intact.
	if err := validate.Index(idx); err != nil {
		t.Fatalf("pulled index invalid: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.String())
		if want := l.manifests[d.Platform.String()]; d.Digest != want {
			t.Errorf("%s manifest %s, layout has %s", d.Platform, d.Digest, want)
		}
	}
	if !slices.Equal(platforms, imagePlatforms) {
		t.Fatalf("pushed platforms %v, want %v", platforms, imagePlatforms)
	}

	// Each platform's image is there by its own digest, for its platform.
	for _, p := range imagePlatforms {
		byDigest := ref.Context().Digest(l.manifests[p].String())
		img, err := remote.Image(byDigest, opts...)
		if err != nil {
			t.Fatalf("pulling %s: %v", byDigest, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cf.OS + "/" + cf.Architecture; got != p {
			t.Errorf("%s is for %s, want %s", byDigest, got, p)
		}
	}
}

// TestHostLayouts checks every <name>.host layout: one image, for this
// machine's platform, named as containerd's import will name it.
func TestHostLayouts(t *testing.T) {
	dir := mainRunfiles(t)
	multi := map[string]layoutInfo{}
	for _, p := range strings.Fields(os.Getenv(envPushedLayouts)) {
		l := readLayout(t, filepath.Join(dir, p))
		multi[l.title] = l
	}
	hostPlatform := runtime.GOOS + "/" + runtime.GOARCH
	paths := strings.Fields(os.Getenv(envHostLayouts))
	if len(paths) == 0 {
		t.Fatalf("$%s names no layouts", envHostLayouts)
	}
	for _, p := range paths {
		path := filepath.Join(dir, p)
		l := readLayout(t, path)
		t.Run(l.title, func(t *testing.T) {
			if want := l.title + ".host.tar"; filepath.Base(path) != want {
				t.Errorf("layout file %s, want %s", filepath.Base(path), want)
			}
			if !slices.Equal(l.platforms, []string{hostPlatform}) {
				t.Fatalf("platforms %v, want only %s", l.platforms, hostPlatform)
			}
			// The tag inside the layout is the version label; importing with
			// --base-name ghcr.io/cocoonstack/<name> names it <base>:<version>.
			if l.refName == "" || l.refName != l.version {
				t.Errorf("index.json ref.name %q, want the version label %q", l.refName, l.version)
			}
			// A host image is the multi-platform image's manifest for this
			// platform, byte for byte.
			if m, ok := multi[l.title]; ok {
				if l.manifests[hostPlatform] != m.manifests[hostPlatform] {
					t.Errorf("host manifest %s, the multi-platform image has %s for %s",
						l.manifests[hostPlatform], m.manifests[hostPlatform], hostPlatform)
				}
			}
			img := hostImage(t, path)
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{ociimage.BinaryDir + "/" + l.title}; !slices.Equal(cf.Config.Entrypoint, want) {
				t.Errorf("entrypoint %q, want %q", cf.Config.Entrypoint, want)
			}
		})
	}
}

// TestPauseImageRuns takes the pause binary out of pause.host and runs it:
// it must keep running until SIGINT, then exit 0.
func TestPauseImageRuns(t *testing.T) {
	dir := mainRunfiles(t)
	var path string
	for _, p := range strings.Fields(os.Getenv(envHostLayouts)) {
		if filepath.Base(p) == "pause.host.tar" {
			path = filepath.Join(dir, p)
		}
	}
	if path == "" {
		t.Fatalf("$%s has no pause.host.tar", envHostLayouts)
	}
	bin := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(bin, imageFile(t, hostImage(t, path), ociimage.BinaryDir+"/pause"), 0o755); err != nil {
		t.Fatal(err)
	}

	// pause is started with SIGINT ignored, which a Go program keeps until it
	// asks for the signal: a SIGINT sent before pause is listening would be
	// lost, so the test sends it once pause shows it listens.
	signal.Ignore(syscall.SIGINT)
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Start()
	signal.Reset(syscall.SIGINT)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Once pause asks for SIGINT its /proc status shows the signal caught
	// (SigCgt), which nothing announces: poll for that, failing if pause
	// exits first, on its own. Then one SIGINT must end it, with status 0.
	sigint := uint64(1) << (uint(syscall.SIGINT) - 1)
	poll.UntilNil(t, "pause to listen for SIGINT", func() error {
		select {
		case err := <-done:
			t.Fatalf("pause exited on its own: %v\n%s", err, stderr.String())
		default:
		}
		caught, err := caughtSignals(cmd.Process.Pid)
		if err != nil {
			return err
		}
		if caught&sigint == 0 {
			return fmt.Errorf("SigCgt %#x", caught)
		}
		return nil
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("pause exited with %v after SIGINT, want status 0\n%s", err, stderr.String())
		}
		if stderr.Len() > 0 {
			t.Errorf("pause wrote %q", stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("pause still runs 30s after SIGINT")
	}
}

// caughtSignals is the mask of signals the process pid catches, from the
// SigCgt line of /proc/<pid>/status.
func caughtSignals(pid int) (uint64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no SigCgt in /proc/%d/status", pid)
}

// hostImage returns the only image of a host layout.
func hostImage(t *testing.T, path string) v1.Image {
	t.Helper()
	idx, closeLayout, err := ociimage.ReadLayout(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeLayout)
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("%s holds %d images, want 1", path, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// imageFile returns the contents of the regular file at path in img's
// filesystem.
func imageFile(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	want := strings.TrimPrefix(path, "/")
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("the image has no %s", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "/") == want && h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// withoutEnv drops the named variables from env.
func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			out = append(out, kv)
		}
	}
	return out
}

// checkPushedChart reads the chart push sent back as helm reads an oci://
// chart: the manifest's config and layer media types are Helm's, the
// config is the chart's metadata and the layer is the package itself,
// under the chart's version.
func checkPushedChart(ctx context.Context, t *testing.T, pkg []byte, prefix, pushOutput string) {
	t.Helper()
	want, err := ociimage.ReadChart(pkg)
	if err != nil {
		t.Fatal(err)
	}
	ref := prefix + "/" + want.Name + ":" + ociimage.ChartTag(want.Version)
	digest, err := want.Image.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if line := fmt.Sprintf("%s@%s\n", ref, digest); !strings.Contains(pushOutput, line) {
		t.Errorf("push output lacks %q", line)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(tag, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("the registry has no chart at %s: %v", ref, err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != ociimage.ChartConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != ociimage.ChartContentMediaType {
		t.Fatalf("%s: manifest %+v is not a Helm chart's", ref, m)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(config), `"name":"`+want.Name+`"`) {
		t.Errorf("%s: config %s is not the chart's metadata", ref, config)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, pkg) {
		t.Errorf("%s: the chart layer is not the package byte for byte", ref)
	}
}
