package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store/httpapi"
)

func TestBearerToken_OneRuleForEveryHeaderShape(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header []string
		token  string
		ok     bool
	}{
		{[]string{"Bearer abc"}, "abc", true},
		{[]string{"bearer abc"}, "abc", true},
		{[]string{"BEARER abc"}, "abc", true},
		{[]string{"bEaReR abc"}, "abc", true},
		{[]string{"Bearer  abc"}, "abc", true},    // 1*SP
		{[]string{"Bearer abc=="}, "abc==", true}, // token68 padding
		{[]string{"Bearer a-b.c_d~e+f/g"}, "a-b.c_d~e+f/g", true},
		{[]string{" Bearer abc "}, "abc", true}, // OWS around the field value
		{nil, "", false},
		{[]string{""}, "", false},
		{[]string{"Bearer"}, "", false},
		{[]string{"Bearer "}, "", false},
		{[]string{"Bearerabc"}, "", false},
		{[]string{"Basic YWJjOmRlZg=="}, "", false},
		{[]string{"Bearer\tabc"}, "", false},
		{[]string{"Bearer abc def"}, "", false},
		{[]string{"Bearer abc,def"}, "", false},
		{[]string{"Bearer =abc"}, "", false},
		{[]string{"Bearer ab=c"}, "", false},
		{[]string{"Bearer abc", "Bearer abc"}, "", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		for _, h := range tc.header {
			r.Header.Add("Authorization", h)
		}
		tok, ok := httpapi.BearerToken(r)
		require.Equal(t, tc.ok, ok, "%q", tc.header)
		require.Equal(t, tc.token, tok, "%q", tc.header)
	}
}

func TestOperatorAuthorized_EmptyWantRefusesEveryone(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "bearer op")
	require.True(t, httpapi.OperatorAuthorized(r, "op"))
	require.False(t, httpapi.OperatorAuthorized(r, "other"))
	require.False(t, httpapi.OperatorAuthorized(r, ""))
}

func TestRequireJSON_NonJSONBody_415(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]int{
		"application/json":                  0,
		"application/json; charset=utf-8":   0,
		"Application/JSON;charset=UTF-8":    0,
		"application/merge-patch+json":      0,
		"text/plain":                        415,
		"text/plain; charset=utf-8":         415,
		"application/x-www-form-urlencoded": 415,
		"multipart/form-data; boundary=x":   415,
		"application/jsonx":                 415,
		"json":                              415,
		"":                                  415, // a body that does not say what it is
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(`{}`))
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		rec := httptest.NewRecorder()
		ok := httpapi.CheckJSON(rec, r)
		if want == 0 {
			require.True(t, ok, ct)
			continue
		}
		require.False(t, ok, ct)
		requireProblem(t, rec, 415, "unsupported_media_type")
		require.Equal(t, "application/json", rec.Header().Get("Accept-Post"))
	}
	// No body and no Content-Type: nothing to refuse (optional bodies).
	r := httptest.NewRequest("POST", "/", nil)
	require.Nil(t, httpapi.RequireJSON(r))
	// PATCH names what it accepts in Accept-Patch.
	r = httptest.NewRequest("PATCH", "/", strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "text/plain")
	rec := httptest.NewRecorder()
	require.False(t, httpapi.CheckJSON(rec, r))
	require.Equal(t, "application/json", rec.Header().Get("Accept-Patch"))
}

func TestQuery_UnparsablePair_400(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"status=EXPIRED;x", "limit=1;x", "a=%zz", "a=1&b=%"} {
		_, p := httpapi.Query(httptest.NewRequest("GET", "/x?"+raw, nil))
		require.NotNil(t, p, raw)
		require.Equal(t, 400, p.Status)
		require.Equal(t, "invalid_query", p.Code)
	}
	q, p := httpapi.Query(httptest.NewRequest("GET", "/x?a=1&b=2&a=3", nil))
	require.Nil(t, p)
	require.Equal(t, []string{"1", "3"}, q["a"])
}

func TestProblems_MuxNotFoundAndMethodNotAllowed_AreProblems(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "handler's own", http.StatusNotFound)
	})
	mux.HandleFunc("POST /things/{id}", func(w http.ResponseWriter, r *http.Request) {})
	h := httpapi.Problems(mux)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/nope", nil))
	requireProblem(t, rec, 404, "not_found")

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("DELETE", "/things/1", nil))
	requireProblem(t, rec, 405, "method_not_allowed")
	require.Equal(t, "GET, HEAD, POST", rec.Header().Get("Allow"))

	// A registered handler's answer passes through.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/things/1", nil))
	require.Equal(t, 404, rec.Code)
	require.Equal(t, "handler's own\n", rec.Body.String())
}

func requireProblem(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	var p map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p), rec.Body.String())
	require.Equal(t, code, p["code"])
	require.EqualValues(t, status, p["status"])
}

func TestClientAddr_PeerOrForwardedBehindTrustedProxies(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	req := func(remote string, xff ...string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		for _, v := range xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		return r
	}
	for _, tc := range []struct {
		r    *http.Request
		want string
	}{
		{req("198.51.100.7:1234"), "198.51.100.7"},
		{req("198.51.100.7:1234", "203.0.113.1"), "198.51.100.7"},             // not from a trusted proxy: the header is ignored
		{req("10.1.2.3:80", "203.0.113.1"), "203.0.113.1"},                    // the proxy's client
		{req("10.1.2.3:80", "6.6.6.6, 203.0.113.1, 10.9.9.9"), "203.0.113.1"}, // rightmost untrusted; the spoofed left entry is not believed
		{req("10.1.2.3:80", "6.6.6.6", "203.0.113.1"), "203.0.113.1"},         // several headers are one list
		{req("10.1.2.3:80", "garbage, 203.0.113.1"), "203.0.113.1"},           // stops at the last good entry
		{req("10.1.2.3:80", "203.0.113.1, garbage"), "10.1.2.3"},              // nothing believable after the proxy
		{req("[2001:db8:1:2::7]:1"), "2001:db8:1:2::"},                        // IPv6 by /64
		{req("[::ffff:198.51.100.7]:1"), "198.51.100.7"},                      // mapped IPv4
		{req("10.1.2.3:80", "[2001:db8:1:2::9]:443"), "2001:db8:1:2::"},       // address:port entries
	} {
		require.Equal(t, tc.want, httpapi.ClientAddr(tc.r, trusted, 64).String(), "%s %v", tc.r.RemoteAddr, tc.r.Header.Values("X-Forwarded-For"))
	}
	require.False(t, httpapi.ClientAddr(req("not an address"), nil, 64).IsValid())
}
