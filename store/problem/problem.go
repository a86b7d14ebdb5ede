// Package problem writes RFC 9457 problem details: the error body of every
// evmpay HTTP API (invoice, webhook deliveries, read API, sweep admin, the
// payd host), so that all of them answer failures in one shape:
//
//	{"type": "urn:evmpay:problem:not_found", "title": "Not Found",
//	 "status": 404, "detail": "…", "code": "not_found", "field": "…"}
//
// code is the stable, machine-readable part clients branch on; detail is for
// people and never carries SQL, stack traces or secrets; field names the
// request member or parameter at fault, when there is one. It sits beside
// store because every concern package builds on store and none may import a
// sibling.
//
// The codes and their statuses are one table (codes.go): a handler builds a
// problem from a code (Of, OfField, Reply), never from a status it picks,
// and FromError maps the errors every API shares. The OpenAPI documents'
// Problem schema is generated from the table (httpapi.WithProblem).
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// TypePrefix starts every problem type URI; the code completes it.
const TypePrefix = "urn:evmpay:problem:"

// Problem is a failure to show a client. It is an error, so handlers can
// return it up their call chain.
type Problem struct {
	Status int    // HTTP status
	Code   string // stable code, e.g. "invalid_amount"
	Detail string // what went wrong, for people
	Field  string // the request member or parameter at fault, if any
}

// Error returns "code: detail".
func (p *Problem) Error() string { return p.Code + ": " + p.Detail }

// body is the JSON document.
type body struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	Field  string `json:"field,omitempty"`
}

// Write answers with p as application/problem+json. A 401 also carries a
// Bearer challenge. Responses are not cacheable.
func Write(w http.ResponseWriter, p *Problem) {
	b, _ := json.Marshal(body{
		Type:   TypePrefix + p.Code,
		Title:  http.StatusText(p.Status),
		Status: p.Status,
		Detail: p.Detail,
		Code:   p.Code,
		Field:  p.Field,
	})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="evmpay"`)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}
