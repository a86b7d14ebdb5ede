package httpapi

import (
	"net/http"
	"slices"
)

// Router is where a package registers its routes (Go 1.22 patterns such as
// "GET /v1/things/{id}"): an *http.ServeMux, or a Mux, which also remembers
// them.
type Router interface {
	Handle(pattern string, handler http.Handler)
}

var (
	_ Router = (*http.ServeMux)(nil)
	_ Router = (*Mux)(nil)
)

// Mux is an http.ServeMux that remembers the patterns registered on it, so
// that a host can check them against its OpenAPI document, and that answers
// unknown paths and wrong methods with problems (Problems).
type Mux struct {
	mux      *http.ServeMux
	patterns []string
	serve    http.Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux {
	m := &Mux{mux: http.NewServeMux()}
	m.serve = Problems(m.mux)
	return m
}

// Handle registers handler for pattern, like http.ServeMux.Handle (it
// panics on a conflicting pattern).
func (m *Mux) Handle(pattern string, handler http.Handler) {
	m.mux.Handle(pattern, handler)
	m.patterns = append(m.patterns, pattern)
}

// HandleFunc registers a handler function for pattern.
func (m *Mux) HandleFunc(pattern string, fn func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(fn))
}

// Patterns returns the registered patterns, sorted.
func (m *Mux) Patterns() []string { return slices.Sorted(slices.Values(m.patterns)) }

// ServeHTTP dispatches the request; mux's own 404 and 405 are problems.
func (m *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.serve.ServeHTTP(w, r) }
