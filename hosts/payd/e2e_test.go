package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/wait"
	"github.com/evmpay/evmpay/webhook"
)

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeAddr returns a loopback address for a server a test starts later
// (often in a child process): a port outside the ephemeral range, which
// port 0 would give and an outgoing connection could take first.
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := loopbackPort()
	require.NoError(t, err)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// receiver is a merchant's webhook endpoint that verifies every signature.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	events []webhook.Payload
	bad    []string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.secret == "" {
			w.WriteHeader(http.StatusServiceUnavailable) // not ready: retried later
			return
		}
		if err := webhook.Verify(r.secret, req.Header, body, 5*time.Minute, time.Now()); err != nil {
			r.bad = append(r.bad, err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var p webhook.Payload
		if err := json.Unmarshal(body, &p); err != nil || p.ID != req.Header.Get("webhook-id") {
			r.bad = append(r.bad, "payload id does not match webhook-id")
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.events = append(r.events, p)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) setSecret(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret = s
}

// types returns the event types received for an invoice, in order, once
// each.
func (r *receiver) types(invoiceID int64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for _, e := range r.events {
		var inv struct {
			ID int64 `json:"id"`
		}
		if json.Unmarshal(e.Data, &inv) != nil || inv.ID != invoiceID || seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		out = append(out, e.Type)
	}
	return out
}

// apiClient talks to the invoice API as one merchant.
type apiClient struct {
	t    *testing.T
	base string
	key  string
}

// in is the same client for a subtest: its failures stop t.
func (c apiClient) in(t *testing.T) apiClient {
	c.t = t
	return c
}

func (c apiClient) do(method, path string, body any, headers map[string]string) (int, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(c.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(c.t, err)
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// waitHTTP polls url until it answers 200.
func waitHTTP(t *testing.T, url string, within time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second} // a connection the server never answers is retried
	require.Eventually(t, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, within, 100*time.Millisecond, "%s never answered 200", url)
}

var (
	apiKeyRe = regexp.MustCompile(`api_key\s+(evmpay_sk_[A-Za-z0-9_-]+)`)
	secretRe = regexp.MustCompile(`webhook_secret\s+(whsec_[A-Za-z0-9+/=]+)`)
)

// waitUntil polls cond every tick until it holds, in the test's own
// goroutine (the test kit's wait.Poll): unlike require.Eventually, a poll
// still running at the deadline cannot race the failure message, which
// failure builds from what the polls saw, and a poll may stop the test
// itself.
func waitUntil(t *testing.T, within, tick time.Duration, cond func() bool, failure func() string) {
	t.Helper()
	wait.Poll{Timeout: within, Interval: tick}.Until(t, "waiting", func() (bool, any) {
		if cond() {
			return true, nil
		}
		return false, failure()
	})
}

// payFlow creates an invoice, pays it with `payd pay`, and follows it to
// SETTLED, checking the settlement address and the webhooks on the way.
func payFlow(t *testing.T, ctx context.Context, api apiClient, chainAddr string, recv *receiver) {
	t.Helper()
	const amount = "750000000000000001" // 0.75 coin and one wei
	status, inv := api.do("POST", "/v1/invoices", map[string]any{"amount_wei": amount, "order_id": "e2e-1"},
		map[string]string{"Idempotency-Key": "e2e-" + fmt.Sprint(time.Now().UnixNano())})
	require.Equal(t, http.StatusCreated, status, "%v", inv)
	id := int64(inv["id"].(float64))
	uri := inv["payment_uri"].(string)

	_, merchant := api.do("GET", "/v1/merchant", nil, nil)
	settlementAddr := common.HexToAddress(merchant["settlement_address"].(string))
	eth, err := ethclient.DialContext(ctx, "http://"+chainAddr)
	require.NoError(t, err)
	defer eth.Close()
	before, err := eth.BalanceAt(ctx, settlementAddr, nil)
	require.NoError(t, err)

	var payOut bytes.Buffer
	paidAt := time.Now()
	require.NoError(t, run(ctx, []string{"pay", "--rpc", chainAddr, uri}, &payOut))
	require.Regexp(t, `^0x[0-9a-f]{64}\n$`, payOut.String(), "payd pay prints the transaction hash")

	seen := map[string]time.Duration{}
	waitUntil(t, 150*time.Second, 250*time.Millisecond, func() bool {
		_, got := api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
		s, _ := got["status"].(string)
		if _, ok := seen[s]; !ok {
			seen[s] = time.Since(paidAt)
			t.Logf("invoice %d is %s after %s (sweep %v)", id, s, seen[s].Round(100*time.Millisecond), got["sweep_status"])
		}
		return s == "SETTLED"
	}, func() string { return fmt.Sprintf("invoice never settled; statuses seen: %v", seen) })
	require.Contains(t, seen, "CONFIRMED", "the invoice went through CONFIRMED")

	_, got := api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
	require.Equal(t, "SWEPT", got["sweep_status"])
	require.Equal(t, amount, got["paid_wei"], "only the payer's transfer counts as payment")
	require.Equal(t, false, got["overpaid"])
	after, err := eth.BalanceAt(ctx, settlementAddr, nil)
	require.NoError(t, err)
	want, _ := new(big.Int).SetString(amount, 10)
	require.Equal(t, want.String(), new(big.Int).Sub(after, before).String(),
		"the settlement address received exactly the invoice amount")

	require.Eventually(t, func() bool {
		types := recv.types(id)
		return len(types) >= 3
	}, 30*time.Second, 100*time.Millisecond, "webhooks: got %v", recv.types(id))
	require.Equal(t, []string{"invoice.paid", "invoice.confirmed", "invoice.settled"}, recv.types(id))
	recv.mu.Lock()
	require.Empty(t, recv.bad, "every webhook carried a valid signature")
	recv.mu.Unlock()
	t.Logf("payment to SETTLED in %s", seen["SETTLED"].Round(100*time.Millisecond))
}

func TestDev_InvoicePaidConfirmedSettled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recv := newReceiver(t)
	httpAddr, proxyAddr, chainAddr, metricsAddr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	var out syncBuffer
	dataDir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--http", httpAddr, "--rpc-proxy", proxyAddr, "--chain-rpc", chainAddr, "--metrics", metricsAddr,
			"--data", dataDir, "--webhook-url", recv.srv.URL + "/hooks"}, &out)
	}()
	// Under the race detector, beside the package's other parallel tests,
	// the dev chain, migrations and the demo key's Argon2id take a while.
	waitHTTP(t, "http://"+httpAddr+"/healthz", 120*time.Second)
	key := apiKeyRe.FindStringSubmatch(out.String())
	secret := secretRe.FindStringSubmatch(out.String())
	require.NotNil(t, key, "the banner prints the demo api_key:\n%s", out.String())
	require.NotNil(t, secret, "the banner prints the demo webhook secret")
	recv.setSecret(secret[1])
	waitHTTP(t, "http://"+httpAddr+"/readyz", 10*time.Second)

	// The banner stays retrievable after the log scrolled it away: the
	// file it names holds it, readable by its owner only.
	bannerPath := filepath.Join(dataDir, devBannerFile)
	require.Contains(t, out.String(), bannerPath)
	saved, err := os.ReadFile(bannerPath)
	require.NoError(t, err)
	require.Contains(t, out.String(), string(saved))
	require.Contains(t, string(saved), key[1])
	fi, err := os.Stat(bannerPath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	requireDashboardSignInLink(t, string(saved))
	// Its three curl commands work as pasted, one after the other (each
	// with its own Idempotency-Key).
	curls := regexp.MustCompile(`(?s)curl -s -X POST .*?\}'`).FindAllString(string(saved), -1)
	require.Len(t, curls, 3, "a native, a token and a fiat-priced invoice:\n%s", saved)
	for _, cmd := range curls {
		var args []string
		for _, m := range regexp.MustCompile(`'[^']*'|\S+`).FindAllString(strings.ReplaceAll(cmd, "\\\n", " "), -1) {
			args = append(args, strings.Trim(m, "'"))
		}
		c := exec.Command(args[0], args[1:]...)
		got, err := c.Output()
		require.NoError(t, err, "%s", cmd)
		require.Contains(t, string(got), `"status":"PENDING"`, "%s\n%s", cmd, got)
	}

	payFlow(t, ctx, apiClient{t: t, base: "http://" + httpAddr, key: key[1]}, chainAddr, recv)

	// The RPC proxy answers in front of the dev chain, and blocks debug_.
	resp, err := http.Post("http://"+proxyAddr, "application/json",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":"0x539"}`, string(body))

	// Operations: the metrics the issue names, on the operator listener
	// (never the API's), and the operator status.
	require.Contains(t, httpGet(t, "http://"+httpAddr+"/metrics", ""), `"code":"not_found"`)
	require.Contains(t, out.String(), "http://"+metricsAddr+"/metrics", "the banner names the metrics listener")
	metrics := httpGet(t, "http://"+metricsAddr+"/metrics", "")
	for _, name := range []string{
		"evmpay_indexer_head_block", "evmpay_indexer_lag_blocks", "evmpay_settlement_lag_blocks",
		`evmpay_invoices{status="CONFIRMED"} 0`, "evmpay_sweep_swept_total 1", "evmpay_webhook_attempts_total",
		`evmpay_webhook_deliveries_failed_final{reason="endpoint_broken"} 0`, `evmpay_webhook_deliveries_failed_final{reason="attempts_exhausted"} 0`, "evmpay_sweep_wallet_balance_wei", "evmpay_sweep_wallet_low 0",
		"evmpay_rpcproxy_requests_total",
	} {
		require.True(t, strings.Contains(metrics, name), "/metrics lacks %s", name)
	}
	require.Contains(t, httpGet(t, "http://"+httpAddr+"/v1/admin/status", ""), `"code":"unauthorized"`)
	var status statusReport
	require.NoError(t, json.Unmarshal([]byte(httpGet(t, "http://"+httpAddr+"/v1/admin/status", devSecret(t, dataDir, "PAY_ADMIN_TOKEN"))), &status))
	require.True(t, status.Healthy, "%+v", status)
	require.NotNil(t, status.SweepWallet)
	require.False(t, status.SweepWallet.Low)

	tokenPayFlow(t, ctx, apiClient{t: t, base: "http://" + httpAddr, key: key[1]}, chainAddr, out.String(), recv)
	fiatPayFlow(t, ctx, apiClient{t: t, base: "http://" + httpAddr, key: key[1]}, chainAddr, recv)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "graceful shutdown returns nil")
	case <-time.After(30 * time.Second):
		t.Fatal("payd dev did not stop within 30 s of cancellation")
	}
}

// httpGet returns a GET's body, with a bearer token when one is given.
func httpGet(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// devSecret reads a generated development secret of `payd dev`.
func devSecret(t *testing.T, dataDir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "dev-secrets.json"))
	require.NoError(t, err)
	var m map[string]string
	require.NoError(t, json.Unmarshal(b, &m))
	return m[name]
}
