// Package httpapi holds the HTTP edge rules every evmpay API shares, so that
// the invoice API, the webhook deliveries API, the read API, the sweep admin
// endpoint and the payd host behave the same at their edges:
//
//   - BearerToken: one parser of "Authorization: Bearer <token>";
//   - OperatorAuthorized: the constant-time operator-token check;
//   - RequireJSON: 415 for a request body that is not JSON;
//   - Query: 400 for a query string that does not parse;
//   - Problems: 404 and 405 (with Allow) of a ServeMux as problem JSON.
//
// Failures are store/problem documents. Like problem, it sits beside store
// because concern packages may not import each other.
package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/evmpay/evmpay/store/problem"
)

// The problem codes of the edge rules (store/problem's table).
const (
	CodeUnsupportedMediaType = problem.CodeUnsupportedMedia
	CodeInvalidQuery         = problem.CodeInvalidQuery
	CodeNotFound             = problem.CodeNotFound
	CodeMethodNotAllowed     = problem.CodeMethodNotAllowed
)

// BearerToken returns the token of the request's "Authorization: Bearer
// <token>" header (RFC 7235 §2.1, RFC 6750 §2.1), the one parser of every
// protected evmpay endpoint:
//
//   - exactly one Authorization header (two are ambiguous: refused);
//   - the scheme "Bearer" in any case ("bearer", "BEARER");
//   - one or more spaces between scheme and token (RFC 7235: 1*SP); the
//     whitespace around the whole value is not part of it (HTTP strips it);
//   - the token is RFC 6750 b64token (token68): letters, digits and
//   - . _ ~ + /, then optional trailing '=' signs. Anything else — a tab,
//     a space or comma inside, a second credential — is not a credential.
//
// ok is false when there is no well-formed bearer credential; callers
// answer 401 without saying which rule failed.
func BearerToken(r *http.Request) (token string, ok bool) {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return "", false
	}
	v := strings.Trim(vals[0], " \t")
	scheme, rest, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(rest, " ")
	if !isToken68(token) {
		return "", false
	}
	return token, true
}

// isToken68 reports whether s is 1*( ALPHA / DIGIT / "-" / "." / "_" / "~"
// / "+" / "/" ) *"=".
func isToken68(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// OperatorAuthorized reports whether the request's bearer token is want,
// compared in constant time. An empty want authorizes nobody.
func OperatorAuthorized(r *http.Request, want string) bool {
	tok, ok := BearerToken(r)
	if !ok || want == "" {
		return false
	}
	got, exp := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(got[:], exp[:]) == 1
}

// IsJSON reports whether a Content-Type value names JSON:
// application/json or any application/*+json type, parameters (charset)
// allowed, in any case.
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// RequireJSON checks the Content-Type of a request to an endpoint that
// reads a JSON body. A Content-Type that is present must be JSON (IsJSON);
// a request without one may carry no body (Content-Length 0 — an endpoint
// whose body is optional), and one that carries a body without saying what
// it is is refused too. Either way the answer is a 415 problem
// (unsupported_media_type); the caller writes it with WriteUnsupported, which
// adds the Accept-Post or Accept-Patch header naming application/json.
func RequireJSON(r *http.Request) *problem.Problem {
	ct := r.Header.Get("Content-Type")
	switch {
	case ct == "" && r.ContentLength == 0:
		return nil
	case ct == "":
		return problem.Of(CodeUnsupportedMediaType,
			"the request body must be sent as Content-Type: application/json")
	case !IsJSON(ct):
		return problem.Of(CodeUnsupportedMediaType,
			"the request body must be application/json, not "+strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0])))
	}
	return nil
}

// CheckJSON is RequireJSON that also answers: it writes the 415 (with
// Accept-Post or Accept-Patch: application/json) and returns false when the
// request is refused.
func CheckJSON(w http.ResponseWriter, r *http.Request) bool {
	p := RequireJSON(r)
	if p == nil {
		return true
	}
	switch r.Method {
	case http.MethodPatch:
		w.Header().Set("Accept-Patch", "application/json")
	default:
		w.Header().Set("Accept-Post", "application/json")
	}
	problem.Write(w, p)
	return false
}

// Query parses the request's query string strictly. Go's URL parser drops a
// pair it cannot parse (a ';' separator, a bad %-escape) and keeps the rest,
// so that "?status=EXPIRED;x" would silently list everything; Query refuses
// such a query with a 400 problem (invalid_query) instead.
func Query(r *http.Request) (url.Values, *problem.Problem) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		detail := "the query string cannot be parsed: separate parameters with '&' (not ';') and %-encode reserved characters"
		return nil, problem.Of(CodeInvalidQuery, detail)
	}
	return q, nil
}

// Problems serves mux, answering what mux itself would answer as plain text
// — 404 for an unknown path, 405 for a method no pattern of the path takes
// (with the Allow header mux computes) — as problem JSON. What a registered
// handler answers (its own 404s included) passes through untouched, and so
// do mux's redirects.
func Problems(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(&muxErrors{ResponseWriter: w, r: r}, r)
	})
}

// muxErrors turns ServeMux's own plain-text 404 and 405 into problems.
type muxErrors struct {
	http.ResponseWriter
	r       *http.Request
	replied bool
}

func (m *muxErrors) WriteHeader(status int) {
	switch status {
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		m.replied = true
		h := m.ResponseWriter.Header()
		if status == http.StatusNotFound {
			problem.Write(m.ResponseWriter, problem.Of(CodeNotFound, "no such resource: "+m.r.URL.Path))
			return
		}
		problem.Write(m.ResponseWriter, problem.Of(CodeMethodNotAllowed,
			m.r.Method+" is not allowed here; allowed: "+h.Get("Allow")))
	default:
		m.ResponseWriter.WriteHeader(status)
	}
}

func (m *muxErrors) Write(b []byte) (int, error) {
	if m.replied {
		return len(b), nil // mux's plain-text body: the problem replaced it
	}
	return m.ResponseWriter.Write(b)
}
