package webhook_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/webhook"
)

// tokenAuth authenticates "Authorization: Bearer <token>" from a map, as
// the invoice package's authenticator does from api_keys.
type tokenAuth map[string]store.Merchant

func (a tokenAuth) Authenticate(r *http.Request) (store.Merchant, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	m, found := a[tok]
	if !ok || !found {
		return store.Merchant{}, errors.New("invalid api key")
	}
	return m, nil
}

// api is a host serving the deliveries API beside its own routes.
type api struct {
	t   *testing.T
	srv *httptest.Server
}

func newAPI(t *testing.T, st webhook.DeliveriesStore, auth webhook.Authenticator, now func() time.Time) *api {
	h, err := webhook.NewDeliveriesAPI(st, auth, webhook.DeliveriesAPIConfig{Now: now})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/invoices", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &api{t: t, srv: srv}
}

// do makes a request and decodes the JSON answer into out (when not nil).
func (a *api) do(method, path, token, body string, out any) (int, http.Header) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	require.NoError(a.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	if out != nil {
		require.NoError(a.t, json.Unmarshal(raw, out), "body: %s", raw)
	}
	return resp.StatusCode, resp.Header
}

type problemBody struct {
	Type   string `json:"type"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Field  string `json:"field"`
}

type deliveryJSON struct {
	ID             int64      `json:"id"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	InvoiceID      int64      `json:"invoice_id"`
	Status         string     `json:"status"`
	Delivered      bool       `json:"delivered"`
	ResponseStatus *int       `json:"response_status"`
	Attempt        int        `json:"attempt"`
	LastAttemptAt  *time.Time `json:"last_attempt_at"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastError      string     `json:"last_error"`
}

type listJSON struct {
	Data       []deliveryJSON `json:"data"`
	NextCursor *string        `json:"next_cursor"`
}

// failedDelivery makes a delivery of a new event and fails it for good.
func failedDelivery(t *testing.T, st testStore, merchantID int64, at time.Time) store.Delivery {
	t.Helper()
	ev := newEvent(t, st, merchantID, store.EventInvoicePaid, at)
	_, err := st.DispatchEvents(ctx, at, at, 1000)
	require.NoError(t, err)
	d := deliveryOf(t, st, ev)
	code := http.StatusGone
	d.Status, d.Attempt, d.ResponseStatus, d.LastError = store.DeliveryFailed, 1, &code, "HTTP 410"
	d.LastAttemptAt, d.NextAttemptAt = &at, nil
	require.NoError(t, st.UpdateDelivery(ctx, d))
	return d
}

func TestAPI_RequiresAuthentication(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	a := newAPI(t, st, tokenAuth{}, time.Now)
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/webhook-deliveries"},
		{"GET", "/v1/webhook-deliveries/1"},
		{"POST", "/v1/webhook-deliveries/1/replay"},
		{"POST", "/v1/webhook-deliveries/replay"},
	} {
		var p problemBody
		code, h := a.do(r.method, r.path, "wrong", "", &p)
		require.Equal(t, http.StatusUnauthorized, code, r.path)
		require.Equal(t, "application/problem+json", h.Get("Content-Type"))
		require.Equal(t, "unauthorized", p.Code)
		require.Equal(t, "urn:evmpay:problem:unauthorized", p.Type)
		require.NotEmpty(t, h.Get("WWW-Authenticate"))
	}
	code, _ := a.do("GET", "/v1/invoices", "", "", nil)
	require.Equal(t, http.StatusTeapot, code, "the host's own routes are untouched")
}

func TestAPI_ListsFailedDeliveriesPageByPage(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec := newClock(), &secrets{}
	m := newMerchant(t, st, sec, "http://127.0.0.1:1/x", newSecret(t))
	other := newMerchant(t, st, sec, "http://127.0.0.1:1/y", newSecret(t))
	var failed []store.Delivery
	for i := 0; i < 5; i++ {
		failed = append(failed, failedDelivery(t, st, m.ID, clk.Now().Add(time.Duration(i)*time.Minute)))
	}
	failedDelivery(t, st, other.ID, clk.Now())
	newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	_, err := st.DispatchEvents(ctx, clk.Now(), clk.Now(), 100) // one PENDING delivery
	require.NoError(t, err)
	a := newAPI(t, st, tokenAuth{"k1": m, "k2": other}, clk.Now)

	var got []deliveryJSON
	path := "/v1/webhook-deliveries?status=failed&limit=2"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		var page listJSON
		code, _ := a.do("GET", path, "k1", "", &page)
		require.Equal(t, http.StatusOK, code)
		got = append(got, page.Data...)
		if page.NextCursor == nil {
			break
		}
		path = "/v1/webhook-deliveries?status=failed&limit=2&cursor=" + *page.NextCursor
	}
	require.Len(t, got, 5, "every failed delivery of the merchant, and only those")
	for i, d := range got { // newest first
		want := failed[len(failed)-1-i]
		require.Equal(t, want.ID, d.ID)
		require.Equal(t, webhook.EventID(want.EventID), d.EventID)
		require.Equal(t, store.DeliveryFailed, d.Status)
		require.Equal(t, http.StatusGone, *d.ResponseStatus)
		require.Equal(t, "HTTP 410", d.LastError)
		require.Equal(t, 1, d.Attempt)
	}

	var all listJSON
	code, _ := a.do("GET", "/v1/webhook-deliveries", "k1", "", &all)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, all.Data, 6)
	require.Nil(t, all.NextCursor)

	var since listJSON
	code, _ = a.do("GET", "/v1/webhook-deliveries?status=FAILED&since="+clk.Now().Add(3*time.Minute).Format(time.RFC3339), "k1", "", &since)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, since.Data, 2, "created at or after since")

	var one deliveryJSON
	code, _ = a.do("GET", "/v1/webhook-deliveries/"+strconv.FormatInt(failed[0].ID, 10), "k1", "", &one)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, failed[0].ID, one.ID)
	var p problemBody
	code, _ = a.do("GET", "/v1/webhook-deliveries/"+strconv.FormatInt(failed[0].ID, 10), "k2", "", &p)
	require.Equal(t, http.StatusNotFound, code, "another merchant's delivery does not exist for it")
	require.Equal(t, "not_found", p.Code)

	for q, want := range map[string]string{
		"status=lost":                  "invalid_parameter",
		"since=yesterday":              "invalid_parameter",
		"limit=0":                      "invalid_parameter",
		"limit=101":                    "invalid_parameter",
		"cursor=zzz":                   "invalid_cursor",
		"colour=red":                   "unknown_parameter",
		"status=failed&status=pending": "invalid_parameter",
	} {
		var p problemBody
		code, _ := a.do("GET", "/v1/webhook-deliveries?"+q, "k1", "", &p)
		require.Equal(t, http.StatusBadRequest, code, q)
		require.Equal(t, want, p.Code, q)
	}
}

func TestAPI_ReplayDeliversAgainWithTheSameWebhookID(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, status(http.StatusNotFound))
	m := newMerchant(t, st, sec, rc.URL, secret)
	other := newMerchant(t, st, sec, rc.URL, newSecret(t))
	ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	start(t, st, sec, fastConfig(clk))
	a := newAPI(t, st, tokenAuth{"k1": m, "k2": other}, clk.Now)

	d := waitDelivery(t, st, deliveryOf(t, st, ev).ID, "failed", attempted(1))
	require.Equal(t, store.DeliveryFailed, d.Status)
	var list listJSON
	code, _ := a.do("GET", "/v1/webhook-deliveries?status=failed", "k1", "", &list)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, list.Data, 1)

	replayPath := "/v1/webhook-deliveries/" + strconv.FormatInt(d.ID, 10) + "/replay"
	var p problemBody
	code, _ = a.do("POST", replayPath, "k2", "", &p)
	require.Equal(t, http.StatusNotFound, code, "a merchant cannot replay another's delivery")

	rc.setRespond(status(http.StatusOK)) // the merchant fixed its endpoint
	clk.Add(time.Hour)
	var replayed deliveryJSON
	code, _ = a.do("POST", replayPath, "k1", "", &replayed)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, store.DeliveryPending, replayed.Status)
	require.Zero(t, replayed.Attempt, "a replay starts a new run of the ladder")
	require.True(t, clk.Now().Equal(*replayed.NextAttemptAt))

	d = waitDelivery(t, st, d.ID, "delivered", func(d store.Delivery) bool { return d.Status == store.DeliveryDelivered })
	require.Equal(t, 1, d.Attempt)
	reqs := rc.requests()
	require.Len(t, reqs, 2)
	require.Equal(t, reqs[0].header.Get(webhook.HeaderID), reqs[1].header.Get(webhook.HeaderID), "the replay keeps the event id")
	require.Equal(t, webhook.EventID(ev.ID), reqs[1].header.Get(webhook.HeaderID))
	require.NoError(t, reqs[1].verified)
	require.NotEqual(t, reqs[0].header.Get(webhook.HeaderTimestamp), reqs[1].header.Get(webhook.HeaderTimestamp),
		"signed afresh, at the replay's time")
}

func TestAPI_ReplayPending_Conflict(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec := newClock(), &secrets{}
	m := newMerchant(t, st, sec, "http://127.0.0.1:1/", newSecret(t))
	ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	_, err := st.DispatchEvents(ctx, clk.Now(), clk.Now(), 100)
	require.NoError(t, err)
	d := deliveryOf(t, st, ev)
	a := newAPI(t, st, tokenAuth{"k1": m}, clk.Now)
	var p problemBody
	code, _ := a.do("POST", "/v1/webhook-deliveries/"+strconv.FormatInt(d.ID, 10)+"/replay", "k1", "", &p)
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, "delivery_pending", p.Code)
	code, _ = a.do("POST", "/v1/webhook-deliveries/99999/replay", "k1", "", &p)
	require.Equal(t, http.StatusNotFound, code)
	code, _ = a.do("POST", "/v1/webhook-deliveries/abc/replay", "k1", "", &p)
	require.Equal(t, http.StatusNotFound, code)
}

func TestAPI_ReplayAllFailedSince(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, nil)
	m := newMerchant(t, st, sec, rc.URL, secret)
	other := newMerchant(t, st, sec, rc.URL, newSecret(t))
	outage := clk.Now()
	before := failedDelivery(t, st, m.ID, outage.Add(-time.Minute))
	during := []store.Delivery{
		failedDelivery(t, st, m.ID, outage),
		failedDelivery(t, st, m.ID, outage.Add(time.Minute)),
		failedDelivery(t, st, m.ID, outage.Add(2*time.Minute)),
	}
	othersFailed := failedDelivery(t, st, other.ID, outage.Add(time.Minute))
	a := newAPI(t, st, tokenAuth{"k1": m}, clk.Now)

	for body, want := range map[string]string{
		``:                    "invalid_json",
		`{}`:                  "missing_field",
		`{"since": "monday"}`: "invalid_field",
		`{"since": 12}`:       "invalid_json",
		`{"since": "2026-01-01T00:00:00Z", "all": true}`: "invalid_json",
		`{"since": "2026-01-01T00:00:00Z"} {}`:           "invalid_json",
	} {
		var p problemBody
		code, _ := a.do("POST", "/v1/webhook-deliveries/replay", "k1", body, &p)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Equal(t, want, p.Code, body)
	}
	var p problemBody
	code, _ := a.do("POST", "/v1/webhook-deliveries/replay", "k1", `{"since":"`+strings.Repeat("x", 5000)+`"}`, &p)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)

	var res struct {
		Replayed int64     `json:"replayed"`
		Since    time.Time `json:"since"`
	}
	code, _ = a.do("POST", "/v1/webhook-deliveries/replay", "k1", `{"since":"`+outage.Format(time.RFC3339)+`"}`, &res)
	require.Equal(t, http.StatusAccepted, code)
	require.EqualValues(t, 3, res.Replayed)
	require.True(t, outage.Equal(res.Since))

	start(t, st, sec, fastConfig(clk))
	for _, d := range during {
		got := waitDelivery(t, st, d.ID, "delivered", func(d store.Delivery) bool { return d.Status == store.DeliveryDelivered })
		require.Equal(t, 1, got.Attempt)
	}
	for _, d := range []store.Delivery{before, othersFailed} {
		got, err := st.GetDelivery(ctx, d.ID)
		require.NoError(t, err)
		require.Equal(t, store.DeliveryFailed, got.Status)
	}
	require.Equal(t, 3, rc.count())
}
