package invoice_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAuth_TwoAuthorizationHeaders_401OnEveryProtectedRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	inv := e.mustCreate(m.APIKey, "k", `{"amount_wei":"5"}`)
	for _, c := range []struct{ method, path, token string }{
		{"GET", "/v1/merchant", m.APIKey},
		{"GET", "/v1/invoices", m.APIKey},
		{"POST", "/v1/admin/merchants", adminToken},
		{"POST", fmt.Sprintf("/v1/admin/merchants/%d/api-key/rotate", m.ID), adminToken},
		{"GET", "/v1/public/invoice", inv.LookupToken},
	} {
		res := e.do(c.method, c.path, "", "", "Authorization", "Bearer "+c.token, "Authorization", "Bearer "+c.token)
		requireProblem(t, res, http.StatusUnauthorized, "unauthorized", "")
		// One header, scheme in any case, any number of spaces: accepted.
		res = e.do(c.method, c.path, "", "", "Authorization", "bEARER   "+c.token)
		require.NotEqual(t, http.StatusUnauthorized, res.Status, "%s %s: %s", c.method, c.path, res.Body)
	}
}

func TestCreateInvoice_NonJSONContentType_415NothingCreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	for i, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=b", ""} {
		req, err := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/v1/invoices", strings.NewReader(`{"amount_wei":"5"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+m.APIKey)
		req.Header.Set("Idempotency-Key", fmt.Sprint("k", i))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		res := send(t, req)
		requireProblem(t, res, http.StatusUnsupportedMediaType, "unsupported_media_type", "")
		require.Equal(t, "application/json", res.Header.Get("Accept-Post"))
	}
	require.Empty(t, invoicesOf(t, e.st, m.ID))
	res := e.do("PATCH", "/v1/merchant", m.APIKey, "", "Content-Type", "text/plain")
	requireProblem(t, res, http.StatusUnsupportedMediaType, "unsupported_media_type", "")
}

func TestListInvoices_SemicolonInQuery_400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	e.mustCreate(m.APIKey, "k", `{"amount_wei":"5"}`)
	for _, q := range []string{"status=EXPIRED;x", "limit=1;x", "cursor=%zz"} {
		requireProblem(t, e.do("GET", "/v1/invoices?"+q, m.APIKey, ""), http.StatusBadRequest, "invalid_query", "")
	}
}

func TestAdminCreateMerchant_LocationIsARoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.do("POST", "/v1/admin/merchants", adminToken, `{"name":"shop","settlement_address":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	loc := res.Header.Get("Location")
	path, ok := strings.CutPrefix(loc, "https://pay.example.com")
	require.True(t, ok, loc)
	got := e.do("GET", path, adminToken, "")
	require.Equal(t, http.StatusOK, got.Status, "%s", got.Body)
	require.Equal(t, res.json(t)["id"], got.json(t)["id"])
	require.Equal(t, "shop", got.json(t)["name"])
	require.NotContains(t, got.json(t), "api_key")
	require.NotContains(t, got.json(t), "webhook_secret")
	requireProblem(t, e.do("GET", path, "", ""), http.StatusUnauthorized, "unauthorized", "")
	requireProblem(t, e.do("GET", "/v1/admin/merchants/999999", adminToken, ""), http.StatusNotFound, "not_found", "")
}

func TestHandler_UnknownPathAndWrongMethod_Problems(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := e.svc.Handler()
	rec := recorder(h, mustRequest(t, "GET", "/v1/nope"))
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	rec = recorder(h, mustRequest(t, "DELETE", "/v1/invoices"))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	require.Equal(t, "GET, HEAD, POST", rec.Header().Get("Allow"))
}

func mustRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, path, nil)
	require.NoError(t, err)
	return req
}
