package webhook_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/webhook"
)

func TestAPI_ReplayAllNonJSONContentType_415NothingReplayed(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec := newClock(), &secrets{}
	m := newMerchant(t, st, sec, "http://127.0.0.1:1/x", newSecret(t))
	d := failedDelivery(t, st, m.ID, clk.Now())
	h, err := webhook.NewDeliveriesAPI(st, tokenAuth{"k1": m}, webhook.DeliveriesAPIConfig{Now: clk.Now})
	require.NoError(t, err)
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=b", ""} {
		req := httptest.NewRequest("POST", "/v1/webhook-deliveries/replay", strings.NewReader(`{"since":"2020-01-01T00:00:00Z"}`))
		req.Header.Set("Authorization", "Bearer k1")
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusUnsupportedMediaType, rec.Code, "%q: %s", ct, rec.Body)
		require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
		require.Contains(t, rec.Body.String(), `"code":"unsupported_media_type"`)
	}
	got, err := st.GetDelivery(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, store.DeliveryFailed, got.Status, "nothing was replayed")
}

func TestAPI_ListUnparsableQuery_400(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	m := newMerchant(t, st, &secrets{}, "http://127.0.0.1:1/x", newSecret(t))
	a := newAPI(t, st, tokenAuth{"k1": m}, time.Now)
	for _, q := range []string{"status=failed;x", "limit=1;x", "since=%zz"} {
		var p problemBody
		code, _ := a.do("GET", "/v1/webhook-deliveries?"+q, "k1", "", &p)
		require.Equal(t, http.StatusBadRequest, code, q)
		require.Equal(t, "invalid_query", p.Code, q)
	}
}

func TestHandler_UnknownPathAndWrongMethod_Problems(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	h, err := webhook.NewDeliveriesAPI(st, tokenAuth{}, webhook.DeliveriesAPIConfig{})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/webhook-deliveries/1/nope", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("DELETE", "/v1/webhook-deliveries/1", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	require.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
}
