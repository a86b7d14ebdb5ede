package invoice

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// apiError is a failure the HTTP layer shows as an RFC 9457 problem.
type apiError struct {
	Status int
	Code   string
	Detail string
	Field  string // the request member or parameter at fault, if any
}

func (e *apiError) Error() string { return e.Code + ": " + e.Detail }

func newError(status int, code, detail string) *apiError {
	return &apiError{Status: status, Code: code, Detail: detail}
}

func fieldError(code, field, detail string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: code, Detail: detail, Field: field}
}

// problem is the RFC 9457 body, with the stable code and the field at fault.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	Field  string `json:"field,omitempty"`
}

// problemTypeBase prefixes every problem type URI; the code completes it.
const problemTypeBase = "urn:evmpay:problem:"

func writeProblem(w http.ResponseWriter, e *apiError) {
	body, _ := json.Marshal(problem{
		Type:   problemTypeBase + e.Code,
		Title:  http.StatusText(e.Status),
		Status: e.Status,
		Detail: e.Detail,
		Code:   e.Code,
		Field:  e.Field,
	})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	if e.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="evmpay"`)
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}
