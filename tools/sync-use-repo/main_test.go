package main

import (
	"os"
	"strings"
	"testing"
)

// TestModuleBazelMatchesGoMod fails when MODULE.bazel's use_repo(go_deps, ...)
// list is not what go.mod needs. Under Bazel the two files are the test's
// data; under go test they are read from the source tree.
func TestModuleBazelMatchesGoMod(t *testing.T) {
	goMod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	module, err := os.ReadFile("../../MODULE.bazel")
	if err != nil {
		t.Fatal(err)
	}
	want, changed, err := Sync(goMod, module)
	if err != nil {
		t.Fatal(err)
	}
	if changed {
		t.Errorf("MODULE.bazel's use_repo(go_deps, ...) does not match go.mod; run go run ./tools/sync-use-repo (after go mod tidy). It should read:\n%s",
			useRepoBlock.Find(want))
	}
}

func TestRepoName(t *testing.T) {
	for module, want := range map[string]string{
		"k8s.io/api":                             "io_k8s_api",
		"sigs.k8s.io/agent-sandbox":              "io_k8s_sigs_agent_sandbox",
		"connectrpc.com/connect":                 "com_connectrpc_connect",
		"github.com/BurntSushi/toml":             "com_github_burntsushi_toml",
		"go.etcd.io/etcd/server/v3":              "io_etcd_go_etcd_server_v3",
		"honnef.co/go/tools":                     "co_honnef_go_tools",
		"gopkg.in/yaml.v3":                       "in_gopkg_yaml_v3",
		"github.com/google/go-containerregistry": "com_github_google_go_containerregistry",
	} {
		if got := RepoName(module); got != want {
			t.Errorf("RepoName(%q) = %q, want %q", module, got, want)
		}
	}
}

func TestDirectRepos(t *testing.T) {
	goMod := `module example.com/m

go 1.26

require (
	example.com/direct v1.0.0
	example.com/indirect v1.0.0 // indirect
	example.com/tool v1.0.0 // indirect
)

require example.com/single v1.0.0

tool example.com/tool/cmd/x
`
	got, err := DirectRepos([]byte(goMod))
	if err != nil {
		t.Fatal(err)
	}
	if want := "com_example_direct com_example_single com_example_tool"; strings.Join(got, " ") != want {
		t.Errorf("DirectRepos = %v, want %s", got, want)
	}
}

func TestRewrite(t *testing.T) {
	module := "x = 1\n\nuse_repo(\n    go_deps,\n    \"old\",\n)\n\ny = 2\n"
	got, err := Rewrite([]byte(module), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "x = 1\n\nuse_repo(\n    go_deps,\n    \"a\",\n    \"b\",\n)\n\ny = 2\n"; string(got) != want {
		t.Errorf("Rewrite =\n%s\nwant\n%s", got, want)
	}
	if _, err := Rewrite([]byte("nothing here"), nil); err == nil {
		t.Error("Rewrite without a use_repo block succeeded")
	}
}
