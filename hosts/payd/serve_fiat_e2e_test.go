package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// TestServe_FiatPricing_OnPostgreSQL runs `payd serve` (every role, one
// process) on PostgreSQL and `payd devchain`, pricing in US dollars from
// three exchanges replayed by local servers (their documented answers,
// with the test's prices and trade times): a stale source is dropped and
// shown as such, a source that is down leaves the other two pricing, a
// native payment of a fiat invoice settles with the
// price and the payment's value in its webhooks, and with every source
// down the API answers 503 rate_unavailable, creates nothing, and takes
// the same Idempotency-Key once the rates are back. With fewer than two
// crypto sources serve refuses to start.
func TestServe_FiatPricing_OnPostgreSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	refused := exec.Command(paydBinary(t), "serve", "--roles", "all")
	refused.Env = append(os.Environ(), "DATABASE_URL=postgres://unused", "RPC_URL=http://127.0.0.1:1", "PRICING_SOURCES=coinbase,ecb")
	out, err := refused.CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "at least two independent", "one crypto source is refused")

	dbURL := pgtest.URL(t)
	secrets := t.TempDir()
	m, err := hdwallet.GenerateMnemonic(24)
	require.NoError(t, err)
	funder, err := crypto.GenerateKey()
	require.NoError(t, err)
	prices := map[string]string{"ETH/USD": "2500.00", "ETH/EUR": "2000.00"}
	coinbase, kraken, bitstamp := newRateReplay(t, "coinbase", prices), newRateReplay(t, "kraken", prices), newRateReplay(t, "bitstamp", prices)
	chainAddr := freeAddr(t)
	startProcess(t, "devchain", nil, "devchain", "--chain-rpc", chainAddr, "--fund", crypto.PubkeyToAddress(funder.PublicKey).Hex())
	env := []string{"DATABASE_URL=" + dbURL, "RPC_URL=http://" + chainAddr, "CHAIN_ID=1337", "CONFIRMATIONS=3",
		"WEBHOOK_ALLOW_PRIVATE_NETWORKS=true",
		"PAY_MNEMONIC_FILE=" + writeSecret(t, secrets, "mnemonic", m.Phrase()),
		"PAY_SECRET_KEY_FILE=" + writeSecret(t, secrets, "secret-key", hex.EncodeToString(crypto.Keccak256([]byte(t.Name())))),
		"GAS_FUNDER_PRIVATE_KEY_FILE=" + writeSecret(t, secrets, "funder", hex.EncodeToString(crypto.FromECDSA(funder))),
		"PAY_ADMIN_TOKEN_FILE=" + writeSecret(t, secrets, "admin-token", "operator-token-for-tests"),
		"PRICING_SOURCES=coinbase,kraken,bitstamp", "PRICING_COINBASE_URL=" + coinbase.srv.URL,
		"PRICING_KRAKEN_URL=" + kraken.srv.URL, "PRICING_BITSTAMP_URL=" + bitstamp.srv.URL,
		"PRICING_CURRENCIES=USD", "PRICING_MAX_AGE=6s", "PRICING_REFRESH=1s",
	}
	waitRPC(t, "http://"+chainAddr)
	apiAddr, metricsAddr := freeAddr(t), freeAddr(t)
	startProcess(t, "serve", env, "serve", "--roles", "all", "--http", apiAddr, "--rpc-proxy", freeAddr(t), "--metrics", metricsAddr)
	waitHTTP(t, "http://"+apiAddr+"/readyz", 90*time.Second)

	recv := newReceiver(t)
	settle, err := crypto.GenerateKey()
	require.NoError(t, err)
	settlement := crypto.PubkeyToAddress(settle.PublicKey)
	create := exec.Command(paydBinary(t), "merchants", "create", "--webhook-url", recv.srv.URL+"/hooks",
		"--settlement-address", settlement.Hex(), "--name", "shop")
	create.Env = append(os.Environ(), env...)
	out, err = create.CombinedOutput()
	require.NoError(t, err, "%s", out)
	key := regexp.MustCompile(`api_key=(\S+)`).FindSubmatch(out)
	secret := regexp.MustCompile(`webhook_secret=(\S+)`).FindSubmatch(out)
	recv.setSecret(string(secret[1]))
	api := apiClient{t: t, base: "http://" + apiAddr, key: string(key[1])}
	op := apiClient{t: t, base: "http://" + apiAddr, key: "operator-token-for-tests"}

	// A stale source is dropped (its trades are 10 minutes old), and the
	// other two still price; the operator sees why. Then a source down (and
	// the stale one fresh again): the other two price.
	staleThenDown(t, op, coinbase, kraken, func() {
		_, st := op.do("GET", "/v1/admin/status", nil, nil)
		require.Equal(t, true, observation(st, "ETH/USD", "kraken")["used"])
		require.Equal(t, true, observation(st, "ETH/USD", "bitstamp")["used"])
		require.Contains(t, httpGet(t, "http://"+metricsAddr+"/metrics", ""), `evmpay_pricing_source_dropped_total{pair="ETH/USD",reason="stale",source="coinbase"}`)
		require.Contains(t, httpGet(t, "http://"+metricsAddr+"/metrics", ""), `evmpay_pricing_source_up{source="kraken"} 1`)
	})
	require.Contains(t, httpGet(t, "http://"+metricsAddr+"/metrics", ""), `evmpay_pricing_source_up{source="kraken"} 0`)

	// A native payment of a fiat invoice: 10.00 USD at 2,500 USD per ETH.
	code, inv := api.do("POST", "/v1/invoices", map[string]any{"price": map[string]any{"amount": "10.00", "currency": "USD"}},
		map[string]string{"Idempotency-Key": "fiat-1"})
	require.Equal(t, http.StatusCreated, code, "%v", inv)
	q := inv["quotes"].([]any)[0].(map[string]any)
	require.Equal(t, "4000000000000000", q["amount"])
	require.Equal(t, "2500", q["rate"], "the median of the two fresh sources")
	var sources []string
	for _, s := range q["sources"].([]any) {
		sources = append(sources, s.(map[string]any)["name"].(string))
	}
	require.ElementsMatch(t, []string{"coinbase", "bitstamp"}, sources, "the source that is down is not among them")
	kraken.setDown(false)
	id := int64(inv["id"].(float64))
	eth, err := ethclient.DialContext(ctx, "http://"+chainAddr)
	require.NoError(t, err)
	defer eth.Close()
	require.NoError(t, run(ctx, []string{"pay", "--rpc", chainAddr, q["payment_uri"].(string)}, &syncBuffer{}))
	waitUntil(t, 120*time.Second, 250*time.Millisecond, func() bool {
		_, got := api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
		return got["status"] == "SETTLED"
	}, func() string { return "the fiat invoice never settled" })
	_, got := api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
	require.Equal(t, map[string]any{"amount": "10.00", "currency": "USD"}, got["paid_value"])
	require.Equal(t, map[string]any{"symbol": "ETH", "address": nil, "decimals": float64(18)}, got["sweep_asset"])
	bal, err := eth.BalanceAt(ctx, settlement, nil)
	require.NoError(t, err)
	require.Equal(t, big.NewInt(4_000_000_000_000_000), bal, "the merchant received exactly the quoted amount")
	require.Eventually(t, func() bool { return len(recv.types(id)) >= 3 }, 30*time.Second, 100*time.Millisecond)
	require.Equal(t, []string{"invoice.paid", "invoice.confirmed", "invoice.settled"}, recv.types(id))
	paid := recv.data(id, "invoice.paid")
	require.Equal(t, map[string]any{"amount": "10.00", "currency": "USD"}, paid["price"])
	require.Equal(t, map[string]any{"amount": "10.00", "currency": "USD"}, paid["paid_value"])
	require.Equal(t, map[string]any{"amount": "10.00", "currency": "USD"}, paid["payments"].([]any)[0].(map[string]any)["value"],
		"the webhook carries each payment's value")

	// Every source down: once the last good rate is older than
	// PRICING_MAX_AGE, 503 rate_unavailable, nothing created, key reusable.
	for _, r := range []*rateReplay{coinbase, kraken, bitstamp} {
		r.setDown(true)
	}
	var res edgeResult
	probe := 0
	waitUntil(t, 30*time.Second, 250*time.Millisecond, func() bool {
		probe++ // a key of its own each time: the last good rate may still stand in for a few seconds
		res = postInvoice(t, api, `{"price":{"amount":"5.00","currency":"USD"}}`, fmt.Sprintf("probe-%d", probe))
		return res.status == http.StatusServiceUnavailable
	}, func() string { return fmt.Sprintf("still %d: %s", res.status, res.body) })
	_, before := api.do("GET", "/v1/invoices", nil, nil)
	res = postInvoice(t, api, `{"price":{"amount":"5.00","currency":"USD"}}`, "fiat-503")
	require.Equal(t, http.StatusServiceUnavailable, res.status, "%s", res.body)
	var p map[string]any
	require.NoError(t, json.Unmarshal(res.body, &p))
	require.Equal(t, "rate_unavailable", p["code"])
	require.Regexp(t, `^[1-9][0-9]*$`, res.header.Get("Retry-After"))
	_, after := api.do("GET", "/v1/invoices", nil, nil)
	require.Equal(t, len(before["data"].([]any)), len(after["data"].([]any)), "nothing created")
	_, st := op.do("GET", "/v1/admin/status", nil, nil)
	for _, s := range st["pricing"].(map[string]any)["sources"].([]any) {
		require.Equal(t, false, s.(map[string]any)["healthy"], "%v", s)
	}
	for _, r := range []*rateReplay{coinbase, kraken, bitstamp} {
		r.setDown(false)
	}
	waitUntil(t, 30*time.Second, 250*time.Millisecond, func() bool {
		res = postInvoice(t, api, `{"price":{"amount":"5.00","currency":"USD"}}`, "fiat-503")
		return res.status == http.StatusCreated
	}, func() string { return fmt.Sprintf("still %d: %s", res.status, res.body) })
	require.Contains(t, string(res.body), `"price":{"amount":"5.00","currency":"USD"}`, "the same key, once the rates are back")
}

// staleThenDown makes stale's trades 10 minutes old and waits until the
// operator's status shows it dropped as stale (then runs between, when not
// nil); then makes it fresh again, takes down down, and waits until stale
// is used again and down's last rate has aged out.
func staleThenDown(t *testing.T, op apiClient, stale, down *rateReplay, between func()) {
	t.Helper()
	stale.setAge(10 * time.Minute)
	waitUntil(t, 30*time.Second, 250*time.Millisecond, func() bool {
		_, st := op.do("GET", "/v1/admin/status", nil, nil)
		return observation(st, "ETH/USD", stale.exchange)["dropped"] == "stale"
	}, func() string { return stale.exchange + " was never dropped as stale" })
	if between != nil {
		between()
	}
	stale.setAge(0)
	down.setDown(true)
	waitUntil(t, 30*time.Second, 250*time.Millisecond, func() bool {
		_, st := op.do("GET", "/v1/admin/status", nil, nil)
		return observation(st, "ETH/USD", stale.exchange)["used"] == true && observation(st, "ETH/USD", down.exchange)["dropped"] == "stale"
	}, func() string { return down.exchange + "'s last rate never aged out while it was down" })
}

// postInvoice posts body as a new invoice with an Idempotency-Key.
func postInvoice(t *testing.T, api apiClient, body, key string) edgeResult {
	t.Helper()
	req, err := http.NewRequest("POST", api.base+"/v1/invoices", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+api.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return edgeResult{status: resp.StatusCode, header: resp.Header, body: b}
}

// data returns the data of the invoice's first event of type typ the
// receiver got.
func (r *receiver) data(invoiceID int64, typ string) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		var d map[string]any
		if e.Type == typ && json.Unmarshal(e.Data, &d) == nil && d["id"] == float64(invoiceID) {
			return d
		}
	}
	return nil
}

// observation finds a source's observation of a pair in /v1/admin/status.
func observation(status map[string]any, pair, source string) map[string]any {
	p, _ := status["pricing"].(map[string]any)
	rates, _ := p["rates"].([]any)
	for _, r := range rates {
		r := r.(map[string]any)
		if r["pair"] != pair {
			continue
		}
		for _, o := range r["observations"].([]any) {
			if o := o.(map[string]any); o["source"] == source {
				return o
			}
		}
	}
	return map[string]any{}
}
