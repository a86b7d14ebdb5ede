package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// requireDashboardSignInLink checks payd dev's banner: the dashboard's URL
// and a one-time sign-in link that signs the demo owner in, once.
func requireDashboardSignInLink(t *testing.T, banner string) {
	t.Helper()
	m := regexp.MustCompile(`one-time sign-in link: (http://localhost:\d+/dashboard/link\?kind=sign_in#(\S+))`).FindStringSubmatch(banner)
	require.NotNil(t, m, "the banner prints the dashboard's sign-in link:\n%s", banner)
	require.Contains(t, banner, "Merchant dashboard  http://localhost:")
	u, err := url.Parse(m[1])
	require.NoError(t, err)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	use := func() *http.Response {
		res, err := client.PostForm(u.Scheme+"://"+u.Host+"/dashboard/link", url.Values{"kind": {"sign_in"}, "token": {m[2]}})
		require.NoError(t, err)
		res.Body.Close()
		return res
	}
	res := use()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	var session *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "evmpay_dashboard" {
			session = c
		}
	}
	require.NotNil(t, session, "signed in")
	req, err := http.NewRequest("GET", u.Scheme+"://"+u.Host+"/dashboard/", nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
	res, err = client.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.True(t, strings.Contains(string(body), "demo@example.com"), "the overview of the demo owner")
	require.Equal(t, http.StatusNotFound, use().StatusCode, "the link works once")
}

// payd dashboard-user gives a merchant made by `payd merchants create` its
// first owner and prints a one-time sign-in link on PUBLIC_BASE_URL.
func TestDashboardUser_GivesAMerchantAnOwnerAndALink(t *testing.T) {
	dbURL := pgtest.URL(t)
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(v), 0o600))
		return p
	}
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("PUBLIC_BASE_URL", "https://pay.example.com/")
	t.Setenv("PAY_SECRET_KEY_FILE", write("sk", "0123456789abcdef0123456789abcdef-test"))
	t.Setenv("PAY_MNEMONIC_FILE", write("mn", devMnemonic))
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"merchants", "create", "--settlement-address",
		"0x00000000000000000000000000000000000000aa", "--name", "shop"}, &out))
	out.Reset()
	err := run(context.Background(), []string{"dashboard-user", "--merchant", "1"}, &out)
	var u usageError
	require.ErrorAs(t, err, &u, "the email is required")
	require.NoError(t, run(context.Background(), []string{"dashboard-user", "--merchant", "1", "--email", "Boss@Shop.example"}, &out))
	require.Contains(t, out.String(), "dashboard user boss@shop.example (owner) of merchant 1")
	require.Regexp(t, `one-time sign-in link \(valid 72 h, works once\): https://pay\.example\.com/dashboard/link\?kind=sign_in#[A-Za-z0-9_-]{43}\n`, out.String())
}
