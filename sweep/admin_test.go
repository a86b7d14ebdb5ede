package sweep

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func TestAdminHandler_Errors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onSQLite())
	s := e.sweeper(Config{OperatorToken: operatorToken})
	h := s.AdminHandler()

	type problem struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Code   string `json:"code"`
		Detail string `json:"detail"`
	}
	problemOf := func(t *testing.T, rec *httptest.ResponseRecorder) problem {
		t.Helper()
		require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
		var p problem
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		require.Equal(t, rec.Code, p.Status)
		return p
	}
	for _, c := range []struct {
		name, token, body string
		status            int
		code              string
	}{
		{"no token", "", "", http.StatusUnauthorized, "unauthorized"},
		{"wrong token", "op_wrong", "", http.StatusUnauthorized, "unauthorized"},
		{"token prefix", operatorToken[:5], "", http.StatusUnauthorized, "unauthorized"},
		{"not JSON", operatorToken, "invoice_ids=1", http.StatusBadRequest, "invalid_request"},
		{"unknown field", operatorToken, `{"ids":[1]}`, http.StatusBadRequest, "invalid_request"},
		{"empty list", operatorToken, `{"invoice_ids":[]}`, http.StatusBadRequest, "invalid_request"},
		{"negative id", operatorToken, `{"invoice_ids":[-1]}`, http.StatusBadRequest, "invalid_request"},
		{"two objects", operatorToken, `{} {}`, http.StatusBadRequest, "invalid_request"},
		{"too big", operatorToken, `{"invoice_ids":[` + strings.Repeat("1,", 40000) + `1]}`, http.StatusBadRequest, "invalid_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := retryRequest(t, h, c.token, c.body)
			require.Equal(t, c.status, rec.Code, rec.Body.String())
			require.Equal(t, c.code, problemOf(t, rec).Code)
			if c.status == http.StatusUnauthorized {
				require.Contains(t, rec.Header().Get("WWW-Authenticate"), "Bearer")
			}
		})
	}

	t.Run("GET", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodGet, RetryPath, nil)
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
		require.Equal(t, "method_not_allowed", problemOf(t, rec).Code)
		require.Equal(t, http.MethodPost, rec.Header().Get("Allow"))
	})
	t.Run("unknown path", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodPost, "/v1/admin/sweeps/other", nil)
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusNotFound, rec.Code)
		require.Equal(t, "not_found", problemOf(t, rec).Code)
	})
	disabled := e.sweeper(Config{}).AdminHandler()
	t.Run("no token configured", func(t *testing.T) {
		rec := retryRequest(t, disabled, "", "")
		require.Equal(t, http.StatusServiceUnavailable, rec.Code)
		require.Equal(t, "admin_disabled", problemOf(t, rec).Code)
	})
	t.Run("mounted on a host mux", func(t *testing.T) {
		mux := http.NewServeMux()
		mux.Handle("/v1/admin/sweeps/", h)
		rec := retryRequest(t, mux, operatorToken, "")
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `{"requeued":[],"skipped":[],"truncated":false}`, rec.Body.String())
	})
}

func TestRetry_RequeuesOnlyTheFailedOnesAsked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sweepWalletBalance(big0()))
	invs := e.confirmedInvoices(3, eth(1))
	s, err := New(e.st, e.client, Keys{Deposits: e.wallet, Wallet: NewKeySigner(e.sweepKey)},
		Config{OperatorToken: operatorToken, Now: e.clock.Now})
	require.NoError(t, err)
	require.NoError(t, s.RunOnce(ctx))
	require.True(t, e.all(ids(invs), store.SweepFailed)())

	rec := retryRequest(t, s.AdminHandler(), operatorToken, `{"invoice_ids":[`+itoa(invs[1].ID)+`]}`)
	require.Equal(t, http.StatusOK, rec.Code)
	var res RetryResult
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res))
	require.Equal(t, []Requeued{{InvoiceID: invs[1].ID, PreviousError: ReasonInsufficientGas}}, res.Requeued)
	require.Equal(t, store.SweepFailed, e.invoice(invs[0].ID).SweepStatus)
	require.Equal(t, store.SweepQueued, e.invoice(invs[1].ID).SweepStatus)
	require.Equal(t, store.SweepFailed, e.invoice(invs[2].ID).SweepStatus)

	// Without ids: every FAILED sweep.
	res, err = s.Retry(ctx, nil)
	require.NoError(t, err)
	require.Len(t, res.Requeued, 2)
	require.False(t, res.Truncated)
	require.True(t, e.all(ids(invs), store.SweepQueued)())
}

// A process without keys or a node (an API replica) serves the retry
// endpoint through NewAdmin.
func TestNewAdmin_RetriesWithoutKeysOrNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sweepWalletBalance(big0()))
	invs := e.confirmedInvoices(2, eth(1))
	s, err := New(e.st, e.client, Keys{Deposits: e.wallet, Wallet: NewKeySigner(e.sweepKey)},
		Config{Now: e.clock.Now})
	require.NoError(t, err)
	require.NoError(t, s.RunOnce(ctx))
	require.True(t, e.all(ids(invs), store.SweepFailed)())

	_, err = NewAdmin(nil, Config{})
	require.Error(t, err)
	admin, err := NewAdmin(e.st, Config{OperatorToken: operatorToken, Now: e.clock.Now})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, retryRequest(t, admin.Handler(), "wrong", "").Code)
	rec := retryRequest(t, admin.Handler(), operatorToken, "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var res RetryResult
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res))
	require.Len(t, res.Requeued, 2)
	require.True(t, e.all(ids(invs), store.SweepQueued)())
}

func TestAdminHandler_BearerSchemeAnyCase_Accepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onSQLite())
	h := e.sweeper(Config{OperatorToken: operatorToken}).AdminHandler()
	for _, auth := range []string{"bearer " + operatorToken, "BEARER " + operatorToken, "Bearer  " + operatorToken} {
		req := httptest.NewRequest(http.MethodPost, RetryPath, nil)
		req.Header.Set("Authorization", auth)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, "%q: %s", auth, rec.Body)
	}
	req := httptest.NewRequest(http.MethodPost, RetryPath, nil)
	req.Header.Add("Authorization", "Bearer "+operatorToken)
	req.Header.Add("Authorization", "Bearer "+operatorToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnauthorized, rec.Code, "two Authorization headers are ambiguous")
}

func TestAdminHandler_NonJSONContentType_415(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onSQLite())
	h := e.sweeper(Config{OperatorToken: operatorToken}).AdminHandler()
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
		req := httptest.NewRequest(http.MethodPost, RetryPath, strings.NewReader(`{"invoice_ids":[1]}`))
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusUnsupportedMediaType, rec.Code, "%q: %s", ct, rec.Body)
		require.Contains(t, rec.Body.String(), `"code":"unsupported_media_type"`)
		require.Equal(t, "application/json", rec.Header().Get("Accept-Post"))
	}
}
