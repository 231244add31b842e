package buildstore

import (
	"encoding/json"
	"net/http"
)

// writeError answers status with e2b's {"code","message"} error body,
// which the SDK reads its error message from.
func writeError(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{status, msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
