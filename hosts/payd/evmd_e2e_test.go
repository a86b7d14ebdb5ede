//go:build evmd

package main

// The end-to-end tests against a real Cosmos EVM node: evmd v0.7.0, the
// example chain of cosmos/evm, which go-ethereum's simulated backend and
// `payd devchain` only stand in for. They run `payd serve` on PostgreSQL,
// with the API, the gateway and the workers in three processes, against a
// fresh evmd chain that the test starts (scripts/evmd-node.sh) and, at the
// end, swaps for another.
//
// Run them with scripts/evmd-e2e.sh, given an evmd binary:
//
//	scripts/evmd-e2e.sh /path/to/evmd
//
// With EVMPAY_EVMD_RECORD=1 the run also re-records what evmd answered —
// every JSON-RPC call the indexer, the identity guard, settlement and sweep
// made, through a recording proxy — into testdata/evmd/, which
// TestEvmdReplay (evmd_replay_test.go, in make test) replays.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/evmpaytest/rpcreplay"
	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// evmdNode is a chain started by scripts/evmd-node.sh.
type evmdNode struct {
	rpcURL  string
	chainID uint64
	funded  *ecdsa.PrivateKey
}

func evmdScript(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "scripts", "evmd-node.sh"))
	require.NoError(t, err)
	require.NotEmpty(t, os.Getenv("EVMD_BIN"), "set EVMD_BIN to an evmd v0.7.0 binary (scripts/evmd-e2e.sh does)")
	return p
}

// startEvmd starts a fresh evmd chain (stopping any the script started
// before): same chain ids and RPC URL every time, another chain.
func startEvmd(t *testing.T) evmdNode {
	t.Helper()
	cmd := exec.Command(evmdScript(t), "start")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "evmd-node.sh start: %s", stderr.String())
	kv := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok {
			kv[k] = v
		}
	}
	key, err := crypto.HexToECDSA(strings.TrimPrefix(kv["FUNDED_PRIVATE_KEY"], "0x"))
	require.NoError(t, err, "%s", out)
	id, err := strconv.ParseUint(kv["CHAIN_ID"], 10, 64)
	require.NoError(t, err, "%s", out)
	return evmdNode{rpcURL: kv["RPC_URL"], chainID: id, funded: key}
}

func stopEvmd(t *testing.T) {
	out, err := exec.Command(evmdScript(t), "stop").CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// evmdRig is one evmd chain with payd serve's three processes in front of
// it, every JSON-RPC call going through a recording proxy.
type evmdRig struct {
	t        *testing.T
	ctx      context.Context
	node     evmdNode
	rec      *rpcreplay.Recorder
	rpc      string // the recording proxy's URL: what payd and the test use
	eth      *ethclient.Client
	nodePath string // ethers.js
	payer    *ecdsa.PrivateKey
	payerHex string
	usdc     *testtoken.Token
	usdt     *testtoken.Token
	procs    map[string]*process
	env      []string
	api      apiClient
	recv     *receiver
	settle   common.Address
	manifest evmdManifest
	rates    map[string]*rateReplay // coinbase, kraken, bitstamp
	// wrongNetwork and movedAway are the two-chain run's (its manifest).
	wrongNetwork []evmdWrongNetwork
	movedAway    []string
}

// use makes the rig report to t (a subtest) until the returned func runs.
func (r *evmdRig) use(t *testing.T) func() {
	parent, api := r.t, r.api
	r.t, r.api = t, r.api.in(t)
	return func() { r.t, r.api = parent, api }
}

func (r *evmdRig) opts() *bind.TransactOpts {
	opts := bind.NewKeyedTransactor(r.payer, new(big.Int).SetUint64(r.node.chainID))
	opts.Context = r.ctx
	return opts
}

// mined waits for tx's receipt and requires success.
func (r *evmdRig) mined(tx *types.Transaction) *types.Receipt {
	r.t.Helper()
	return waitMined(r.t, r.ctx, r.eth, tx, 60*time.Second)
}

func (r *evmdRig) sendNative(to common.Address, wei *big.Int) {
	r.t.Helper()
	tip, err := r.eth.SuggestGasTipCap(r.ctx)
	require.NoError(r.t, err)
	sendNativeTx(r.t, r.ctx, r.eth, r.node.chainID, r.payer, to, wei, tip)
}

// payWithEthers pays an EIP-681 URI with ethers.js, as a wallet would.
func (r *evmdRig) payWithEthers(uri string) string {
	r.t.Helper()
	cmd := exec.Command("node", filepath.Join("testdata", "ethers_pay_uri.cjs"), r.rpc, r.payerHex, uri)
	cmd.Env = append(os.Environ(), "NODE_PATH="+r.nodePath)
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "ethers.js paying %s: %s", uri, out)
	return strings.TrimSpace(string(out))
}

// payWithPayd pays an EIP-681 URI with `payd pay`.
func (r *evmdRig) payWithPayd(uri string) {
	r.t.Helper()
	keyFile := writeSecret(r.t, r.t.TempDir(), "payer", r.payerHex)
	var out bytes.Buffer
	require.NoError(r.t, run(r.ctx, []string{"pay", "--rpc", r.rpc, "--key-file", keyFile, "--timeout", "90s", uri}, &out))
}

func (r *evmdRig) invoice(id int64) map[string]any {
	r.t.Helper()
	code, got := r.api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
	require.Equal(r.t, http.StatusOK, code, "%v", got)
	return got
}

func (r *evmdRig) create(body map[string]any) map[string]any {
	r.t.Helper()
	code, inv := r.api.do("POST", "/v1/invoices", body, map[string]string{"Idempotency-Key": fmt.Sprint(time.Now().UnixNano())})
	require.Equal(r.t, http.StatusCreated, code, "%v", inv)
	return inv
}

// untilStatus polls invoice id until it is status and returns it, and how
// long it took.
func (r *evmdRig) untilStatus(id int64, status string, within time.Duration) (map[string]any, time.Duration) {
	r.t.Helper()
	start := time.Now()
	var got map[string]any
	seen := []string{}
	waitUntil(r.t, within, 500*time.Millisecond, func() bool {
		got = r.invoice(id)
		s, _ := got["status"].(string)
		if len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
		return s == status
	}, func() string { return fmt.Sprintf("invoice %d never %s; seen %v; last %v", id, status, seen, got) })
	return got, time.Since(start)
}

func (r *evmdRig) nativeBalance(a common.Address) *big.Int {
	r.t.Helper()
	b, err := r.eth.BalanceAt(r.ctx, a, nil)
	require.NoError(r.t, err)
	return b
}

func (r *evmdRig) tokenBalance(tok *testtoken.Token, a common.Address) *big.Int {
	r.t.Helper()
	b, err := tok.BalanceOf(r.ctx, a)
	require.NoError(r.t, err)
	return b
}

func sub(a, b *big.Int) string { return new(big.Int).Sub(a, b).String() }

func mustBig(s string) *big.Int {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic("not a decimal: " + s)
	}
	return v
}

// figure logs one measured figure in the form scripts/evmd-e2e.sh collects.
func figure(t *testing.T, what string, d time.Duration) {
	t.Logf("FIGURE %s: %.1f s", what, d.Seconds())
}

func newEvmdRig(t *testing.T) *evmdRig {
	ctx := context.Background()
	node := startEvmd(t)
	t.Cleanup(func() { stopEvmd(t) })
	rec := rpcreplay.NewRecorder(node.rpcURL)
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	eth, err := ethclient.DialContext(ctx, srv.URL)
	require.NoError(t, err)
	t.Cleanup(eth.Close)
	r := &evmdRig{t: t, ctx: ctx, node: node, rec: rec, rpc: srv.URL, eth: eth, nodePath: ethersNodePath(t),
		payer: node.funded, payerHex: hex.EncodeToString(crypto.FromECDSA(node.funded)), procs: map[string]*process{}}
	t.Logf("evmd: chain %d at %s", node.chainID, node.rpcURL)

	// The test tokens, deployed by the funded account, which then holds a
	// million of each.
	usdc, tx, err := testtoken.DeployStable(r.opts(), eth)
	require.NoError(t, err)
	r.mined(tx)
	usdt, tx, err := testtoken.DeployTether(r.opts(), eth)
	require.NoError(t, err)
	r.mined(tx)
	r.usdc, r.usdt = usdc, usdt
	payerAddr := crypto.PubkeyToAddress(r.payer.PublicKey)
	for _, tok := range []*testtoken.Token{usdc, usdt} {
		tx, err := tok.Mint(r.opts(), payerAddr, big.NewInt(1_000_000_000_000))
		require.NoError(t, err)
		r.mined(tx)
	}
	return r
}

// startServe starts the API, the gateway and the workers as three payd serve
// processes on one PostgreSQL database, with a gas funder the payer funds
// and an empty sweep wallet.
func (r *evmdRig) startServe(dbURL string, extraEnv ...string) {
	r.startServeWith(dbURL, nil, false, extraEnv...)
}

// startServeWith is startServe with fund also funding the gas funder
// (elsewhere: another chain) unless nil, and every role in one process
// when one is set.
func (r *evmdRig) startServeWith(dbURL string, fund func(funder common.Address), one bool, extraEnv ...string) {
	t := r.t
	secrets := t.TempDir()
	m, err := hdwallet.GenerateMnemonic(24)
	require.NoError(t, err)
	funder, err := crypto.GenerateKey()
	require.NoError(t, err)
	r.sendNative(crypto.PubkeyToAddress(funder.PublicKey), mustBig("50000000000000000000")) // 50 coins
	if fund != nil {
		fund(crypto.PubkeyToAddress(funder.PublicKey))
	}
	r.env = []string{
		"DATABASE_URL=" + dbURL, "RPC_URL=" + r.rpc, fmt.Sprintf("CHAIN_ID=%d", r.node.chainID),
		"WEBHOOK_ALLOW_PRIVATE_NETWORKS=true", "MIN_GAS_PRICE=" + cmp.Or(os.Getenv("MIN_GAS_PRICE"), "0"),
		"PAY_TOKENS=USDC:" + r.usdc.Address.Hex() + ":6,USDT:" + r.usdt.Address.Hex() + ":6",
		"PAY_MNEMONIC_FILE=" + writeSecret(t, secrets, "mnemonic", m.Phrase()),
		"PAY_SECRET_KEY_FILE=" + writeSecret(t, secrets, "secret-key", hex.EncodeToString(crypto.Keccak256([]byte(t.Name())))),
		"GAS_FUNDER_PRIVATE_KEY_FILE=" + writeSecret(t, secrets, "funder", hex.EncodeToString(crypto.FromECDSA(funder))),
		"PAY_ADMIN_TOKEN_FILE=" + writeSecret(t, secrets, "admin-token", "operator-token-for-tests"),
	}
	// Fiat pricing in US dollars from three exchanges, replayed by local
	// servers (their documented answers with the test's prices).
	r.rates = map[string]*rateReplay{}
	for _, ex := range []string{"coinbase", "kraken", "bitstamp"} {
		r.rates[ex] = newRateReplay(t, ex, map[string]string{"ETH/USD": "2500.00", "USDC/USD": "1.0002", "USDT/USD": "0.9998"})
		r.env = append(r.env, "PRICING_"+strings.ToUpper(ex)+"_URL="+r.rates[ex].srv.URL)
	}
	r.env = append(r.env, "PRICING_SOURCES=coinbase,kraken,bitstamp", "PRICING_CURRENCIES=USD",
		"PRICING_MAX_AGE=6s", "PRICING_REFRESH=1s")
	r.env = append(r.env, extraEnv...)
	apiAddr, gwAddr, workAddr, proxyAddr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	if one {
		r.procs["serve"] = startProcess(t, "serve", r.env, "serve", "--roles", "all", "--http", apiAddr, "--rpc-proxy", proxyAddr, "--metrics", "")
		gwAddr, workAddr = apiAddr, apiAddr
	} else {
		r.procs["api"] = startProcess(t, "api", r.env, "serve", "--roles", "api", "--http", apiAddr, "--metrics", "")
		r.procs["gateway"] = startProcess(t, "gateway", r.env, "serve", "--roles", "gateway", "--http", gwAddr, "--rpc-proxy", proxyAddr, "--metrics", "")
		r.procs["workers"] = startProcess(t, "workers", r.env, "serve", "--roles", "settlement,sweep,webhooks", "--http", workAddr, "--metrics", "")
	}
	for _, a := range []string{apiAddr, gwAddr, workAddr} {
		waitHTTP(t, "http://"+a+"/readyz", 120*time.Second)
	}

	r.recv = newReceiver(t)
	settle, err := crypto.GenerateKey()
	require.NoError(t, err)
	r.settle = crypto.PubkeyToAddress(settle.PublicKey)
	create := exec.Command(paydBinary(t), "merchants", "create", "--webhook-url", r.recv.srv.URL+"/hooks",
		"--settlement-address", r.settle.Hex(), "--name", "evmd shop")
	create.Env = append(os.Environ(), r.env...)
	out, err := create.CombinedOutput()
	require.NoError(t, err, "%s", out)
	key := regexp.MustCompile(`api_key=(\S+)`).FindSubmatch(out)
	secret := regexp.MustCompile(`webhook_secret=(\S+)`).FindSubmatch(out)
	require.NotNil(t, key, "%s", out)
	require.NotNil(t, secret, "%s", out)
	r.recv.setSecret(string(secret[1]))
	r.api = apiClient{t: t, base: "http://" + apiAddr, key: string(key[1])}
}

// TestEvmd_ServeEndToEnd follows native and token payments — exact,
// underpaid, and in the wrong asset both ways — from invoice to the
// merchant's settlement address on a real evmd chain, then swaps the chain
// for a fresh one at the same URL and chain id: every role refuses it.
func TestEvmd_ServeEndToEnd(t *testing.T) {
	r := newEvmdRig(t)
	r.startServe(pgtest.URL(t))
	id := func(inv map[string]any) int64 { return int64(inv["id"].(float64)) }

	t.Run("Native_PaidExactly_SettledWithTheExactAmount", func(t *testing.T) {
		defer r.use(t)()
		const amount = "750000000000000001"
		inv := r.create(map[string]any{"amount_wei": amount})
		require.Regexp(t, fmt.Sprintf(`^ethereum:0x[0-9a-fA-F]{40}@%d\?value=%s$`, r.node.chainID, amount), inv["payment_uri"])
		before := r.nativeBalance(r.settle)
		paid := time.Now()
		r.payWithEthers(inv["payment_uri"].(string))
		got, _ := r.untilStatus(id(inv), "SETTLED", 180*time.Second)
		figure(t, "native paid→settled", time.Since(paid))
		require.Equal(t, amount, got["paid_wei"])
		require.Equal(t, "SWEPT", got["sweep_status"])
		require.Equal(t, amount, sub(r.nativeBalance(r.settle), before), "exactly the invoice amount at the merchant")
		r.requireWebhooks(id(inv), "invoice.paid", "invoice.confirmed", "invoice.settled")
		r.note(id(inv), inv, got)
	})

	for _, tc := range []struct {
		tok  *testtoken.Token
		path string
	}{{r.usdc, "permit"}, {r.usdt, "fund"}} {
		t.Run(tc.tok.Symbol+"_PaidExactly_SettledOnThe"+tc.path+"Path", func(t *testing.T) {
			defer r.use(t)()
			inv := r.create(map[string]any{"asset": tc.tok.Symbol, "amount_formatted": "12.345678"})
			require.Equal(t, "12345678", inv["amount"])
			require.Equal(t, fmt.Sprintf("ethereum:%s@%d/transfer?address=%s&uint256=12345678", tc.tok.Address.Hex(), r.node.chainID, inv["deposit_address"]), inv["payment_uri"])
			before := r.tokenBalance(tc.tok, r.settle)
			paid := time.Now()
			r.payWithPayd(inv["payment_uri"].(string))
			got, _ := r.untilStatus(id(inv), "SETTLED", 180*time.Second)
			figure(t, tc.tok.Symbol+" ("+tc.path+") paid→settled", time.Since(paid))
			require.Equal(t, "12345678", got["paid"])
			require.Equal(t, "12345678", sub(r.tokenBalance(tc.tok, r.settle), before))
			r.requireWebhooks(id(inv), "invoice.paid", "invoice.confirmed", "invoice.settled")
			r.requireSweepPath(id(inv), tc.path)
			r.note(id(inv), inv, got)
		})
	}

	t.Run("Underpaid_ThenTheRemainder_Settled", func(t *testing.T) {
		defer r.use(t)()
		inv := r.create(map[string]any{"asset": "USDC", "amount": "5000000"})
		dep := inv["deposit_address"].(string)
		uri := func(v string) string {
			return fmt.Sprintf("ethereum:%s@%d/transfer?address=%s&uint256=%s", r.usdc.Address.Hex(), r.node.chainID, dep, v)
		}
		before := r.tokenBalance(r.usdc, r.settle)
		r.payWithEthers(uri("3000000"))
		var got map[string]any
		waitUntil(t, 60*time.Second, 500*time.Millisecond, func() bool {
			got = r.invoice(id(inv))
			return got["paid"] == "3000000"
		}, func() string { return fmt.Sprintf("the first part never counted: %v", got) })
		require.Equal(t, "PENDING", got["status"])
		require.Equal(t, true, got["underpaid"])
		r.payWithEthers(uri("2000000"))
		got, _ = r.untilStatus(id(inv), "SETTLED", 180*time.Second)
		require.Equal(t, "5000000", got["paid"])
		require.Equal(t, false, got["underpaid"])
		require.Equal(t, "5000000", sub(r.tokenBalance(r.usdc, r.settle), before))
		r.requireWebhooks(id(inv), "invoice.underpaid", "invoice.paid", "invoice.confirmed", "invoice.settled")
		r.note(id(inv), inv, got)
	})

	t.Run("WrongAsset_TokenToNativeInvoice_BothReachTheMerchant", func(t *testing.T) {
		defer r.use(t)()
		const amount = "250000000000000000"
		inv := r.create(map[string]any{"amount_wei": amount})
		dep := common.HexToAddress(inv["deposit_address"].(string))
		nativeBefore, usdcBefore := r.nativeBalance(r.settle), r.tokenBalance(r.usdc, r.settle)
		r.payWithEthers(fmt.Sprintf("ethereum:%s@%d/transfer?address=%s&uint256=777", r.usdc.Address.Hex(), r.node.chainID, dep.Hex()))
		r.payWithEthers(inv["payment_uri"].(string))
		got, _ := r.untilStatus(id(inv), "SETTLED", 240*time.Second)
		require.Equal(t, amount, got["paid_wei"], "the wrong asset is never counted")
		require.Equal(t, true, got["needs_attention"])
		require.Equal(t, amount, sub(r.nativeBalance(r.settle), nativeBefore))
		require.Equal(t, "777", sub(r.tokenBalance(r.usdc, r.settle), usdcBefore), "the wrong token swept to the merchant in full")
		r.requireWebhookTypes(id(inv), "invoice.wrong_asset", "invoice.paid", "invoice.settled")
		r.requireWrongAssetEvent(id(inv), "USDC", "777")
		r.note(id(inv), inv, got)
	})

	t.Run("WrongAsset_NativeToTokenInvoice_BothReachTheMerchant", func(t *testing.T) {
		defer r.use(t)()
		inv := r.create(map[string]any{"asset": "USDT", "amount": "4000000"})
		dep := common.HexToAddress(inv["deposit_address"].(string))
		nativeBefore, usdtBefore := r.nativeBalance(r.settle), r.tokenBalance(r.usdt, r.settle)
		const wrong = "30000000000000000" // 0.03 coin
		r.payWithEthers(fmt.Sprintf("ethereum:%s@%d?value=%s", dep.Hex(), r.node.chainID, wrong))
		r.payWithEthers(inv["payment_uri"].(string))
		got, _ := r.untilStatus(id(inv), "SETTLED", 240*time.Second)
		require.Equal(t, "4000000", got["paid"])
		require.Equal(t, true, got["needs_attention"])
		require.Equal(t, "4000000", sub(r.tokenBalance(r.usdt, r.settle), usdtBefore))
		// The payer's mistake pays its own gas: the merchant gets it less
		// one transfer's fee, never more.
		// It takes the funding's dust along, less its own gas: what stays
		// at the deposit is less than one transfer's fee.
		require.Positive(t, new(big.Int).Sub(r.nativeBalance(r.settle), nativeBefore).Sign(), "the wrong native coin reached the merchant")
		head, err := r.eth.HeaderByNumber(r.ctx, nil)
		require.NoError(t, err)
		oneFee := new(big.Int).Mul(big.NewInt(21000), new(big.Int).Mul(head.BaseFee, big.NewInt(4)))
		require.Negative(t, r.nativeBalance(dep).Cmp(oneFee), "only dust stays at the deposit address")
		r.requireWebhookTypes(id(inv), "invoice.wrong_asset", "invoice.paid", "invoice.settled")
		r.requireWrongAssetEvent(id(inv), "", wrong)
		r.note(id(inv), inv, got)
	})

	t.Run("Fiat_PaidHalfNativeHalfToken_SettledWithBoth", func(t *testing.T) {
		defer r.use(t)()
		inv := r.create(map[string]any{"price": map[string]any{"amount": "10.00", "currency": "USD"}, "accept": []string{"ETH", "USDC"}})
		quotes := inv["quotes"].([]any)
		require.Equal(t, "4000000000000000", quotes[0].(map[string]any)["amount"], "10.00 USD at 2,500 USD per coin")
		require.Equal(t, "10000000", quotes[1].(map[string]any)["amount"], "USDC at its peg")
		dep := common.HexToAddress(inv["deposit_address"].(string))
		nativeBefore, usdcBefore := r.nativeBalance(r.settle), r.tokenBalance(r.usdc, r.settle)
		paid := time.Now()
		const halfNative = "2000000000000000" // 5.00 USD
		r.payWithEthers(fmt.Sprintf("ethereum:%s@%d?value=%s", dep.Hex(), r.node.chainID, halfNative))
		r.payWithEthers(fmt.Sprintf("ethereum:%s@%d/transfer?address=%s&uint256=5000000", r.usdc.Address.Hex(), r.node.chainID, dep.Hex()))
		got, _ := r.untilStatus(id(inv), "SETTLED", 240*time.Second)
		figure(t, "fiat (native + USDC) paid→settled", time.Since(paid))
		require.Equal(t, map[string]any{"amount": "10.00", "currency": "USD"}, got["paid_value"])
		require.Equal(t, false, got["underpaid"])
		ps := got["payments"].([]any)
		require.Len(t, ps, 2)
		for _, p := range ps {
			require.Equal(t, map[string]any{"amount": "5.00", "currency": "USD"}, p.(map[string]any)["value"])
		}
		require.Equal(t, "5000000", sub(r.tokenBalance(r.usdc, r.settle), usdcBefore), "the USDC at the merchant, exactly")
		native := new(big.Int).Sub(r.nativeBalance(r.settle), nativeBefore)
		require.Positive(t, native.Sign(), "the native half reached the merchant")
		require.LessOrEqual(t, native.Cmp(mustBig(halfNative)), 0, "never more than was paid")
		r.requireWebhooks(id(inv), "invoice.underpaid", "invoice.paid", "invoice.confirmed", "invoice.settled")

		// The ledger values both payments at the invoice's locked quotes.
		req, err := http.NewRequest("GET", r.api.base+"/v1/ledger?format=jsonl", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+r.api.key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		var valued []string
		fees := 0
		for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
			var e map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &e))
			if e["invoice_id"] != inv["id"] {
				continue
			}
			switch e["kind"] {
			case "payment":
				valued = append(valued, fmt.Sprint(e["fiat_currency"], " ", e["fiat_value"]))
			case "gas_fee":
				fees++
				require.Equal(t, "USD", e["fiat_currency"], "the sweep's gas valued in the invoice's currency: %v", e)
				require.NotEmpty(t, e["fiat_value"])
			}
		}
		require.Equal(t, []string{"USD 5.00", "USD 5.00"}, valued)
		require.Positive(t, fees, "the sweeps paid gas")
		r.note(id(inv), inv, got)
	})

	t.Run("Fiat_Tolerance_Outages_Depeg", func(t *testing.T) {
		defer r.use(t)()
		r.fiatEdges()
	})

	t.Run("SendErrors_Recorded", func(t *testing.T) {
		defer r.use(t)()
		r.recordSendErrors()
	})

	r.saveRecording()

	t.Run("ChainSwapped_EveryRoleRefuses", func(t *testing.T) {
		defer r.use(t)()
		stopEvmd(t)
		swapped := startEvmd(t)
		require.Equal(t, r.node.chainID, swapped.chainID, "the same chain id")
		require.Equal(t, r.node.rpcURL, swapped.rpcURL, "at the same URL")
		for name, p := range r.procs {
			done := make(chan error, 1)
			go func() { done <- p.cmd.Wait() }()
			select {
			case err := <-done:
				require.Error(t, err, "%s exits with an error", name)
				require.Contains(t, p.out.String(), "another chain", "%s says why", name)
			case <-time.After(90 * time.Second):
				t.Fatalf("%s still runs 90 s after the chain was swapped:\n%s", name, tail(p.out.String(), 30))
			}
		}
		restart := exec.Command(paydBinary(t), "serve", "--roles", "api", "--http", freeAddr(t), "--metrics", "")
		restart.Env = append(os.Environ(), r.env...)
		out, err := restart.CombinedOutput()
		require.Error(t, err)
		require.Contains(t, string(out), "refusing to start")
		require.Contains(t, string(out), "another chain")
	})
}

// fiatEdges runs the fiat cases of issue #25 on the evmd chain: a payment
// within the merchant's underpayment tolerance settles (flagged), a stale
// source is dropped and a source that is down leaves the other two
// pricing, a depegged stablecoin is quoted at its market rate, and with
// every source down the API answers 503 rate_unavailable, creates nothing
// and takes the same Idempotency-Key once the rates are back.
func (r *evmdRig) fiatEdges() {
	t := r.t
	op := apiClient{t: t, base: r.api.base, key: "operator-token-for-tests"}
	coinbase, kraken, bitstamp := r.rates["coinbase"], r.rates["kraken"], r.rates["bitstamp"]
	usd := func(v string) map[string]any { return map[string]any{"amount": v, "currency": "USD"} }

	// Tolerance: 1 %; 9.95 USD of USDC settles the 10.00 USD invoice.
	code, m := r.api.do("PATCH", "/v1/merchant", map[string]any{"underpayment_tolerance": map[string]any{"percent": "1"}}, nil)
	require.Equal(t, http.StatusOK, code, "%v", m)
	inv := r.create(map[string]any{"price": usd("10.00"), "accept": []string{"USDC"}})
	id := int64(inv["id"].(float64))
	before := r.tokenBalance(r.usdc, r.settle)
	r.payWithEthers(fmt.Sprintf("ethereum:%s@%d/transfer?address=%s&uint256=9950000", r.usdc.Address.Hex(), r.node.chainID, inv["deposit_address"]))
	got, _ := r.untilStatus(id, "SETTLED", 240*time.Second)
	require.Equal(t, usd("9.95"), got["paid_value"])
	require.Equal(t, true, got["underpaid"], "paid within the tolerance, and flagged")
	require.Equal(t, "9950000", sub(r.tokenBalance(r.usdc, r.settle), before))
	code, m = r.api.do("PATCH", "/v1/merchant", map[string]any{"underpayment_tolerance": map[string]any{"percent": "0"}}, nil)
	require.Equal(t, http.StatusOK, code, "%v", m)

	// A stale source is dropped; then a source down (the stale one fresh
	// again): the other two price.
	staleThenDown(t, op, coinbase, kraken, nil)
	inv = r.create(map[string]any{"price": usd("10.00"), "accept": []string{"ETH"}})
	q := inv["quotes"].([]any)[0].(map[string]any)
	require.Equal(t, "4000000000000000", q["amount"])
	var names []string
	for _, s := range q["sources"].([]any) {
		names = append(names, s.(map[string]any)["name"].(string))
	}
	require.ElementsMatch(t, []string{"coinbase", "bitstamp"}, names, "the source that is down is not among them")
	kraken.setDown(false)

	// USDT off its peg at 0.95: quoted at the market rate (PRICING_DEPEG
	// market, the default), 10.00 USD / 0.95 rounded up to the base unit.
	for _, x := range r.rates {
		x.setPrice("USDT/USD", "0.95")
	}
	var quote map[string]any
	waitUntil(t, 30*time.Second, 250*time.Millisecond, func() bool {
		quote = r.create(map[string]any{"price": usd("10.00"), "accept": []string{"USDT"}})["quotes"].([]any)[0].(map[string]any)
		return quote["pegged"] == false
	}, func() string { return fmt.Sprintf("USDT still quoted at its peg: %v", quote) })
	require.Equal(t, "10526316", quote["amount"])
	require.Equal(t, "0.95", quote["rate"])
	for _, x := range r.rates {
		x.setPrice("USDT/USD", "0.9998")
	}

	// Every source down: 503 once the last good rate is too old; nothing
	// created; the same key works when the rates are back.
	for _, x := range []*rateReplay{coinbase, kraken, bitstamp} {
		x.setDown(true)
	}
	var res edgeResult
	probe := 0
	waitUntil(t, 30*time.Second, 250*time.Millisecond, func() bool {
		probe++
		res = postInvoice(t, r.api, `{"price":{"amount":"5.00","currency":"USD"}}`, fmt.Sprintf("evmd-probe-%d", probe))
		return res.status == http.StatusServiceUnavailable
	}, func() string { return fmt.Sprintf("still %d: %s", res.status, res.body) })
	_, listed := r.api.do("GET", "/v1/invoices", nil, nil)
	res = postInvoice(t, r.api, `{"price":{"amount":"5.00","currency":"USD"}}`, "evmd-fiat-503")
	require.Equal(t, http.StatusServiceUnavailable, res.status, "%s", res.body)
	require.Contains(t, string(res.body), `"code":"rate_unavailable"`)
	require.Regexp(t, `^[1-9][0-9]*$`, res.header.Get("Retry-After"))
	_, after := r.api.do("GET", "/v1/invoices", nil, nil)
	require.Equal(t, len(listed["data"].([]any)), len(after["data"].([]any)), "nothing created")
	for _, x := range []*rateReplay{coinbase, kraken, bitstamp} {
		x.setDown(false)
	}
	waitUntil(t, 30*time.Second, 250*time.Millisecond, func() bool {
		res = postInvoice(t, r.api, `{"price":{"amount":"5.00","currency":"USD"}}`, "evmd-fiat-503")
		return res.status == http.StatusCreated
	}, func() string { return fmt.Sprintf("still %d: %s", res.status, res.body) })
}

// requireWebhooks waits for exactly these event types of an invoice, in order.
func (r *evmdRig) requireWebhooks(id int64, types ...string) {
	r.t.Helper()
	waitUntil(r.t, 60*time.Second, 200*time.Millisecond, func() bool { return len(r.recv.types(id)) >= len(types) },
		func() string { return fmt.Sprintf("webhooks of invoice %d: %v", id, r.recv.types(id)) })
	require.Equal(r.t, types, r.recv.types(id))
	r.recv.mu.Lock()
	defer r.recv.mu.Unlock()
	require.Empty(r.t, r.recv.bad, "every webhook carried a valid signature")
}

// requireWebhookTypes waits until an invoice's webhooks include these types.
func (r *evmdRig) requireWebhookTypes(id int64, types ...string) {
	r.t.Helper()
	waitUntil(r.t, 60*time.Second, 200*time.Millisecond, func() bool {
		got := map[string]bool{}
		for _, ty := range r.recv.types(id) {
			got[ty] = true
		}
		for _, ty := range types {
			if !got[ty] {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("webhooks of invoice %d: %v, want %v", id, r.recv.types(id), types) })
}

// requireWrongAssetEvent checks that the invoice.wrong_asset webhook names
// the asset that arrived (symbol; "" for the native coin, whose address is
// null) and its amount.
func (r *evmdRig) requireWrongAssetEvent(id int64, symbol, amount string) {
	r.t.Helper()
	r.recv.mu.Lock()
	defer r.recv.mu.Unlock()
	for _, e := range r.recv.events {
		if e.Type != "invoice.wrong_asset" {
			continue
		}
		var data struct {
			ID       int64 `json:"id"`
			Payments []struct {
				Asset struct {
					Symbol  string  `json:"symbol"`
					Address *string `json:"address"`
				} `json:"asset"`
				Amount string `json:"amount"`
				TxHash string `json:"tx_hash"`
			} `json:"wrong_asset_payments"`
		}
		require.NoError(r.t, json.Unmarshal(e.Data, &data))
		if data.ID != id {
			continue
		}
		require.Len(r.t, data.Payments, 1, "the event says what arrived: %s", e.Data)
		p := data.Payments[0]
		require.Equal(r.t, amount, p.Amount)
		require.Regexp(r.t, `^0x[0-9a-f]{64}$`, p.TxHash)
		if symbol == "" {
			require.Nil(r.t, p.Asset.Address, "%s", e.Data)
		} else {
			require.Equal(r.t, symbol, p.Asset.Symbol, "%s", e.Data)
		}
		return
	}
	r.t.Fatalf("no invoice.wrong_asset webhook for invoice %d", id)
}

// requireSweepPath checks in the database which path a token sweep took:
// permit (PERMIT + PULL from the sweep wallet) or fund (FUNDING, then the
// deposit's own transfer).
func (r *evmdRig) requireSweepPath(id int64, path string) {
	r.t.Helper()
	st := openStore(r.t, r.env)
	txs, err := st.Chain(r.node.chainID).ListSweepTxsByInvoice(r.ctx, id)
	require.NoError(r.t, err)
	kinds := map[string]bool{}
	for _, tx := range txs {
		kinds[tx.Kind] = true
	}
	switch path {
	case "permit":
		require.True(r.t, kinds["PERMIT"] && kinds["PULL"], "permit path: %v", kinds)
	case "fund":
		require.True(r.t, kinds["FUNDING"] && kinds["SWEEP"] && !kinds["PERMIT"], "fund path: %v", kinds)
	}
}

// recordSendErrors sends transactions evmd refuses, so that the transcript
// holds its refusals (the sweep classifies them by their messages): a fee
// below the minimum, a used nonce, a duplicate, a sender without funds.
func (r *evmdRig) recordSendErrors() {
	t := r.t
	chainID := new(big.Int).SetUint64(r.node.chainID)
	signer := types.LatestSignerForChainID(chainID)
	from := crypto.PubkeyToAddress(r.payer.PublicKey)
	to := common.HexToAddress("0x000000000000000000000000000000000000dEaD")
	nonce, err := r.eth.PendingNonceAt(r.ctx, from)
	require.NoError(t, err)
	head, err := r.eth.HeaderByNumber(r.ctx, nil)
	require.NoError(t, err)
	sign := func(key *ecdsa.PrivateKey, nonce uint64, feeCap, tip *big.Int) *types.Transaction {
		tx, err := types.SignNewTx(key, signer, &types.DynamicFeeTx{ChainID: chainID, Nonce: nonce, GasTipCap: tip,
			GasFeeCap: feeCap, Gas: 21000, To: &to, Value: big.NewInt(1)})
		require.NoError(t, err)
		return tx
	}
	var errs []evmdSendError
	try := func(what, want string, tx *types.Transaction) error {
		err := r.eth.SendTransaction(r.ctx, tx)
		msg := "accepted"
		if err != nil {
			msg = err.Error()
		}
		t.Logf("evmd answers %s: %s", what, msg)
		errs = append(errs, evmdSendError{What: what, Class: want, Message: msg})
		return err
	}
	zero, gwei := big.NewInt(0), big.NewInt(1_000_000_000)
	low := new(big.Int).Div(head.BaseFee, big.NewInt(2))
	if try("a fee cap below the base fee", "transaction underpriced", sign(r.payer, nonce, low, zero)) == nil {
		// It waits in the pool, never mined: the same nonce at a fee not
		// 10% higher is refused as a replacement.
		try("a replacement not priced 10% higher", "replacement tx underpriced",
			sign(r.payer, nonce, new(big.Int).Add(low, big.NewInt(1)), zero))
	}
	good := sign(r.payer, nonce, new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), gwei), gwei)
	require.NoError(t, r.eth.SendTransaction(r.ctx, good))
	try("the same transaction again", "already known", good)
	r.mined(good)
	try("a used nonce", "nonce too low", sign(r.payer, nonce, good.GasFeeCap(), gwei))
	empty, err := crypto.GenerateKey()
	require.NoError(t, err)
	try("a sender without funds", "insufficient gas", sign(empty, 0, good.GasFeeCap(), gwei))
	r.manifest.SendErrors = errs
}

// note keeps an invoice for the manifest.
func (r *evmdRig) note(id int64, created, settled map[string]any) {
	amount, _ := created["amount"].(string)
	if amount == "" {
		amount, _ = created["amount_wei"].(string)
	}
	paid, _ := settled["paid"].(string)
	if paid == "" {
		paid, _ = settled["paid_wei"].(string)
	}
	asset, _ := json.Marshal(created["asset"])
	ct, _ := time.Parse(time.RFC3339Nano, created["created_at"].(string))
	et, _ := time.Parse(time.RFC3339Nano, created["expires_at"].(string))
	txs, err := openStore(r.t, r.env).Chain(r.node.chainID).ListSweepTxsByInvoice(r.ctx, id)
	require.NoError(r.t, err)
	r.manifest.Invoices = append(r.manifest.Invoices, evmdInvoice{
		ID: id, DepositAddress: created["deposit_address"].(string), Asset: asset, Amount: amount, Paid: paid,
		Underpaid: settled["underpaid"] == true, Overpaid: settled["overpaid"] == true,
		NeedsAttention: settled["needs_attention"] == true, CreatedAt: ct, ExpiresAt: et, SweepTxs: txs,
	})
}

// saveRecording writes the transcript and the manifest into testdata/evmd
// when EVMPAY_EVMD_RECORD is set.
func (r *evmdRig) saveRecording() {
	if os.Getenv("EVMPAY_EVMD_RECORD") == "" {
		return
	}
	t := r.t
	calls := r.rec.Calls()
	r.manifest = r.recordedManifest(calls)
	dir := filepath.Join("testdata", "evmd")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, rpcreplay.Save(filepath.Join(dir, "transcript.jsonl.gz"), calls))
	b, err := json.MarshalIndent(r.manifest, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), append(b, '\n'), 0o644))
	// The sweep's own test classifies evmd's refusals.
	b, err = json.MarshalIndent(r.manifest.SendErrors, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join("..", "..", "sweep", "testdata"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join("..", "..", "sweep", "testdata", "evmd-send-errors.json"), append(b, '\n'), 0o644))
	t.Logf("recorded %d calls up to block %d into %s", len(calls), r.manifest.Head, dir)
}

// recordedManifest is the rig's manifest completed from the recorded
// calls: the head the replay stops at (the highest block the indexer
// fetched with its transactions), the chain and its tokens.
func (r *evmdRig) recordedManifest(calls []rpcreplay.Call) evmdManifest {
	m := r.manifest
	for _, c := range rpcreplay.Find(calls, "eth_getBlockByNumber") {
		var args []json.RawMessage
		var tag string
		var full bool
		if json.Unmarshal(c.Params, &args) != nil || len(args) != 2 || json.Unmarshal(args[0], &tag) != nil ||
			json.Unmarshal(args[1], &full) != nil || !full || c.Error != nil || string(c.Result) == "null" {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimPrefix(tag, "0x"), 16, 64); err == nil {
			m.Head = max(m.Head, n)
		}
	}
	m.ChainID = r.node.chainID
	for _, tok := range []*testtoken.Token{r.usdc, r.usdt} {
		m.Tokens = append(m.Tokens, evmdToken{Symbol: tok.Symbol, Address: tok.Address.Hex(), Decimals: tok.Decimals})
	}
	return m
}

// openStore opens the run's PostgreSQL database (DATABASE_URL in env).
func openStore(t *testing.T, env []string) *postgres.Store {
	t.Helper()
	var url string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "DATABASE_URL="); ok {
			url = v
		}
	}
	st, err := postgres.Open(context.Background(), url, postgres.Config{MaxOpenConns: 2})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}
