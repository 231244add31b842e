package e2b

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
)

// FuzzCreateBody feeds arbitrary bodies to POST /sandboxes' decoding and
// validation: they never panic, and a body the decoder refuses is answered
// 400 with e2b's error shape, never a 5xx.
func FuzzCreateBody(f *testing.F) {
	for _, s := range []string{
		`{"templateID":"base","timeout":60}`,
		`{"templateID":"base","metadata":{"a":"b"},"envVars":{"K":"V"},"autoPause":false}`,
		`{"templateID":"../../etc/passwd"}`, `{"templateID":1}`, `{}`, `[]`, `{"x":1}`, `{"templateID":"a"} {}`, "",
		`{"templateID":"base","network":{"allowOut":["1.1.1.1"]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/sandboxes", bytes.NewReader(body))
		var req wire.NewSandboxRequest
		if !decodeBody(w, r, &req, false) {
			if w.Code != http.StatusBadRequest || !bytes.Contains(w.Body.Bytes(), []byte(`"message"`)) {
				t.Fatalf("a refused body got %d %q", w.Code, w.Body.String())
			}
			return
		}
		_ = validateCreate(&req)
	})
}

// FuzzListQuery covers the list's outside inputs: the metadata query and
// the pagination cursor (nextToken). A cursor that parses is printed back
// to the same cursor.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{"user=alice&app=prod", "a%3Db=c", "%zz", "", "MTcwMDAwMDAwMDAwMDAwMDAwMCxzYl8x", "!!", "LA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseMetadataQuery(s)
		c, err := parseCursor(s)
		if err != nil {
			return
		}
		again, err := parseCursor(c.String())
		if err != nil || !again.at.Equal(c.at) || again.id != c.id {
			t.Fatalf("cursor %q parsed to %+v, whose string %q parses to %+v, %v", s, c, c.String(), again, err)
		}
	})
}
