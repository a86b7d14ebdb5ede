package checkout_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice/checkout"
)

func newServer(t *testing.T, cfg checkout.Config) *httptest.Server {
	t.Helper()
	h, err := checkout.New(cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	h.Routes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, b
}

// assetRefs lists the same-origin assets the page loads.
var assetRefs = regexp.MustCompile(`(?:src|href)="(checkout/assets/[^"]+)"`)

func TestCheckout_EveryResponse_CarriesTheSecurityHeaders(t *testing.T) {
	t.Parallel()
	srv := newServer(t, checkout.Config{})
	res, page := get(t, srv.URL+"/checkout", nil)
	refs := assetRefs.FindAllStringSubmatch(string(page), -1)
	require.Len(t, refs, 3, "the page loads its icon, its script and its style")
	urls := []string{"/checkout", "/checkout?lang=de", "/checkout/assets/nope.js", "/checkout/elsewhere"}
	for _, r := range refs {
		urls = append(urls, "/"+r[1])
	}
	for _, u := range urls {
		res, _ = get(t, srv.URL+u, nil)
		h := res.Header
		csp := h.Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'self'", u)
		require.Contains(t, csp, "script-src 'self';", u)
		require.NotContains(t, csp, "unsafe-inline", u)
		require.NotContains(t, csp, "unsafe-eval", u)
		require.NotContains(t, csp, "http", u, "no third-party origin")
		require.Contains(t, csp, "frame-ancestors 'none'", u)
		require.Equal(t, "no-referrer", h.Get("Referrer-Policy"), u)
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), u)
	}
	require.NotRegexp(t, `<script>|<script [^>]*>[^<]|<style|\son[a-z]+=`, string(page), "no inline script, style or handler")
}

func TestCheckout_FrameAncestors_Configurable(t *testing.T) {
	t.Parallel()
	srv := newServer(t, checkout.Config{FrameAncestors: []string{"https://shop.example", "https://*.shop.example"}})
	res, _ := get(t, srv.URL+"/checkout", nil)
	require.True(t, strings.HasSuffix(res.Header.Get("Content-Security-Policy"),
		"frame-ancestors https://shop.example https://*.shop.example"), res.Header.Get("Content-Security-Policy"))
	require.Empty(t, res.Header.Get("X-Frame-Options"), "framing by the named shops is allowed")

	_, err := checkout.New(checkout.Config{FrameAncestors: []string{"https://a; script-src *"}})
	require.Error(t, err, "a source cannot smuggle in another directive")
}

// TestCheckout_PageAndAssets_UnderFiftyKB measures what a payer's browser
// loads from the page itself (page, icon, script, style), in the language
// with the longest messages, for a deployment with two more networks.
func TestCheckout_PageAndAssets_UnderFiftyKB(t *testing.T) {
	t.Parallel()
	srv := newServer(t, checkout.Config{ExplorerTxURL: "https://explorer.example/tx/{tx}",
		ExplorerAddressURL: "https://explorer.example/address/{address}",
		Networks: []checkout.Network{evmd, {ChainID: 8453, Name: "Base", RPCURL: "https://mainnet.base.org",
			ExplorerTxURL: "https://basescan.org/tx/{tx}", ExplorerAddressURL: "https://basescan.org/address/{address}"}}})
	h, err := checkout.New(checkout.Config{})
	require.NoError(t, err)
	largest := 0
	for _, lang := range h.Languages() {
		_, page := get(t, srv.URL+"/checkout?lang="+lang, nil)
		total := len(page)
		refs := assetRefs.FindAllStringSubmatch(string(page), -1)
		require.Len(t, refs, 3)
		for _, r := range refs {
			res, b := get(t, srv.URL+"/"+r[1], nil)
			require.Equal(t, http.StatusOK, res.StatusCode, r[1])
			total += len(b)
		}
		t.Logf("%s: page plus assets %d bytes", lang, total)
		largest = max(largest, total)
	}
	require.Less(t, largest, 50*1024, "page plus assets under 50 KB in every language")
}

func TestCheckout_Icon_DeclaredAndServed(t *testing.T) {
	t.Parallel()
	srv := newServer(t, checkout.Config{})
	_, page := get(t, srv.URL+"/checkout", nil)
	require.Contains(t, string(page), `<link rel="icon" href="checkout/assets/icon.svg" type="image/svg+xml">`,
		"declared, so that browsers do not ask for /favicon.ico")
	res, b := get(t, srv.URL+"/checkout/assets/icon.svg", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "image/svg+xml", res.Header.Get("Content-Type"))
	require.NotContains(t, strings.ToLower(string(b)), "<script")
}

func TestCheckout_LanguageSwitcher_EveryLanguageInItsOwnName(t *testing.T) {
	t.Parallel()
	srv := newServer(t, checkout.Config{})
	_, page := get(t, srv.URL+"/checkout?lang=pt", nil)
	for _, l := range []string{
		`<a href="?lang=de" hreflang="de" lang="de">Deutsch</a>`,
		`<a href="?lang=en" hreflang="en" lang="en">English</a>`,
		`<a href="?lang=es" hreflang="es" lang="es">Español</a>`,
		`<a href="?lang=fr" hreflang="fr" lang="fr">Français</a>`,
		`<a href="?lang=pt" hreflang="pt" lang="pt" aria-current="true">Português</a>`,
	} {
		require.Contains(t, string(page), l)
	}
	require.Contains(t, string(page), `<nav class="langs no-print" aria-label="Idioma">`)
}

func TestCheckout_ExplorerTemplates_Checked(t *testing.T) {
	t.Parallel()
	for _, c := range []checkout.Config{
		{ExplorerTxURL: "https://explorer.example/tx/"},
		{ExplorerTxURL: "javascript:alert('{tx}')"},
		{ExplorerTxURL: "/tx/{tx}"},
		{ExplorerTxURL: "https://explorer.example/tx/{tx}/{tx}"},
		{ExplorerAddressURL: "https://explorer.example/address/{tx}"},
	} {
		_, err := checkout.New(c)
		require.Error(t, err, "%+v", c)
	}
	srv := newServer(t, checkout.Config{ExplorerTxURL: "https://explorer.example/tx/{tx}", ExplorerAddressURL: "https://explorer.example/address/{address}"})
	_, page := get(t, srv.URL+"/checkout", nil)
	require.Contains(t, string(page), `&#34;explorer_tx&#34;:&#34;https://explorer.example/tx/{tx}&#34;`, "handed to the script")
}

func TestCheckout_Language_FromQueryThenAcceptLanguage(t *testing.T) {
	t.Parallel()
	srv := newServer(t, checkout.Config{})
	for _, c := range []struct {
		url, accept, want string
	}{
		{"/checkout", "", "en"},
		{"/checkout", "de-CH, fr;q=0.8", "de"},
		{"/checkout", "fr;q=0.9, de;q=0.5, en;q=0.1", "fr"},
		{"/checkout", "xx;q=0.9, de;q=0.5, en;q=0.1", "de"},
		{"/checkout", "es-MX", "es"},
		{"/checkout", "pt-BR, en;q=0.5", "pt"},
		{"/checkout", "de;q=0, en", "en"},
		{"/checkout?lang=de", "en", "de"},
		{"/checkout?lang=xx", "de", "de"},
		{"/checkout?lang=EN", "de", "en"},
	} {
		res, body := get(t, srv.URL+c.url, http.Header{"Accept-Language": {c.accept}})
		require.Equal(t, c.want, res.Header.Get("Content-Language"), "%s %q", c.url, c.accept)
		require.Contains(t, string(body), `<html lang="`+c.want+`">`)
		require.Equal(t, "Accept-Language", res.Header.Get("Vary"))
	}
	_, body := get(t, srv.URL+"/checkout?lang=de", nil)
	require.Contains(t, string(body), "Zahlungsanforderung")
	for lang, heading := range map[string]string{"es": "Solicitud de pago", "fr": "Demande de paiement", "pt": "Pedido de pagamento"} {
		_, body := get(t, srv.URL+"/checkout?lang="+lang, nil)
		require.Contains(t, string(body), heading, lang)
	}
}

// TestCatalogue_EveryLanguage_HasEveryMessage keeps the translations
// complete: a missing message would show in English.
func TestCatalogue_EveryLanguage_HasEveryMessage(t *testing.T) {
	t.Parallel()
	read := func(name string) map[string]string {
		b, err := os.ReadFile(filepath.Join("messages", name))
		require.NoError(t, err)
		var m map[string]string
		require.NoError(t, json.Unmarshal(b, &m), name)
		return m
	}
	en := read("en.json")
	names, err := fs.Glob(os.DirFS("messages"), "*.json")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(names), 5, "English, German, Spanish, French and Portuguese")
	placeholders := regexp.MustCompile(`\{\w+\}`)
	for _, n := range names {
		m := read(n)
		for k, v := range en {
			require.Contains(t, m, k, "%s lacks %q", n, k)
			require.ElementsMatch(t, placeholders.FindAllString(v, -1), placeholders.FindAllString(m[k], -1),
				"%s: %q has other placeholders than English", n, k)
		}
		for k := range m {
			require.Contains(t, en, k, "%s has %q, which English lacks", n, k)
		}
	}
	h, err := checkout.New(checkout.Config{})
	require.NoError(t, err)
	require.Len(t, h.Languages(), len(names), "every file is a language")
}

func TestCheckout_Method_OnlyGET(t *testing.T) {
	t.Parallel()
	srv := newServer(t, checkout.Config{})
	res, err := http.Post(srv.URL+"/checkout", "text/plain", nil)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
	require.Equal(t, "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
		res.Header.Get("Content-Security-Policy"))
}

// The checkout answers its failures as problem JSON with a stable code, as
// every evmpay API does (the one error table), and its assets through
// http.ServeContent: an ETag that answers If-None-Match with 304.
func TestCheckout_Failures_ProblemJSON_AssetsConditional(t *testing.T) {
	t.Parallel()
	srv := newServer(t, checkout.Config{})
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodPost, "/checkout", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodDelete, "/checkout/assets/checkout.js", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodGet, "/checkout/assets/nope.js", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/checkout/elsewhere", http.StatusNotFound, "not_found"},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		require.NoError(t, err)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		require.Equal(t, tc.status, res.StatusCode, "%s %s", tc.method, tc.path)
		require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"), "%s %s", tc.method, tc.path)
		var p struct{ Code string }
		require.NoError(t, json.Unmarshal(body, &p))
		require.Equal(t, tc.code, p.Code)
		require.NotEmpty(t, res.Header.Get("Content-Security-Policy"), "the page's headers on its problems too")
	}
	res, _ := get(t, srv.URL+"/checkout/assets/checkout.js", nil)
	etag := res.Header.Get("ETag")
	require.NotEmpty(t, etag)
	res, body := get(t, srv.URL+"/checkout/assets/checkout.js", http.Header{"If-None-Match": {etag}})
	require.Equal(t, http.StatusNotModified, res.StatusCode)
	require.Empty(t, body)
	res, _ = get(t, srv.URL+"/checkout/assets/checkout.js", http.Header{"If-None-Match": {`"other"`}})
	require.Equal(t, http.StatusOK, res.StatusCode)
}
