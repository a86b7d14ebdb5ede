package invoice_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/store/sqlite/sqlitetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	testMnemonic = "test test test test test test test test test test test junk"
	adminToken   = "operator-token-for-tests"
	chainID      = 1337
)

var (
	testSecretKey = []byte("0123456789abcdef0123456789abcdef-test-only")
	ctx           = context.Background()
	t0            = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

	deriverOnce sync.Once
	deriver     *hdwallet.Deriver
)

func testDeriver(t testing.TB) *hdwallet.Deriver {
	deriverOnce.Do(func() {
		m, err := hdwallet.ParseMnemonic(testMnemonic)
		require.NoError(t, err)
		w, err := hdwallet.NewWallet(m, "")
		require.NoError(t, err)
		deriver = w.Deriver()
	})
	return deriver
}

// clock is an injected clock that tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is an invoice API on a real database behind a real HTTP server.
type env struct {
	t     *testing.T
	st    store.Store
	svc   *invoice.Service
	creds *invoice.Credentials
	srv   *httptest.Server
	clock *clock
}

// newEnv serves the API over PostgreSQL.
func newEnv(t *testing.T, opts ...func(*invoice.Config)) *env {
	return newEnvOn(t, pgtest.New(t), opts...)
}

func newPostgres(t *testing.T) *postgres.Store { return pgtest.New(t) }

func newSQLite(t *testing.T) store.Store { return sqlitetest.New(t) }

// bothStores runs fn against PostgreSQL and SQLite.
func bothStores(t *testing.T, fn func(t *testing.T, e *env)) {
	bothStoresWith(t, func(*invoice.Config) {}, fn)
}

// bothStoresWith is bothStores with opt applied to the Config.
func bothStoresWith(t *testing.T, opt func(*invoice.Config), fn func(t *testing.T, e *env)) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, newEnv(t, opt))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, newEnvOn(t, newSQLite(t), opt))
	})
}

func newEnvOn(t *testing.T, st store.Store, opts ...func(*invoice.Config)) *env {
	t.Helper()
	creds, err := invoice.NewCredentials(testSecretKey)
	require.NoError(t, err)
	c := &clock{t: t0}
	cfg := invoice.Config{AdminToken: adminToken, Now: c.Now, BaseURL: "https://pay.example.com"}
	for _, o := range opts {
		o(&cfg)
	}
	svc, err := invoice.New(st, creds, testDeriver(t), chainID, cfg)
	require.NoError(t, err)
	mux := httpapi.NewMux()
	svc.Routes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, svc: svc, creds: creds, srv: srv, clock: c}
}

// result is a response, read whole.
type result struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r result) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), "body: %s", r.Body)
	return m
}

// do sends a request; headers are name, value pairs.
func (e *env) do(method, path, token, body string, headers ...string) result {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, rd)
	require.NoError(e.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	return send(e.t, req)
}

func send(t *testing.T, req *http.Request) result {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return result{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// merchantKeys is a merchant created through the admin API.
type merchantKeys struct {
	ID            int64
	APIKey        string
	WebhookSecret string
}

func (e *env) newMerchant() merchantKeys {
	e.t.Helper()
	res := e.do("POST", "/v1/admin/merchants", adminToken,
		`{"name":"shop","webhook_url":"https://shop.example/hook","settlement_address":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}`)
	require.Equal(e.t, http.StatusCreated, res.Status, "%s", res.Body)
	var m struct {
		ID            int64  `json:"id"`
		APIKey        string `json:"api_key"`
		WebhookSecret string `json:"webhook_secret"`
	}
	require.NoError(e.t, json.Unmarshal(res.Body, &m))
	return merchantKeys{ID: m.ID, APIKey: m.APIKey, WebhookSecret: m.WebhookSecret}
}

func (e *env) createInvoice(apiKey, idemKey, body string) result {
	e.t.Helper()
	return e.do("POST", "/v1/invoices", apiKey, body, "Idempotency-Key", idemKey)
}

// mustCreate creates an invoice and returns the decoded 201 body.
func (e *env) mustCreate(apiKey, idemKey, body string) createdInvoice {
	e.t.Helper()
	res := e.createInvoice(apiKey, idemKey, body)
	require.Equal(e.t, http.StatusCreated, res.Status, "%s", res.Body)
	var inv createdInvoice
	require.NoError(e.t, json.Unmarshal(res.Body, &inv))
	return inv
}

type createdInvoice struct {
	ID             int64          `json:"id"`
	MerchantID     int64          `json:"merchant_id"`
	Status         string         `json:"status"`
	AmountWei      store.Amount   `json:"amount_wei"`
	PaidWei        store.Amount   `json:"paid_wei"`
	ChainID        uint64         `json:"chain_id"`
	DepositAddress common.Address `json:"deposit_address"`
	PaymentURI     string         `json:"payment_uri"`
	LookupToken    string         `json:"lookup_token"`
	QRPNGURL       string         `json:"qr_png_url"`
	QRSVGURL       string         `json:"qr_svg_url"`
	ExpiresAt      time.Time      `json:"expires_at"`
	CreatedAt      time.Time      `json:"created_at"`
}

// requireProblem checks an RFC 9457 problem response.
func requireProblem(t *testing.T, res result, status int, code, field string) {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
	p := res.json(t)
	require.Equal(t, code, p["code"], "%s", res.Body)
	require.Equal(t, "urn:evmpay:problem:"+code, p["type"])
	require.EqualValues(t, status, p["status"])
	require.NotEmpty(t, p["title"])
	if field == "" {
		require.NotContains(t, p, "field")
	} else {
		require.Equal(t, field, p["field"], "%s", res.Body)
	}
}

func invoicesOf(t *testing.T, st store.Store, merchantID int64) []store.Invoice {
	t.Helper()
	invs, err := st.ListInvoices(ctx, store.InvoiceFilter{MerchantID: merchantID, Limit: 1000})
	require.NoError(t, err)
	return invs
}

func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, []byte(s)))
	return b.String()
}

func recorder(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
