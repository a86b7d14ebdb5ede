package checkout_test

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice/checkout"
)

// The claim page is the checkout's sibling: the same security headers and
// assets' rules, in every language of the checkout.
func TestClaim_PageInEveryLanguageWithTheCheckoutsHeaders(t *testing.T) {
	t.Parallel()
	srv := newServer(t, checkout.Config{ChainName: "Testnet"})
	res, page := get(t, srv.URL+"/claim", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))
	require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
	require.Contains(t, string(page), "<title>Refund</title>")
	refs := assetRefs.FindAllStringSubmatch(string(page), -1)
	require.Len(t, refs, 4, "icon, script and the two style sheets")
	for _, r := range refs {
		res, body := get(t, srv.URL+"/"+r[1], nil)
		require.Equal(t, http.StatusOK, res.StatusCode, r[1])
		require.NotEmpty(t, body)
	}
	require.NotContains(t, string(page), "<script>", "no inline script")

	for lang, title := range map[string]string{"de": "Erstattung", "es": "Reembolso", "fr": "Remboursement", "pt": "Reembolso"} {
		res, page := get(t, srv.URL+"/claim", http.Header{"Accept-Language": {lang + ";q=0.9"}})
		require.Equal(t, lang, res.Header.Get("Content-Language"))
		require.Contains(t, string(page), "<title>"+title+"</title>", lang)
		require.True(t, strings.Contains(string(page), `lang="`+lang+`"`))
	}
	res, _ = get(t, srv.URL+"/claim/elsewhere", nil)
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

func TestClaimCatalogue_EveryLanguage_HasEveryClaimMessage(t *testing.T) {
	t.Parallel()
	read := func(name string) map[string]string {
		b, err := os.ReadFile(filepath.Join("claim", name))
		require.NoError(t, err)
		var m map[string]string
		require.NoError(t, json.Unmarshal(b, &m), name)
		return m
	}
	en := read("en.json")
	names, err := fs.Glob(os.DirFS("claim"), "*.json")
	require.NoError(t, err)
	checkoutLangs, err := fs.Glob(os.DirFS("messages"), "*.json")
	require.NoError(t, err)
	require.ElementsMatch(t, checkoutLangs, names, "the claim page speaks the checkout's languages")
	placeholders := regexp.MustCompile(`\{\w+\}`)
	for _, n := range names {
		m := read(n)
		for k, v := range en {
			require.Contains(t, m, k, "%s lacks %q", n, k)
			require.ElementsMatch(t, placeholders.FindAllString(v, -1), placeholders.FindAllString(m[k], -1), "%s: %q", n, k)
		}
		require.Len(t, m, len(en), n)
	}
	// Every key the script and the page use exists.
	js, err := os.ReadFile(filepath.Join("assets", "claim.js"))
	require.NoError(t, err)
	html, err := os.ReadFile("claim.html")
	require.NoError(t, err)
	checkoutEN := map[string]string{}
	b, err := os.ReadFile(filepath.Join("messages", "en.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &checkoutEN))
	used := regexp.MustCompile(`"((?:claim|wallet|network|label|explorer|language)[a-z_]*)"`)
	for _, src := range [][]byte{js, html} {
		for _, m := range used.FindAllStringSubmatch(string(src), -1) {
			_, inClaim := en[m[1]]
			_, inCheckout := checkoutEN[m[1]]
			if strings.HasPrefix(m[1], "claim_") || inCheckout {
				require.True(t, inClaim || inCheckout, "message %q", m[1])
			}
		}
	}
}
