// Package pins_test checks that every version pin of the build is written
// once, or, where Bazel needs a literal, that the copies agree.
//
// Where each pin lives:
//
//   - Go: go.mod's toolchain line. go_toolchain.bzl reads it (its table must
//     hold that release's sums) and provision.sh reads it; go_sdk.wrap takes
//     the version from the SDK itself.
//   - Kubernetes: go.mod's k8s.io/kubernetes requirement. tools/kube/version.bzl
//     reads it through @go_mod_versions; the staging modules go.mod replaces
//     must be the matching v0 release.
//   - rules_go and gazelle: MODULE.bazel's bazel_dep lines (Bazel wants
//     literals there); provision.sh reads them.
//   - Bazel: .bazelversion; provision.sh reads it and fails when the root's
//     Bazel differs.
//
// Under Bazel the files are the test's data; under go test they are read from
// the source tree.
package pins_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func goMod(t *testing.T) *modfile.File {
	t.Helper()
	f, err := modfile.Parse("go.mod", []byte(read(t, "../../../go.mod")), nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// provisioned returns what tools/build/provision.sh --pins prints: the
// versions the offline toolchain provisions, by name.
func provisioned(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("bash", "../provision.sh", "--pins").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("provision.sh --pins: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("provision.sh --pins: %v", err)
	}
	pins := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, version, _ := strings.Cut(line, " ")
		pins[name] = version
	}
	return pins
}

// bazelDep returns the version of a bazel_dep in MODULE.bazel.
func bazelDep(t *testing.T, module, name string) string {
	t.Helper()
	re := regexp.MustCompile(`(?s)\bbazel_dep\(\s*name\s*=\s*"` + regexp.QuoteMeta(name) + `"\s*,\s*version\s*=\s*"([^"]+)"`)
	m := re.FindAllStringSubmatch(module, -1)
	if len(m) != 1 {
		t.Fatalf("MODULE.bazel: want one bazel_dep(name = %q, version = ...), found %d", name, len(m))
	}
	return m[0][1]
}

func TestGoVersion(t *testing.T) {
	f := goMod(t)
	if f.Toolchain == nil {
		t.Fatal("go.mod has no toolchain line; it pins the Go SDK the build uses")
	}
	version := strings.TrimPrefix(f.Toolchain.Name, "go")
	if got := provisioned(t)["go"]; got != version {
		t.Errorf("provision.sh fetches Go %q, go.mod's toolchain line names %q", got, version)
	}
	// go_toolchain.bzl verifies the SDK against its table of sums.
	table := read(t, "../go_toolchain.bzl")
	entry := regexp.MustCompile(`(?s)"` + regexp.QuoteMeta(version) + `":\s*\{(.*?)\}`).FindStringSubmatch(table)
	if entry == nil {
		t.Fatalf("tools/build/go_toolchain.bzl has no SHA-256 sums for Go %s (go.mod's toolchain line)", version)
	}
	for _, platform := range []string{"darwin-amd64", "darwin-arm64", "linux-amd64", "linux-arm64"} {
		if !regexp.MustCompile(`"` + platform + `":\s*"[0-9a-f]{64}"`).MatchString(entry[1]) {
			t.Errorf("tools/build/go_toolchain.bzl: Go %s has no SHA-256 for %s", version, platform)
		}
	}
	// MODULE.bazel reads the version from go.mod; a literal there would be a
	// second copy.
	if module := read(t, "../../../MODULE.bazel"); strings.Contains(module, `"`+version+`"`) {
		t.Errorf("MODULE.bazel names Go %q; it should read it from go.mod (go_toolchain.from_file)", version)
	}
	if semver.Compare("v"+f.Go.Version, "v"+version) > 0 {
		t.Errorf("go.mod's go line (%s) is newer than its toolchain line (%s)", f.Go.Version, version)
	}
}

func TestKubernetesVersion(t *testing.T) {
	f := goMod(t)
	effective := map[string]string{}
	for _, r := range f.Require {
		effective[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		if r.Old.Path == r.New.Path && r.Old.Version == "" {
			effective[r.Old.Path] = r.New.Version
		}
	}
	kube := effective["k8s.io/kubernetes"]
	if !semver.IsValid(kube) || semver.Prerelease(kube) != "" || semver.Major(kube) != "v1" {
		t.Fatalf("go.mod requires k8s.io/kubernetes %q, want a v1 release", kube)
	}
	// k8s.io/kubernetes v1.X.Y is built from its staging modules at v0.X.Y.
	staging := "v0" + strings.TrimPrefix(kube, "v1")
	for path, version := range effective {
		if !strings.HasPrefix(path, "k8s.io/") || path == "k8s.io/kubernetes" {
			continue
		}
		// Released staging modules are v0 releases; klog, utils, kube-openapi
		// and the like are other majors or pseudo-versions.
		if semver.Major(version) != "v0" || semver.Prerelease(version) != "" {
			continue
		}
		if version != staging {
			t.Errorf("go.mod resolves %s to %s, but k8s.io/kubernetes %s is built from staging %s; replace it with %s",
				path, version, kube, staging, staging)
		}
	}
	if v := read(t, "../../kube/version.bzl"); !strings.Contains(v, `MODULES["k8s.io/kubernetes"]`) {
		t.Error("tools/kube/version.bzl should read KUBE_VERSION from go.mod (@go_mod_versions)")
	}
}

func TestRulesVersions(t *testing.T) {
	module := read(t, "../../../MODULE.bazel")
	pins := provisioned(t)
	for name, dep := range map[string]string{"rules_go": "rules_go", "gazelle": "gazelle"} {
		want := "v" + bazelDep(t, module, dep)
		if got := pins[name]; got != want {
			t.Errorf("provision.sh fetches %s %s, MODULE.bazel's bazel_dep names %s", name, got, want)
		}
	}
}

func TestBazelVersion(t *testing.T) {
	want := strings.TrimSpace(read(t, "../../../.bazelversion"))
	if !semver.IsValid("v"+want) || semver.Prerelease("v"+want) != "" {
		t.Fatalf(".bazelversion = %q, want a Bazel release like 7.7.1", want)
	}
	if got := provisioned(t)["bazel"]; got != want {
		t.Errorf("provision.sh checks the root's Bazel against %s, .bazelversion names %s", got, want)
	}
}
