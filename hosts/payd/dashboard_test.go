package main

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
