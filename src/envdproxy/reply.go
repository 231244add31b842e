package envdproxy

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

const (
	// msgUnavailable is the one answer for an unknown sandbox, a node
	// that is down, a guest port nothing listens on: no reply may tell a
	// caller which ids exist or where they live.
	msgUnavailable = "sandbox unavailable"
	// msgPaused is the proxy's answer for a passive relay into a
	// hibernated or archived sandbox, which the node refuses.
	msgPaused = "sandbox is paused"
)

// reply writes the proxy's own answers in envd's error shape,
// {"code": status, "message": "..."}, which the SDK reads the message of.
// Messages are fixed strings: never a node address or an error's text.
func reply(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{status, msg})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// isPausedMessage tells a node's refusal of a relay because the sandbox
// is paused (hibernated or archived) from its other refusals, by the
// words sandboxd's message uses.
func isPausedMessage(err error) bool {
	var apiErr *sandboxd.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	msg := strings.ToLower(apiErr.Message)
	return strings.Contains(msg, "paused") || strings.Contains(msg, "hibernat") || strings.Contains(msg, "archiv")
}
