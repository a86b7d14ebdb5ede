package webhook

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Stable problem codes of the deliveries API. Clients switch on them.
const (
	codeUnauthorized     = "unauthorized"
	codeNotFound         = "not_found"
	codeUnknownParameter = "unknown_parameter"
	codeInvalidParameter = "invalid_parameter"
	codeInvalidCursor    = "invalid_cursor"
	codeInvalidJSON      = "invalid_json"
	codeMissingField     = "missing_field"
	codeInvalidField     = "invalid_field"
	codeBodyTooLarge     = "body_too_large"
	codeDeliveryPending  = "delivery_pending"
	codeUnavailable      = "unavailable"
	codeInternal         = "internal"
)

// apiError is a failure shown as an RFC 9457 problem.
type apiError struct {
	status int
	code   string
	detail string
	field  string // the parameter or member at fault, if any
}

func newError(status int, code, detail string) *apiError {
	return &apiError{status: status, code: code, detail: detail}
}

func fieldError(code, field, detail string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, detail: detail, field: field}
}

type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	Field  string `json:"field,omitempty"`
}

func writeProblem(w http.ResponseWriter, e *apiError) {
	body, _ := json.Marshal(problem{
		Type:   "urn:evmpay:problem:" + e.code,
		Title:  http.StatusText(e.status),
		Status: e.status,
		Detail: e.detail,
		Code:   e.code,
		Field:  e.field,
	})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	if e.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="evmpay"`)
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}
