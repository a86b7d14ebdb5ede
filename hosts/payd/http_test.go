package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/sqlite"
	"github.com/evmpay/evmpay/sweep"
)

// edgeEnv is one payd process with every role, on a dev chain and SQLite,
// serving its real listeners: what the HTTP-edge tests talk to.
type edgeEnv struct {
	a                   *app
	api, metrics, proxy string
	apiKey, admin       string
	lookupToken         string
	invoiceID           int64
	// A token invoice (the dev chain's test stablecoin).
	tokenLookupToken string
	tokenInvoiceID   int64
	// An invoice priced in EUR, quoted in the native coin and the token
	// at the dev rates, with a payment of each recorded.
	fiatLookupToken string
	fiatInvoiceID   int64
}

func newEdgeEnv(t *testing.T) *edgeEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	keys, err := newDevProvider(func(string) string { return "" }, dir)
	require.NoError(t, err)
	chain, err := startDevChain(freeAddr(t), time.Hour, nil)
	require.NoError(t, err)
	usdc, err := chain.deployDevToken(ctx)
	require.NoError(t, err)
	decimals := usdc.Decimals
	chainDone := make(chan error, 1)
	go func() { chainDone <- chain.Run(ctx) }()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "payd.db"), sqlite.Config{})
	require.NoError(t, err)
	a, err := newApp(ctx, st, appConfig{
		roles:       roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleSweep: true, roleWebhooks: true},
		httpAddr:    "127.0.0.1:0",
		proxyAddr:   "127.0.0.1:0",
		metricsAddr: "127.0.0.1:0",
		chain: chainSpec{rpcURL: chain.url, confirmations: 12,
			tokens: []tokenConfig{{Symbol: usdc.Symbol, Address: usdc.Address, Decimals: &decimals}}},
		keys: keys, sweepPolicy: sweep.PolicySponsor,
		archiveAfter: 365 * 24 * time.Hour, archiveEvery: time.Hour, proxyRate: 1000, proxyBurst: 1000,
		pricing: pricingConfig{dev: true},
		log:     slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	demo, err := createDemoMerchant(ctx, a, "")
	require.NoError(t, err)
	admin, err := loadAdminToken(ctx, keys)
	require.NoError(t, err)
	appDone := make(chan error, 1)
	go func() { appDone <- a.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-appDone)
		<-chainDone
		st.Close()
	})
	e := &edgeEnv{a: a, api: a.httpURL(), metrics: a.metricsURL(), proxy: a.proxyURL(), apiKey: demo.APIKey, admin: admin}
	res := e.do(t, "POST", "/v1/invoices", `{"amount_wei":"1000"}`,
		"Authorization", "Bearer "+e.apiKey, "Idempotency-Key", "edge", "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, res.status, "%s", res.body)
	var inv struct {
		ID          int64  `json:"id"`
		LookupToken string `json:"lookup_token"`
	}
	require.NoError(t, json.Unmarshal(res.body, &inv))
	e.invoiceID, e.lookupToken = inv.ID, inv.LookupToken
	res = e.do(t, "POST", "/v1/invoices", `{"asset":"`+usdc.Symbol+`","amount_formatted":"12.5"}`,
		"Authorization", "Bearer "+e.apiKey, "Idempotency-Key", "edge-token", "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, res.status, "%s", res.body)
	require.NoError(t, json.Unmarshal(res.body, &inv))
	e.tokenInvoiceID, e.tokenLookupToken = inv.ID, inv.LookupToken
	res = e.do(t, "POST", "/v1/invoices", `{"price":{"amount":"49.90","currency":"EUR"}}`,
		"Authorization", "Bearer "+e.apiKey, "Idempotency-Key", "edge-fiat", "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, res.status, "%s", res.body)
	require.NoError(t, json.Unmarshal(res.body, &inv))
	e.fiatInvoiceID, e.fiatLookupToken = inv.ID, inv.LookupToken
	e.recordFiatPayments(t, st)
	return e
}

// recordFiatPayments records a payment of 10 USDC and one of 0.001 ETH to
// the fiat invoice, valued as settlement values them, so that reads show
// payments with values.
func (e *edgeEnv) recordFiatPayments(t *testing.T, st store.Store) {
	t.Helper()
	inv, err := st.GetInvoice(context.Background(), e.fiatInvoiceID)
	require.NoError(t, err)
	token := inv.Pricing.Quotes[1].Asset.Token()
	require.NotNil(t, token, "the native coin is quoted first, the token second")
	ps := []store.Payment{
		{InvoiceID: inv.ID, TxHash: common.HexToHash("0x01"), LogIndex: 0, Token: token, AmountWei: store.NewAmount(10_000_000)},
		{InvoiceID: inv.ID, TxHash: common.HexToHash("0x02"), LogIndex: store.NativeLogIndex, AmountWei: store.MustParseAmount("1000000000000000")},
	}
	var all []store.AssetAmount
	for i := range ps {
		ps[i].CreatedAt = inv.CreatedAt
		require.NoError(t, st.Chain(inv.ChainID).InsertPayment(context.Background(), &ps[i]))
		all = append(all, store.AssetAmount{Token: ps[i].Token, Amount: ps[i].AmountWei})
	}
	v, err := store.ValuePayments(inv.Pricing.Quotes, all)
	require.NoError(t, err)
	require.Equal(t, "10.00 EUR", v.String(), "8.00 EUR of USDC and 2.00 EUR of ETH")
	inv.PaidValue, inv.Underpaid, inv.PaidWei = &v.Minor, true, store.MustParseAmount("1000000000000000")
	require.NoError(t, st.UpdateInvoice(context.Background(), &inv))
}

type edgeResult struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request to the API listener (or to a full URL); headers are
// name, value pairs, added (so a name may repeat).
func (e *edgeEnv) do(t *testing.T, method, path, body string, headers ...string) edgeResult {
	t.Helper()
	url := path
	if strings.HasPrefix(path, "/") {
		url = e.api + path
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return edgeResult{status: resp.StatusCode, header: resp.Header, body: b}
}

func requireEdgeProblem(t *testing.T, res edgeResult, status int, code string, msgAndArgs ...any) {
	t.Helper()
	where := ""
	if len(msgAndArgs) > 0 {
		where = fmt.Sprintf(msgAndArgs[0].(string), msgAndArgs[1:]...)
	}
	require.Equal(t, status, res.status, "%s: %s", where, res.body)
	require.Equal(t, "application/problem+json", res.header.Get("Content-Type"), where)
	var p struct {
		Code   string `json:"code"`
		Status int    `json:"status"`
	}
	require.NoError(t, json.Unmarshal(res.body, &p), where)
	require.Equal(t, code, p.Code, where)
	require.Equal(t, status, p.Status, where)
}

// protectedRoute is one endpoint behind a bearer credential, called so that
// an accepted credential gets a non-401 answer without changing anything
// another case relies on.
type protectedRoute struct {
	method, path, body string
	token              func(e *edgeEnv) string
}

func protectedRoutes(e *edgeEnv) []protectedRoute {
	merchant := func(e *edgeEnv) string { return e.apiKey }
	operator := func(e *edgeEnv) string { return e.admin }
	lookup := func(e *edgeEnv) string { return e.lookupToken }
	return []protectedRoute{
		{"GET", "/v1/merchant", "", merchant},
		{"GET", fmt.Sprintf("/v1/invoices/%d", e.invoiceID), "", merchant},
		{"GET", "/v1/webhook-deliveries", "", merchant},
		{"POST", "/v1/admin/merchants", `{}`, operator}, // 400: settlement_address missing
		{"GET", "/v1/admin/merchants/1", "", operator},
		{"POST", "/v1/admin/merchants/999999/api-key/rotate", "", operator}, // 404
		{"GET", "/v1/admin/status", "", operator},
		{"POST", "/v1/admin/sweeps/retry", `{"invoice_ids":[999999]}`, operator},
		{"GET", "/v1/public/invoice", "", lookup},
	}
}

func TestHTTP_EveryProtectedRoute_ParsesTheBearerCredentialTheSameWay(t *testing.T) {
	t.Parallel()
	e := newEdgeEnv(t)
	accepted := []func(tok string) []string{
		func(tok string) []string { return []string{"Bearer " + tok} },
		func(tok string) []string { return []string{"bearer " + tok} },
		func(tok string) []string { return []string{"BEARER " + tok} },
		func(tok string) []string { return []string{"Bearer  " + tok} }, // RFC 7235: 1*SP
		func(tok string) []string { return []string{"Bearer   " + tok + "  "} },
	}
	refused := []func(tok string) []string{
		func(tok string) []string { return nil },
		func(tok string) []string { return []string{"Bearer"} },
		func(tok string) []string { return []string{"Bearer" + tok} },
		func(tok string) []string { return []string{"Bearer\t" + tok} },
		func(tok string) []string { return []string{"Basic " + tok} },
		func(tok string) []string { return []string{tok} },
		func(tok string) []string { return []string{"Bearer " + tok + " extra"} },
		func(tok string) []string { return []string{"Bearer " + tok + "x"} },
		func(tok string) []string { return []string{"Bearer " + tok, "Bearer " + tok} },
	}
	for _, rt := range protectedRoutes(e) {
		tok := rt.token(e)
		send := func(auth []string) edgeResult {
			headers := []string{"Content-Type", "application/json"}
			for _, a := range auth {
				headers = append(headers, "Authorization", a)
			}
			return e.do(t, rt.method, rt.path, rt.body, headers...)
		}
		for _, h := range accepted {
			res := send(h(tok))
			require.NotEqual(t, http.StatusUnauthorized, res.status, "%s %s with %q: %s", rt.method, rt.path, h("<token>"), res.body)
			require.Less(t, res.status, 500, "%s %s: %s", rt.method, rt.path, res.body)
		}
		for _, h := range refused {
			res := send(h(tok))
			requireEdgeProblem(t, res, http.StatusUnauthorized, "unauthorized", "%s %s with %q", rt.method, rt.path, h("<token>"))
			require.Contains(t, res.header.Get("WWW-Authenticate"), "Bearer")
		}
	}
}

func TestHTTP_EveryListener_UnknownPathAndWrongMethod_Problem(t *testing.T) {
	t.Parallel()
	e := newEdgeEnv(t)
	for _, base := range []string{e.api, e.metrics} {
		requireEdgeProblem(t, e.do(t, "GET", base+"/no/such/path", ""), http.StatusNotFound, "not_found", base)
		requireEdgeProblem(t, e.do(t, "GET", base+"/", ""), http.StatusNotFound, "not_found", base)
	}
	for _, c := range []struct{ method, url, allow string }{
		{"DELETE", e.api + "/v1/invoices", "GET, HEAD, POST"},
		{"PUT", e.api + "/v1/merchant", "GET, HEAD, PATCH"},
		{"GET", e.api + "/v1/admin/merchants", "POST"},
		{"GET", e.api + "/v1/admin/sweeps/retry", "POST"},
		{"POST", e.api + "/v1/admin/status", "GET, HEAD"},
		{"DELETE", e.api + "/v1/webhook-deliveries/1", "GET, HEAD"},
		{"POST", e.api + "/v1/blocks/latest", "GET, HEAD"},
		{"POST", e.api + "/v1/public/invoice", "GET, HEAD"},
		{"POST", e.api + "/healthz", "GET, HEAD"},
		{"POST", e.api + "/v1/openapi.json", "GET, HEAD"},
		{"POST", e.metrics + "/metrics", "GET, HEAD"},
	} {
		res := e.do(t, c.method, c.url, "")
		requireEdgeProblem(t, res, http.StatusMethodNotAllowed, "method_not_allowed", "%s %s", c.method, c.url)
		require.Equal(t, c.allow, res.header.Get("Allow"), "%s %s", c.method, c.url)
	}
}

func TestHTTP_EveryJSONBodyEndpoint_NonJSONContentType_415(t *testing.T) {
	t.Parallel()
	e := newEdgeEnv(t)
	merchant, operator := "Bearer "+e.apiKey, "Bearer "+e.admin
	endpoints := []struct {
		method, path, body string
		headers            []string
	}{
		{"POST", "/v1/invoices", `{"amount_wei":"5"}`, []string{"Authorization", merchant, "Idempotency-Key", "ct"}},
		{"PATCH", "/v1/merchant", `{"name":"renamed"}`, []string{"Authorization", merchant}},
		{"POST", "/v1/admin/merchants", `{"settlement_address":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}`, []string{"Authorization", operator}},
		{"POST", "/v1/webhook-deliveries/replay", `{"since":"2026-01-01T00:00:00Z"}`, []string{"Authorization", merchant}},
		{"POST", "/v1/admin/sweeps/retry", `{"invoice_ids":[999999]}`, []string{"Authorization", operator}},
	}
	for _, ep := range endpoints {
		for _, ct := range []string{"text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
			"multipart/form-data; boundary=x", "application/xml", ""} {
			headers := ep.headers
			if ct != "" {
				headers = append(slices.Clone(headers), "Content-Type", ct)
			}
			res := e.do(t, ep.method, ep.path, ep.body, headers...)
			requireEdgeProblem(t, res, http.StatusUnsupportedMediaType, "unsupported_media_type", "%s %s as %q", ep.method, ep.path, ct)
			accept := res.header.Get("Accept-Post") + res.header.Get("Accept-Patch")
			require.Equal(t, "application/json", accept)
		}
	}
	// Nothing was written: no second invoice, no second merchant, no rename.
	res := e.do(t, "GET", "/v1/invoices", "", "Authorization", merchant)
	require.Equal(t, http.StatusOK, res.status)
	var list struct{ Data []json.RawMessage }
	require.NoError(t, json.Unmarshal(res.body, &list))
	require.Len(t, list.Data, 3, "the env's native, token and fiat invoices, nothing more")
	res = e.do(t, "GET", "/v1/admin/merchants/2", "", "Authorization", operator)
	require.Equal(t, http.StatusNotFound, res.status, "%s", res.body)
	require.NotContains(t, string(e.do(t, "GET", "/v1/merchant", "", "Authorization", merchant).body), "renamed")

	// JSON with parameters, and +json types, are JSON.
	for i, ct := range []string{"application/json; charset=utf-8", "Application/JSON", "application/merge-patch+json"} {
		res := e.do(t, "POST", "/v1/invoices", `{"amount_wei":"5"}`, "Authorization", merchant,
			"Idempotency-Key", fmt.Sprint("json-", i), "Content-Type", ct)
		require.Equal(t, http.StatusCreated, res.status, "%q: %s", ct, res.body)
	}
}

func TestHTTP_EveryQueryEndpoint_UnparsableQuery_400(t *testing.T) {
	t.Parallel()
	e := newEdgeEnv(t)
	merchant := "Bearer " + e.apiKey
	for _, path := range []string{
		"/v1/invoices?status=EXPIRED;x",
		"/v1/invoices?limit=1;x",
		"/v1/invoices?limit=%zz",
		fmt.Sprintf("/v1/invoices/%d/qr.png?size=300;x", e.invoiceID),
		fmt.Sprintf("/v1/invoices/%d/qr.svg?a;b", e.invoiceID),
		"/v1/webhook-deliveries?status=failed;x",
		"/v1/addresses/0x70997970C51812dc3A010C7d01b50e0d17dc79C8/transactions?limit=1;x",
	} {
		requireEdgeProblem(t, e.do(t, "GET", path, "", "Authorization", merchant), http.StatusBadRequest, "invalid_query", path)
	}
}

func TestMetrics_ServedOnlyOnTheOperatorListener(t *testing.T) {
	t.Parallel()
	e := newEdgeEnv(t)
	requireEdgeProblem(t, e.do(t, "GET", "/metrics", ""), http.StatusNotFound, "not_found")
	res := e.do(t, "GET", e.metrics+"/metrics", "")
	require.Equal(t, http.StatusOK, res.status)
	require.Contains(t, string(res.body), `evmpay_invoices{status="PENDING"} 3`, "the env's native, token and fiat invoices")
	require.NotEqual(t, e.api, e.metrics)
}

func TestMetrics_EmptyAddress_NoOperatorListener(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	keys, err := newDevProvider(func(string) string { return "" }, dir)
	require.NoError(t, err)
	chain, err := startDevChain(freeAddr(t), time.Hour, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_ = chain.Run(cctx)
	})
	st, err := sqlite.Open(ctx, filepath.Join(dir, "payd.db"), sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a, err := newApp(ctx, st, appConfig{roles: roleSet{roleSettlement: true}, httpAddr: "127.0.0.1:0",
		chain: chainSpec{rpcURL: chain.url}, keys: keys, log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer a.close()
	require.Nil(t, a.metricsLn)
	require.Empty(t, a.metricsURL())
}

// /metrics has no authentication: an operator listener reachable beyond
// this machine (--metrics 0.0.0.0:PORT) is warned about at start; the
// loopback default is not.
func TestMetrics_OnEveryInterface_WarnedAtStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	keys, err := newDevProvider(func(string) string { return "" }, dir)
	require.NoError(t, err)
	chain, err := startDevChain(freeAddr(t), time.Hour, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = chain.backend.Close() })
	for _, tc := range []struct {
		addr string
		warn bool
	}{{"0.0.0.0:0", true}, {"127.0.0.1:0", false}} {
		st, err := sqlite.Open(ctx, filepath.Join(dir, "payd-"+strings.ReplaceAll(tc.addr, ":", "_")+".db"), sqlite.Config{})
		require.NoError(t, err)
		var logs syncBuffer
		a, err := newApp(ctx, st, appConfig{roles: roleSet{roleSettlement: true}, httpAddr: "127.0.0.1:0", metricsAddr: tc.addr,
			chain: chainSpec{rpcURL: chain.url}, keys: keys, log: slog.New(slog.NewTextHandler(&logs, nil))})
		require.NoError(t, err)
		a.close()
		st.Close()
		if tc.warn {
			require.Contains(t, logs.String(), "level=WARN")
			require.Contains(t, logs.String(), "without authentication beyond this machine")
		} else {
			require.NotContains(t, logs.String(), "without authentication")
		}
	}
}
