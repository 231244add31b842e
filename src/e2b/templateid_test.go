package e2b_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
)

// badTemplateIDs are template ids no create may pass to a node.
var badTemplateIDs = map[string]string{
	"100 KB":            strings.Repeat("a", 100<<10),
	"256 bytes":         strings.Repeat("a", 256),
	"path traversal":    "../../etc/passwd",
	"absolute path":     "/etc/passwd",
	"dot-dot inside":    "ghcr.io/x/../y",
	"empty element":     "ghcr.io//y",
	"trailing slash":    "base/",
	"NUL":               "ba\x00se",
	"newline":           "base\nforged",
	"carriage return":   "base\r",
	"terminal escape":   "\x1b[2Kbase",
	"space":             "my base",
	"leading dash":      "-base",
	"leading dot":       ".base",
	"non-ASCII":         "bäse",
	"bidi override":     "base\u202e",
	"shell metachar":    "base;rm",
	"query-like":        "base?x=1",
	"percent-encoded":   "base%0a",
	"backslash":         `base\x`,
	"quote":             `base"`,
	"only whitespace":   " ",
	"wildcard":          "*",
	"invalid UTF-8":     "base\xff",
	"tab":               "ba\tse",
	"DEL":               "base\x7f",
	"C1 control (CSI)":  "base\u009b",
	"line separator":    "base\u2028",
	"comma":             "a,b",
	"equals":            "a=b",
	"hash":              "base#x",
	"angle bracket":     "<base>",
	"braces":            "{base}",
	"template variable": "${HOME}",
}

func TestCreateRefusesBadTemplateIDs(t *testing.T) {
	e := newEnv(t, envOptions{})
	for name, id := range badTemplateIDs {
		body, err := json.Marshal(map[string]any{"templateID": id, "allow_internet_access": false})
		if err != nil {
			t.Fatal(err)
		}
		r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: create = %d, want 400", name, r.status)
			continue
		}
		msg := r.errorMessage(t)
		if len(id) > 3 && strings.Contains(msg, id) || len(r.body) > 1024 {
			t.Errorf("%s: the 400 echoes the id (%d bytes)", name, len(r.body))
		}
	}
	if n := e.live(t); n != 0 {
		t.Errorf("refused template ids spent %d claims", n)
	}
	// Nothing reached a node, so no list echoes an id.
	if r := e.do(t, http.MethodGet, "/v2/sandboxes", keyA, nil); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("list after refused creates = %d %.200s", r.status, r.body)
	}
}

func TestListRefusesABadTemplateFilter(t *testing.T) {
	e := newEnv(t, envOptions{})
	for name, id := range badTemplateIDs {
		if strings.TrimSpace(id) == "" {
			continue // an empty filter is no filter
		}
		r := e.do(t, http.MethodGet, "/v2/sandboxes?template="+url.QueryEscape(id), keyA, nil)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: list = %d, want 400", name, r.status)
			continue
		}
		r.errorMessage(t)
	}
}

func TestGoodTemplateIDsPassValidation(t *testing.T) {
	e := newEnv(t, envOptions{})
	// Each is a well-formed id no pool serves: past validation, the
	// fleet answers (the simulator cold-boots an unknown image), never a
	// 400 for its spelling.
	for _, id := range []string{
		"base", "rki5dems9wqfm4r03t7g", "my_template-2", "team/alias:v1.2",
		"ghcr.io/example/e2b-rt:24.04", "registry.local:5000/a/b@sha256:" + strings.Repeat("0", 64),
	} {
		body, _ := json.Marshal(map[string]any{"templateID": id, "allow_internet_access": false})
		r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, body)
		if r.status == http.StatusBadRequest && strings.Contains(r.errorMessage(t), "templateID") {
			t.Errorf("%q refused as a template id: %s", id, r.body)
		}
	}
}

func TestAliasFileEntriesAreValidated(t *testing.T) {
	for name, data := range map[string]string{
		"alias traversal": "../x img:1\n",
		"image traversal": "base ../../etc/passwd\n",
		"long alias":      strings.Repeat("a", 256) + " img:1\n",
		"control in size": "base img:1 sm\x1ball\n",
		"bad alias char":  "ba$e img:1\n",
	} {
		_, err := e2b.ParseAliases([]byte("ok img:1\n" + data))
		if err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: err = %v, want one naming line 2", name, err)
		}
	}
}
