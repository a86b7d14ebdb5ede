package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/sweep"
)

// secondDevChain is the id of the second dev chain of the tests of a
// process serving several chains.
const secondDevChain = 1338

// twoChains is one payd process serving two dev chains (1337 from the
// environment's settings, 1338 from CHAINS_FILE) on one PostgreSQL
// database, with one merchant.
type twoChains struct {
	t      *testing.T
	chains map[uint64]*devChain
	app    *app
	cfg    appConfig // app's
	api    apiClient
	settle common.Address
	st     store.Store
	dbURL  string
	// second is where the second chain's node URLs lead (proxies
	// whose node point changes); secondNodes are those proxies.
	second      atomic.Pointer[url.URL]
	secondNodes []*httptest.Server
	funder      common.Address
}

func newTwoChains(t *testing.T, roles roleSet, opt func(*appConfig)) *twoChains {
	t.Helper()
	return newTwoChainsNodes(t, 1, roles, opt)
}

// newTwoChainsNodes is newTwoChains with the second chain reached through
// nodes node URLs (two or more: a node pool).
func newTwoChainsNodes(t *testing.T, nodes int, roles roleSet, opt func(*appConfig)) *twoChains {
	t.Helper()
	ctx := context.Background()
	keys, err := newDevProvider(func(string) string { return "" }, t.TempDir())
	require.NoError(t, err)
	funder, err := loadGasFunder(ctx, keys)
	require.NoError(t, err)
	r := &twoChains{t: t, chains: map[uint64]*devChain{}, dbURL: pgtest.URL(t), funder: crypto.PubkeyToAddress(funder.PublicKey)}
	db, err := postgres.Open(ctx, r.dbURL, postgres.Config{MaxOpenConns: 40})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	r.st = db
	for _, id := range []uint64{devChainID, secondDevChain} {
		r.chains[id] = r.startChain(id)
	}
	r.point(r.chains[secondDevChain])
	var urls []string
	for range nodes {
		proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(r.second.Load()) }})
		t.Cleanup(proxy.Close)
		r.secondNodes = append(r.secondNodes, proxy)
		urls = append(urls, proxy.URL)
	}
	chainsFile := filepath.Join(t.TempDir(), "chains.json")
	require.NoError(t, os.WriteFile(chainsFile, []byte(fmt.Sprintf(`{"chains": [
		{"chain_id": %d, "rpc_url": %q, "name": "second dev chain", "native_symbol": "TEST", "confirmations": 3}]}`,
		secondDevChain, strings.Join(urls, ","))), 0o600))
	spec, errs := readChainSpec(envOf(map[string]string{"RPC_URL": "x", "CHAIN_ID": "1337"}))
	require.Empty(t, errs)
	others, err := readChainsFile(chainsFile, spec)
	require.NoError(t, err)

	cfg := appConfig{
		roles:           roles,
		httpAddr:        "127.0.0.1:0",
		proxyAddr:       "127.0.0.1:0",
		metricsAddr:     "127.0.0.1:0",
		chain:           chainSpec{rpcURL: r.chains[devChainID].url, chainID: devChainID, confirmations: 2},
		keys:            keys,
		sweepPolicy:     sweep.PolicySponsor,
		archiveEvery:    time.Hour,
		proxyRate:       50,
		proxyBurst:      100,
		chains:          others,
		chainCheckEvery: time.Second,
		log:             slog.New(slog.NewTextHandler(testLog{t}, nil)),
	}
	if opt != nil {
		opt(&cfg)
	}
	r.cfg = cfg
	r.app = r.start(cfg)
	if r.app.invoices != nil {
		k, err := crypto.GenerateKey()
		require.NoError(t, err)
		r.settle = crypto.PubkeyToAddress(k.PublicKey)
		m, err := r.app.invoices.CreateMerchant(ctx, invoice.MerchantParams{Name: "shop", SettlementAddress: r.settle})
		require.NoError(t, err)
		r.api = apiClient{t: t, base: r.app.httpURL(), key: m.APIKey}
	}
	return r
}

// startChain starts a dev chain of id sealing a block every 300 ms, the
// gas funder and extra funded at genesis.
func (r *twoChains) startChain(id uint64, extra ...common.Address) *devChain {
	r.t.Helper()
	c, err := startDevChain(freeAddr(r.t), 300*time.Millisecond, append([]common.Address{r.funder}, extra...), simchain.WithChainID(id))
	require.NoError(r.t, err)
	cctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(cctx) }()
	r.t.Cleanup(func() { stop(); <-done })
	return c
}

// point sends the second chain's RPC requests to c's node.
func (r *twoChains) point(c *devChain) {
	u, err := url.Parse(c.url)
	require.NoError(r.t, err)
	r.second.Store(u)
}

// create makes an invoice with body and returns it.
func (r *twoChains) create(body map[string]any) map[string]any {
	r.t.Helper()
	status, inv := r.api.do("POST", "/v1/invoices", body, map[string]string{"Idempotency-Key": fmt.Sprint(time.Now().UnixNano())})
	require.Equal(r.t, http.StatusCreated, status, "%v", inv)
	return inv
}

// start runs a payd with cfg on the test's database until the test ends.
func (r *twoChains) start(cfg appConfig) *app {
	t := r.t
	t.Helper()
	a, err := newApp(context.Background(), r.st, cfg)
	require.NoError(t, err)
	runUntilEnd(t, context.Background(), "payd", a.run)
	return a
}

// runUntilEnd runs run in the background until the test ends, then
// cancels it and requires it to return nil within 30 s.
func runUntilEnd(t *testing.T, ctx context.Context, what string, run func(context.Context) error) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error(what + " did not stop")
		}
	})
}

// pay pays a payment URI from a dev account on chain id.
func (r *twoChains) pay(id uint64, uri string) {
	r.t.Helper()
	var out strings.Builder
	require.NoError(r.t, run(context.Background(), []string{"pay", "--rpc", r.chains[id].url, uri}, &out))
}

// waitStatus waits until invoice inv is in status want.
func (r *twoChains) waitStatus(inv map[string]any, want string, within time.Duration) map[string]any {
	r.t.Helper()
	var got map[string]any
	waitUntil(r.t, within, 200*time.Millisecond, func() bool {
		_, got = r.api.do("GET", fmt.Sprintf("/v1/invoices/%d", int64(inv["id"].(float64))), nil, nil)
		return got["status"] == want
	}, func() string { return fmt.Sprintf("invoice %v never reached %s: %v", inv["id"], want, got) })
	return got
}

func (r *twoChains) balance(id uint64, a common.Address) *big.Int {
	r.t.Helper()
	c, err := ethclient.Dial(r.chains[id].url)
	require.NoError(r.t, err)
	defer c.Close()
	b, err := c.BalanceAt(context.Background(), a, nil)
	require.NoError(r.t, err)
	return b
}

// One payd process serves two chains: an invoice on each (the first
// chain's by default, the second's by chain_id) is paid on its chain,
// settled with that chain's confirmations and swept on that chain to the
// merchant; each chain's ledger reconciles.
func TestServe_TwoChainsInOneProcess_EachSettlesAndSweepsOnItsChain(t *testing.T) {
	t.Parallel()
	r := newTwoChains(t, roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleSweep: true, roleWebhooks: true}, nil)
	require.ElementsMatch(t, []string{"evmpay@1337", "evmpay@1338"}, workerNames(r.app, "evmpay@"))

	first := r.create(map[string]any{"amount_wei": "500000000000000000"})
	second := r.create(map[string]any{"amount_wei": "700000000000000000", "chain_id": secondDevChain})
	require.EqualValues(t, devChainID, first["chain_id"])
	require.EqualValues(t, secondDevChain, second["chain_id"])
	require.Contains(t, second["payment_uri"], "@1338")
	_, pub := r.api.do("GET", "/v1/public/invoice", nil, map[string]string{"Authorization": "Bearer " + second["lookup_token"].(string)})
	require.EqualValues(t, 3, pub["confirmations_required"], "the second chain's own threshold")

	r.pay(devChainID, first["payment_uri"].(string))
	r.pay(secondDevChain, second["payment_uri"].(string))
	r.waitStatus(first, store.StatusSettled, 120*time.Second)
	got := r.waitStatus(second, store.StatusSettled, 120*time.Second)
	require.Equal(t, "700000000000000000", got["paid_wei"])

	// Each chain's sweep paid the merchant on its own chain, exactly.
	require.Equal(t, "500000000000000000", r.balance(devChainID, r.settle).String())
	require.Equal(t, "700000000000000000", r.balance(secondDevChain, r.settle).String())
	for id, c := range r.chains {
		// `payd reconcile` with RPC_URL naming the chain: its ledger.
		var out strings.Builder
		err := reconcile(context.Background(), []string{"--all"}, envOf(map[string]string{"DATABASE_URL": r.dbURL, "RPC_URL": c.url}), &out)
		require.NoError(t, err, "chain %d: %s", id, out.String())
		require.Contains(t, out.String(), "0 differ", "chain %d", id)
	}
}

// workerNames are the app's workers whose names start with prefix.
func workerNames(a *app, prefix string) []string {
	var out []string
	for _, w := range a.workers {
		if strings.HasPrefix(w.name, prefix) {
			out = append(out, w.name)
		}
	}
	return out
}

// When the second chain's node turns out to serve another chain (same id,
// another genesis), only that chain's parts stop: /readyz and the status

// waitAnotherChain waits until /readyz names the second chain's node as
// serving another chain.
func (r *twoChains) waitAnotherChain() {
	t := r.t
	waitUntil(t, 60*time.Second, 200*time.Millisecond, func() bool {
		code, body := getBody(t, r.app.httpURL()+"/readyz", "")
		return code == http.StatusServiceUnavailable && strings.Contains(body, `"chain_identity@1338":"another_chain"`)
	}, func() string { _, body := getBody(t, r.app.httpURL()+"/readyz", ""); return "readyz: " + body })
}

// report name it, and the first chain's invoices still settle.
func TestServe_TwoChains_AnotherChainBehindOneURL_StopsOnlyThatChain(t *testing.T) {
	t.Parallel()
	r := newTwoChains(t, roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleSweep: true, roleWebhooks: true}, nil)
	other := r.startChain(secondDevChain, common.HexToAddress("0x00000000000000000000000000000000000000aa"))
	r.point(other)
	r.waitAnotherChain()

	inv := r.create(map[string]any{"amount_wei": "300000000000000000"})
	r.pay(devChainID, inv["payment_uri"].(string))
	r.waitStatus(inv, store.StatusSettled, 120*time.Second)
	require.Equal(t, "300000000000000000", r.balance(devChainID, r.settle).String())

	status, _ := r.unhealthyOtherChain("another_chain")
	require.Nil(t, status["chain"].(map[string]any)["problem"], "the first chain is fine")
}

// unhealthyOtherChain reads /v1/admin/status, requires it unhealthy with
// the second chain's problem, and returns the report and that chain's.
func (r *twoChains) unhealthyOtherChain(problem string) (status, other map[string]any) {
	r.t.Helper()
	op := apiClient{t: r.t, base: r.app.httpURL(), key: r.app.adminToken}
	code, status := op.do("GET", "/v1/admin/status", nil, nil)
	require.Equal(r.t, http.StatusOK, code)
	require.Equal(r.t, false, status["healthy"])
	others := status["other_chains"].([]any)
	require.Len(r.t, others, 1)
	other = others[0].(map[string]any)
	require.Equal(r.t, problem, other["problem"])
	return status, other
}

// The swap found by the second chain's indexer before its identity guard
// checked (here the guard's interval is an hour, and no sweep checks it
// before a broadcast): the chain's parts stop, and /readyz still names what
// its node serves. (The guard's loop stopped with the parts, and /readyz
// kept its last, good check: a two-chain test once waited a minute for it
// under load.) The swap comes as soon as the indexer has a cursor, while
// only the chain's first blocks are indexed: the indexer once took that
// for a reorg deeper than MaxReorgDepth and stopped the whole process.
func TestServe_TwoChains_AnotherChainFoundByTheIndexer_ReadyzNamesIt(t *testing.T) {
	t.Parallel()
	r := newTwoChains(t, roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleWebhooks: true},
		func(c *appConfig) { c.chainCheckEvery = time.Hour })
	waitUntil(t, 60*time.Second, 20*time.Millisecond, func() bool {
		_, err := r.st.Chain(secondDevChain).GetCursor(context.Background(), store.CursorIndexer)
		return err == nil
	}, func() string { return "the second chain's indexer has a cursor" })
	other := r.startChain(secondDevChain, common.HexToAddress("0x00000000000000000000000000000000000000aa"))
	r.point(other)
	r.waitAnotherChain()
}

// A payment sent on the wrong one of the two chains is recorded there,
// flags the invoice, and is refunded on that chain from the deposit
// address (reason wrong_network); the invoice is still paid on its own
// chain, and both chains' ledgers reconcile. The second chain is behind a
// pool of two node URLs, as when this test once caught a replaced gas
// top-up whose original was mined being marked FAILED (docs/chains.md).
func TestServe_TwoChains_WrongNetworkPaymentRecordedAndRefunded(t *testing.T) {
	t.Parallel()
	r := newTwoChainsNodes(t, 2, roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleSweep: true, roleWebhooks: true}, nil)
	const amount = "400000000000000000"
	inv := r.create(map[string]any{"amount_wei": amount})
	id := int64(inv["id"].(float64))
	deposit := inv["deposit_address"].(string)
	// The payer's wallet was on the other chain: the same address there.
	r.pay(secondDevChain, fmt.Sprintf("ethereum:%s@%d?value=%s", deposit, secondDevChain, amount))
	var got map[string]any
	waitUntil(t, 60*time.Second, 200*time.Millisecond, func() bool {
		_, got = r.api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
		return got["needs_attention"] == true
	}, func() string { return fmt.Sprintf("the wrong-network payment was not seen: %v", got) })
	require.Equal(t, store.StatusPending, got["status"], "not credited")
	ps := got["payments"].([]any)
	require.Len(t, ps, 1)
	p := ps[0].(map[string]any)
	require.Equal(t, true, p["wrong_network"])
	require.EqualValues(t, secondDevChain, p["chain_id"])
	payer := common.HexToAddress(p["from"].(string))

	// Refunded on the chain it arrived on, to a fresh address.
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	back := crypto.PubkeyToAddress(k.PublicKey)
	var refund map[string]any
	waitUntil(t, 60*time.Second, 300*time.Millisecond, func() bool {
		// Refundable once the payment has its chain's 3 confirmations.
		var code int
		code, refund = r.api.do("POST", fmt.Sprintf("/v1/invoices/%d/refunds", id),
			map[string]any{"reason": "wrong_network", "destination": back.Hex()}, map[string]string{"Idempotency-Key": "wn-1"})
		return code == http.StatusCreated
	}, func() string { return fmt.Sprintf("refund: %v", refund) })
	require.EqualValues(t, secondDevChain, refund["chain_id"])
	require.Equal(t, amount, refund["amount"])
	require.Equal(t, "TEST", refund["asset"].(map[string]any)["symbol"], "the second chain's coin")
	rid := int64(refund["id"].(float64))
	waitUntil(t, 90*time.Second, 300*time.Millisecond, func() bool {
		_, refund = r.api.do("GET", fmt.Sprintf("/v1/refunds/%d", rid), nil, nil)
		return refund["status"] == store.OutboundConfirmed
	}, func() string { return fmt.Sprintf("refund: %v", refund) })
	require.Equal(t, "deposit", refund["source"], "sent from the deposit address on that chain")
	require.Equal(t, amount, r.balance(secondDevChain, back).String())
	require.Zero(t, r.balance(devChainID, back).Sign())
	_ = payer

	// A second wrong-network refund finds nothing left.
	code, again := r.api.do("POST", fmt.Sprintf("/v1/invoices/%d/refunds", id),
		map[string]any{"reason": "wrong_network", "destination": back.Hex()}, map[string]string{"Idempotency-Key": "wn-2"})
	require.Equal(t, http.StatusUnprocessableEntity, code, "%v", again)
	require.Equal(t, "nothing_to_refund", again["code"])

	// The invoice is still paid on its own chain.
	r.pay(devChainID, inv["payment_uri"].(string))
	r.waitStatus(inv, store.StatusSettled, 120*time.Second)
	require.Equal(t, amount, r.balance(devChainID, r.settle).String())
	require.Zero(t, r.balance(secondDevChain, r.settle).Sign(), "nothing of the wrong-network money reached the merchant")
	for id, c := range r.chains {
		var out strings.Builder
		err := reconcile(context.Background(), []string{"--all"}, envOf(map[string]string{"DATABASE_URL": r.dbURL, "RPC_URL": c.url}), &out)
		require.NoError(t, err, "chain %d: %s", id, out.String())
	}
}

// A fiat invoice of the first chain accepting the second chain's coin too
// is paid on the second: it moves there (its chain_id, asset and amount
// become that quote's), settles with that chain's confirmations and is
// swept to the merchant there. A later payment on the first chain is a
// wrong-network one.
func TestServe_TwoChains_FiatInvoicePaidOnTheOtherQuotedChain(t *testing.T) {
	t.Parallel()
	r := newTwoChains(t, roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleSweep: true, roleWebhooks: true},
		func(c *appConfig) { c.pricing = pricingConfig{dev: true, symbols: map[string]string{"TEST": "ETH"}} })
	inv := r.create(map[string]any{"price": map[string]string{"amount": "20.00", "currency": "EUR"},
		"accept": []string{"ETH", fmt.Sprintf("TEST@%d", secondDevChain)}})
	require.EqualValues(t, devChainID, inv["chain_id"])
	qs := inv["quotes"].([]any)
	require.Len(t, qs, 2)
	other := qs[1].(map[string]any)
	require.EqualValues(t, secondDevChain, other["chain_id"])
	require.Contains(t, other["payment_uri"], "@1338")

	r.pay(secondDevChain, other["payment_uri"].(string))
	got := r.waitStatus(inv, store.StatusSettled, 120*time.Second)
	require.EqualValues(t, secondDevChain, got["chain_id"], "paid on the second chain: the invoice moved there")
	require.Equal(t, "TEST", got["asset"].(map[string]any)["symbol"])
	require.Equal(t, other["amount"], got["amount"])
	require.Equal(t, other["amount"], r.balance(secondDevChain, r.settle).String(), "swept on the second chain")
	require.Zero(t, r.balance(devChainID, r.settle).Sign())

	// The first chain's quote no longer takes money: a wrong network now.
	first := qs[0].(map[string]any)
	r.pay(devChainID, first["payment_uri"].(string))
	waitUntil(t, 60*time.Second, 200*time.Millisecond, func() bool {
		_, got = r.api.do("GET", fmt.Sprintf("/v1/invoices/%d", int64(inv["id"].(float64))), nil, nil)
		return got["needs_attention"] == true
	}, func() string { return fmt.Sprintf("the later payment was not flagged: %v", got) })
	require.Equal(t, store.StatusSettled, got["status"])
	for id, c := range r.chains {
		var out strings.Builder
		err := reconcile(context.Background(), nil, envOf(map[string]string{"DATABASE_URL": r.dbURL, "RPC_URL": c.url}), &out)
		require.NoError(t, err, "chain %d: %s", id, out.String())
	}
}

// The second chain of a process is reached through two nodes (a node
// pool, as the first chain's): one of them killed mid-run, its invoices
// still settle and are swept once; the status report shows the dead node.
func TestServe_TwoChains_OneOfTheSecondChainsNodesKilled_ItsInvoicesStillSettle(t *testing.T) {
	t.Parallel()
	r := newTwoChainsNodes(t, 2, roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleSweep: true, roleWebhooks: true}, nil)
	before := r.create(map[string]any{"amount_wei": "100000000000000000", "chain_id": secondDevChain})
	r.pay(secondDevChain, before["payment_uri"].(string))
	r.secondNodes[1].CloseClientConnections()
	r.secondNodes[1].Close()
	after := r.create(map[string]any{"amount_wei": "200000000000000000", "chain_id": secondDevChain})
	r.pay(secondDevChain, after["payment_uri"].(string))
	r.waitStatus(before, store.StatusSettled, 120*time.Second)
	r.waitStatus(after, store.StatusSettled, 120*time.Second)
	require.Equal(t, "300000000000000000", r.balance(secondDevChain, r.settle).String(), "each swept once, exactly")

	op := apiClient{t: t, base: r.app.httpURL(), key: r.app.adminToken}
	var status map[string]any
	waitUntil(t, 30*time.Second, 200*time.Millisecond, func() bool {
		_, status = op.do("GET", "/v1/admin/status", nil, nil)
		others, _ := status["other_chains"].([]any)
		if len(others) != 1 {
			return false
		}
		nodes, _ := others[0].(map[string]any)["nodes"].([]any)
		up := 0
		for _, n := range nodes {
			if n.(map[string]any)["up"] == true {
				up++
			}
		}
		return len(nodes) == 2 && up == 1
	}, func() string { return fmt.Sprintf("the status report: %v", status) })
	ps, err := r.st.Chain(secondDevChain).ListPaymentsByInvoice(context.Background(), int64(after["id"].(float64)))
	require.NoError(t, err)
	require.Len(t, ps, 1, "no block seen twice, none lost")
}

// The RPC proxy fronts every chain the process runs: the first at /, the
// second at /chains/1338, each through its own limits and node; a path of
// a chain it does not serve is 404, never the first chain's answer; and
// ethers.js, a client nobody here wrote, pays on the second chain through
// it.
func TestServe_TwoChains_RPCProxyFrontsEachChain(t *testing.T) {
	t.Parallel()
	nodePath := ethersNodePath(t)
	r := newTwoChains(t, roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleWebhooks: true}, nil)
	base := r.app.proxyURL()
	rpc := func(path, method string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(base+path, "application/json",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":[]}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		if resp.StatusCode != http.StatusNotFound {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		}
		return resp.StatusCode, out
	}
	for path, want := range map[string]string{"/": "0x539", "/chains/1338": "0x53a"} {
		code, out := rpc(path, "eth_chainId")
		require.Equal(t, http.StatusOK, code, path)
		require.Equal(t, want, out["result"], path)
	}
	code, out := rpc("/chains/1338", "debug_traceBlockByNumber")
	require.Equal(t, http.StatusForbidden, code)
	require.EqualValues(t, -32601, out["error"].(map[string]any)["code"], "blocked on every chain")
	code, _ = rpc("/chains/9000", "eth_chainId")
	require.Equal(t, http.StatusNotFound, code, "not the first chain's answer")

	cmd := exec.Command("node", filepath.Join("testdata", "ethers_pay.cjs"), base+"/chains/1338", "3", "7")
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath)
	got, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", got)
	require.Contains(t, string(got), `"mined":3,"errors":0`)
}
