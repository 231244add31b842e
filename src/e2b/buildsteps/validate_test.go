package buildsteps

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const hashA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// TestValidateRefuses: every definition that cannot run is refused with a
// message naming where it is wrong.
func TestValidateRefuses(t *testing.T) {
	ok := Step{Type: TypeRun, Args: []string{"true"}}
	big := strings.Repeat("x", MaxArgBytes+1)
	cases := []struct {
		name string
		tpl  Template
		want string
	}{
		{"unknown type", Template{Steps: []Step{ok, {Type: "ADD", Args: []string{"a", "b"}}}}, `step 2: unknown step type "ADD"`},
		{"lowercase type", Template{Steps: []Step{{Type: "run", Args: []string{"true"}}}}, `step 1: unknown step type "run"`},
		{"RUN without args", Template{Steps: []Step{{Type: TypeRun}}}, "step 1 (RUN): 0 arguments given, want 1 to 2"},
		{"RUN with 3 args", Template{Steps: []Step{{Type: TypeRun, Args: []string{"a", "b", "c"}}}}, "step 1 (RUN): 3 arguments given"},
		{"empty RUN", Template{Steps: []Step{ok, ok, {Type: TypeRun, Args: []string{"  \n"}}}}, "step 3 (RUN): an empty command"},
		{"RUN bad user", Template{Steps: []Step{{Type: TypeRun, Args: []string{"true", "a:b"}}}}, `step 1 (RUN): "a:b" is not a valid user name`},
		{"COPY without hash", Template{Steps: []Step{{Type: TypeCopy, Args: []string{"a", "/b", "", ""}}}}, "step 1 (COPY): filesHash must be"},
		{"COPY short hash", Template{Steps: []Step{{Type: TypeCopy, Args: []string{"a", "/b", "", ""}, FilesHash: hashA[:63]}}}, "filesHash must be"},
		{"COPY uppercase hash", Template{Steps: []Step{{Type: TypeCopy, Args: []string{"a", "/b", "", ""}, FilesHash: strings.ToUpper(hashA)}}}, "filesHash must be"},
		{"COPY 1 arg", Template{Steps: []Step{{Type: TypeCopy, Args: []string{"a"}, FilesHash: hashA}}}, "step 1 (COPY): 1 arguments given, want 2 to 4"},
		{"COPY 5 args", Template{Steps: []Step{{Type: TypeCopy, Args: []string{"a", "b", "", "", ""}, FilesHash: hashA}}}, "5 arguments given"},
		{"COPY absolute src", Template{Steps: []Step{{Type: TypeCopy, Args: []string{"/etc/passwd", "/b", "", ""}, FilesHash: hashA}}}, `source "/etc/passwd" is absolute`},
		{"COPY escaping src", Template{Steps: []Step{{Type: TypeCopy, Args: []string{"a/../../b", "/b", "", ""}, FilesHash: hashA}}}, `source "a/../../b" leaves the build context`},
		{"COPY src ..", Template{Steps: []Step{{Type: TypeCopy, Args: []string{"..", "/b", "", ""}, FilesHash: hashA}}}, "leaves the build context"},
		{"COPY empty src", Template{Steps: []Step{{Type: TypeCopy, Args: []string{"", "/b", "", ""}, FilesHash: hashA}}}, "an empty source"},
		{"COPY empty dest", Template{Steps: []Step{{Type: TypeCopy, Args: []string{"a", "", "", ""}, FilesHash: hashA}}}, "an empty destination"},
		{"COPY bad mode", Template{Steps: []Step{{Type: TypeCopy, Args: []string{"a", "/b", "", "0789"}, FilesHash: hashA}}}, `mode "0789" is not an octal permission`},
		{"COPY bad user", Template{Steps: []Step{{Type: TypeCopy, Args: []string{"a", "/b", "-x", ""}, FilesHash: hashA}}}, `"-x" is not a valid user name`},
		{"ENV odd args", Template{Steps: []Step{{Type: TypeEnv, Args: []string{"A", "1", "B"}}}}, "step 1 (ENV): 3 arguments given; want name and value pairs"},
		{"ENV no args", Template{Steps: []Step{{Type: TypeEnv}}}, "step 1 (ENV): 0 arguments given"},
		{"ENV bad name", Template{Steps: []Step{{Type: TypeEnv, Args: []string{"A-B", "1"}}}}, `"A-B" is not a valid environment variable name`},
		{"WORKDIR empty", Template{Steps: []Step{{Type: TypeWorkdir, Args: []string{""}}}}, "step 1 (WORKDIR): an empty directory"},
		{"WORKDIR 2 args", Template{Steps: []Step{{Type: TypeWorkdir, Args: []string{"/a", "/b"}}}}, "2 arguments given, want 1"},
		{"USER empty", Template{Steps: []Step{{Type: TypeUser, Args: []string{""}}}}, `step 1 (USER): "" is not a valid user name`},
		{"registry", Template{FromImage: "ubuntu:22.04", FromImageRegistry: json.RawMessage(`{"type":"registry","username":"u","password":"p"}`)}, "private registries are not supported"},
		{"both bases", Template{FromImage: "ubuntu:22.04", FromTemplate: "base"}, "set one of fromImage and fromTemplate, not both"},
		{"too many steps", Template{Steps: slices.Repeat([]Step{ok}, MaxSteps+1)}, "1001 steps given, at most 1000"},
		{"arg too long", Template{Steps: []Step{ok, {Type: TypeRun, Args: []string{big}}}}, "step 2 (RUN): argument 1: 65537 bytes long, over the 65536 allowed"},
		{"NUL in arg", Template{Steps: []Step{{Type: TypeWorkdir, Args: []string{"/a\x00b"}}}}, "argument 1: contains a NUL byte"},
		{"startCmd too long", Template{StartCmd: big}, "startCmd: 65537 bytes long"},
		{"readyCmd too long", Template{ReadyCmd: big}, "readyCmd: 65537 bytes long"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.tpl.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestValidateAccepts: what the SDK sends for each step type passes.
func TestValidateAccepts(t *testing.T) {
	raw := `{"fromTemplate":"base","fromImageRegistry":null,"force":false,"startCmd":"npm start","readyCmd":"curl -sf localhost:3000",
	"steps":[
		{"type":"RUN","args":["apt-get update && apt-get install -y git"],"force":false},
		{"type":"RUN","args":["whoami","root"]},
		{"type":"COPY","args":["files","/home/user/files","",""],"filesHash":"` + hashA + `","forceUpload":true},
		{"type":"COPY","args":["*.txt","dir/","root","0755"],"filesHash":"` + hashA + `"},
		{"type":"COPY","args":[".","/app"],"filesHash":"` + hashA + `"},
		{"type":"ENV","args":["A","1","_B2","two words"]},
		{"type":"WORKDIR","args":["/app"]},
		{"type":"USER","args":["root"]}
	]}`
	var tpl Template
	if err := json.Unmarshal([]byte(raw), &tpl); err != nil {
		t.Fatal(err)
	}
	if err := tpl.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	if len(tpl.Steps) != 8 || tpl.Steps[2].FilesHash != hashA || tpl.StartCmd != "npm start" {
		t.Errorf("decoded %+v", tpl)
	}
	if err := (Template{FromImage: "ubuntu:22.04", Steps: slices.Repeat([]Step{{Type: TypeRun, Args: []string{"true"}}}, MaxSteps)}).Validate(); err != nil {
		t.Errorf("%d steps refused: %v", MaxSteps, err)
	}
}

func TestHashes(t *testing.T) {
	hashB := strings.Repeat("b", 64)
	tpl := Template{Steps: []Step{
		{Type: TypeCopy, Args: []string{"a", "/a"}, FilesHash: hashB},
		{Type: TypeRun, Args: []string{"true"}, FilesHash: hashA}, // not a COPY: not needed
		{Type: TypeCopy, Args: []string{"b", "/b"}, FilesHash: hashA},
		{Type: TypeCopy, Args: []string{"c", "/c"}, FilesHash: hashB},
	}}
	if got := tpl.Hashes(); !slices.Equal(got, []string{hashB, hashA}) {
		t.Errorf("Hashes() = %v", got)
	}
	if got := (Template{}).Hashes(); len(got) != 0 {
		t.Errorf("Hashes() of no steps = %v", got)
	}
}
