package dashboard_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/dashboard"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/store/sqlite/sqlitetest"
	"github.com/evmpay/evmpay/webhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var (
	ctx           = context.Background()
	testSecretKey = []byte("0123456789abcdef0123456789abcdef-test-only")
	deriverOnce   sync.Once
	deriver       *hdwallet.Deriver
)

const testPassword = "correct horse battery staple"

func testDeriver(t testing.TB) *hdwallet.Deriver {
	deriverOnce.Do(func() {
		m, err := hdwallet.ParseMnemonic("test test test test test test test test test test test junk")
		require.NoError(t, err)
		w, err := hdwallet.NewWallet(m, "")
		require.NoError(t, err)
		deriver = w.Deriver()
	})
	return deriver
}

// clock is the dashboard's and the invoice service's clock, moved by hand.
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

// env is the dashboard over a real database, mounted at /dashboard beside
// the invoice API, with one merchant and its owner.
type env struct {
	t        *testing.T
	st       store.Store
	api      *invoice.Service
	dash     *dashboard.Dashboard
	srv      *httptest.Server
	clock    *clock
	merchant store.Merchant
	apiKey   string
	owner    store.DashboardUser
}

func newSQLite(t *testing.T) store.Store { return sqlitetest.New(t) }

// bothStores runs fn on PostgreSQL and on SQLite.
func bothStores(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, newEnv(t, pgtest.New(t)))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, newEnv(t, newSQLite(t)))
	})
}

func newEnv(t *testing.T, st store.Store, opts ...func(*dashboard.Config)) *env {
	t.Helper()
	return newEnvWith(t, st, invoice.Config{}, opts...)
}

// newEnvWith is newEnv over an invoice service configured with icfg.
func newEnvWith(t *testing.T, st store.Store, icfg invoice.Config, opts ...func(*dashboard.Config)) *env {
	t.Helper()
	creds, err := invoice.NewCredentials(testSecretKey)
	require.NoError(t, err)
	c := &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	mux := httpapi.NewMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	icfg.Now, icfg.BaseURL = c.Now, srv.URL
	api, err := invoice.New(st, creds, testDeriver(t), 1337, icfg)
	require.NoError(t, err)
	api.Routes(mux)
	deliveries, err := webhook.NewDeliveriesAPI(st, dashboard.DeliveriesAuthenticator{}, webhook.DeliveriesAPIConfig{Now: c.Now})
	require.NoError(t, err)
	// WebAuthn needs a domain: localhost, as browsers take it.
	public := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	cfg := dashboard.Config{PublicURL: public + "/dashboard", SecretKey: testSecretKey, Now: c.Now, Deliveries: deliveries,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := dashboard.New(api, st, cfg)
	require.NoError(t, err)
	mux.Handle("/dashboard/", d)
	m, err := api.CreateMerchant(ctx, invoice.MerchantParams{Name: "Shop", SettlementAddress: common.HexToAddress("0x00000000000000000000000000000000000000aa")})
	require.NoError(t, err)
	owner, err := d.EnsureUser(ctx, m.Merchant.ID, "owner@example.com", store.RoleOwner, testPassword)
	require.NoError(t, err)
	return &env{t: t, st: st, api: api, dash: d, srv: srv, clock: c, merchant: m.Merchant, apiKey: m.APIKey, owner: owner}
}

// user makes another user of the merchant with a role.
func (e *env) user(email, role string) store.DashboardUser {
	e.t.Helper()
	u, err := e.dash.EnsureUser(ctx, e.merchant.ID, email, role, testPassword)
	require.NoError(e.t, err)
	return u
}

// browser is an HTTP client with its own cookies (kept whatever their
// Secure attribute: the test server is plain HTTP on loopback, where
// browsers keep secure cookies too).
type browser struct {
	t       *testing.T
	url     string
	cookies map[string]*http.Cookie
	last    []*http.Cookie
}

func newBrowser(t *testing.T, url string) *browser {
	return &browser{t: t, url: url, cookies: map[string]*http.Cookie{}}
}

func (e *env) browser() *browser { return newBrowser(e.t, e.srv.URL) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

type page struct {
	Status   int
	Body     string
	Location string
	Header   http.Header
}

func (b *browser) do(method, path string, form url.Values, hdr ...string) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.url+path, body)
	require.NoError(b.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	for _, c := range b.cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	b.last = res.Cookies()
	for _, c := range res.Cookies() {
		if c.MaxAge < 0 || c.Value == "" {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return page{Status: res.StatusCode, Body: string(raw), Location: res.Header.Get("Location"), Header: res.Header}
}

// doBody sends a request with a body of its own type (a multipart form).
func (b *browser) doBody(method, path, contentType string, body []byte) page {
	b.t.Helper()
	req, err := http.NewRequest(method, b.url+path, bytes.NewReader(body))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", contentType)
	for _, c := range b.cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	return page{Status: res.StatusCode, Body: string(raw), Location: res.Header.Get("Location"), Header: res.Header}
}

func (b *browser) get(path string) page { return b.do("GET", path, nil) }

func (b *browser) post(path string, form url.Values) page {
	if form == nil {
		form = url.Values{}
	}
	return b.do("POST", path, form)
}

// signIn signs in with the test password and requires the redirect into
// the dashboard.
func (b *browser) signIn(email string) page {
	b.t.Helper()
	p := b.post("/dashboard/sign-in", url.Values{"email": {email}, "password": {testPassword}})
	require.Equal(b.t, http.StatusSeeOther, p.Status, p.Body)
	return p
}

var keyRe = regexp.MustCompile(`name="key" value="([^"]+)"`)

// formKey is the idempotency key of the form on a page.
func formKey(t *testing.T, body string) string {
	m := keyRe.FindStringSubmatch(body)
	require.NotNil(t, m, "the page has a form with an idempotency key")
	return m[1]
}

// totpNow is the RFC 6238 code of a base32 key at t, computed here on its
// own (not with the package's code).
func totpNow(t *testing.T, key string, at time.Time) string {
	t.Helper()
	k, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(key)
	require.NoError(t, err)
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], uint64(at.Unix()/30))
	m := hmac.New(sha1.New, k)
	m.Write(msg[:])
	sum := m.Sum(nil)
	off := sum[19] & 0x0f
	v := binary.BigEndian.Uint32(sum[off:off+4]) & 0x7fffffff
	return fmt.Sprintf("%06d", v%1000000)
}
