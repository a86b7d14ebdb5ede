package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/evmpay/evmpay/store/problem"
)

// WriteJSON answers status with v encoded as JSON, the way every evmpay
// API answers: Content-Type application/json, Content-Length,
// X-Content-Type-Options nosniff (a browser never takes the body for
// another type) and Cache-Control no-store unless the handler set its own.
// A value that cannot be encoded is a 500 problem.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		problem.Reply(w, problem.CodeInternal, "the response could not be encoded")
		return
	}
	WriteJSONBody(w, status, body)
}

// WriteJSONBody is WriteJSON for a body already encoded (a replayed
// response, an embedded document).
func WriteJSONBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
