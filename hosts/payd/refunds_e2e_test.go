package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// The end to end of refunds and payouts (docs/refunds.md): `payd serve` on
// PostgreSQL, the API, the gateway and the workers in three processes, on a
// chain given by the caller — `payd devchain` here (refundsDevChain), a
// real evmd node in refunds_evmd_e2e_test.go — through refundsFlow.

// refundChain is the chain the flow runs on: its JSON-RPC URL and id, and
// a funded key (the payer, who deploys the test token).
type refundChain struct {
	rpc     string
	chainID uint64
	funded  *ecdsa.PrivateKey
}

// refundRig is the chain, the three payd processes and the merchant.
type refundRig struct {
	t        *testing.T // the test, or the subtest using the rig (use)
	owner    *testing.T // the test that built the rig: its processes live as long
	ctx      context.Context
	chain    refundChain
	eth      *ethclient.Client
	payer    *ecdsa.PrivateKey // pays invoices
	merchant *ecdsa.PrivateKey // the merchant's own wallet: funds the payout wallet, pays merchant-paid refunds
	usdc     *testtoken.Token
	env      []string
	procs    map[string]*process
	apiAddr  string
	workAddr string
	dbURL    string
	api      apiClient // the merchant's own key
	op       apiClient // the operator
	recv     *receiver
	payout   common.Address
}

// refundsDevChain starts `payd devchain` with a funded key for the flow.
func refundsDevChain(t *testing.T, extra ...common.Address) refundChain {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	addr := freeAddr(t)
	fund := []string{crypto.PubkeyToAddress(key.PublicKey).Hex()}
	for _, a := range extra {
		fund = append(fund, a.Hex())
	}
	startProcess(t, "devchain", nil, "devchain", "--chain-rpc", addr, "--block-time", "400ms", "--fund", strings.Join(fund, ","))
	waitRPC(t, "http://"+addr)
	return refundChain{rpc: "http://" + addr, chainID: 1337, funded: key}
}

// use makes the rig (and its API clients) report to t, a subtest, until
// the returned func runs: a failure stops the subtest that saw it, never
// the test that built the rig. What the rig starts still lives as long as
// that test (owner).
func (r *refundRig) use(t *testing.T) func() {
	parent, api, op := r.t, r.api, r.op
	r.t, r.api, r.op = t, r.api.in(t), r.op.in(t)
	return func() { r.t, r.api, r.op = parent, api, op }
}

func (r *refundRig) opts(key *ecdsa.PrivateKey) *bind.TransactOpts {
	o := bind.NewKeyedTransactor(key, new(big.Int).SetUint64(r.chain.chainID))
	o.Context = r.ctx
	return o
}

func (r *refundRig) mined(tx *types.Transaction) *types.Receipt {
	r.t.Helper()
	return waitMined(r.t, r.ctx, r.eth, tx, 90*time.Second)
}

func (r *refundRig) sendNative(key *ecdsa.PrivateKey, to common.Address, wei *big.Int) *types.Receipt {
	r.t.Helper()
	return sendNativeTx(r.t, r.ctx, r.eth, r.chain.chainID, key, to, wei, big.NewInt(2_000_000_000))
}

func (r *refundRig) sendToken(key *ecdsa.PrivateKey, to common.Address, amount *big.Int) {
	r.t.Helper()
	tx, err := r.usdc.Transfer(r.opts(key), to, amount)
	require.NoError(r.t, err)
	r.mined(tx)
}

// payURI pays an EIP-681 request with `payd pay`, from key.
func (r *refundRig) payURI(key *ecdsa.PrivateKey, uri string) {
	r.t.Helper()
	file := writeSecret(r.t, r.t.TempDir(), "key", hex.EncodeToString(crypto.FromECDSA(key)))
	var out bytes.Buffer
	require.NoError(r.t, run(r.ctx, []string{"pay", "--rpc", r.chain.rpc, "--key-file", file, "--timeout", "90s", uri}, &out), "%s", out.String())
}

func (r *refundRig) balance(a common.Address) *big.Int {
	r.t.Helper()
	b, err := r.eth.BalanceAt(r.ctx, a, nil)
	require.NoError(r.t, err)
	return b
}

func (r *refundRig) tokenBalance(a common.Address) *big.Int {
	r.t.Helper()
	b, err := r.usdc.BalanceOf(r.ctx, a)
	require.NoError(r.t, err)
	return b
}

func newAddr(t *testing.T) common.Address {
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	return crypto.PubkeyToAddress(k.PublicKey)
}

// newRefundRig starts payd serve's three processes on the chain, with a
// gas funder the payer funds, the test stablecoin, and a merchant.
func newRefundRig(t *testing.T, chain refundChain) *refundRig {
	ctx := context.Background()
	eth, err := ethclient.DialContext(ctx, chain.rpc)
	require.NoError(t, err)
	t.Cleanup(eth.Close)
	r := &refundRig{t: t, owner: t, ctx: ctx, chain: chain, eth: eth, payer: chain.funded, procs: map[string]*process{}, dbURL: pgtest.URL(t)}
	r.merchant, err = crypto.GenerateKey()
	require.NoError(t, err)
	r.sendNative(r.payer, crypto.PubkeyToAddress(r.merchant.PublicKey), bigOf("50000000000000000000"))
	usdc, tx, err := testtoken.DeployStable(r.opts(r.payer), eth)
	require.NoError(t, err)
	r.mined(tx)
	r.usdc = usdc
	for _, k := range []*ecdsa.PrivateKey{r.payer, r.merchant} {
		tx, err := usdc.Mint(r.opts(r.payer), crypto.PubkeyToAddress(k.PublicKey), big.NewInt(1_000_000_000_000))
		require.NoError(t, err)
		r.mined(tx)
	}

	secrets := t.TempDir()
	m, err := hdwallet.GenerateMnemonic(24)
	require.NoError(t, err)
	funder, err := crypto.GenerateKey()
	require.NoError(t, err)
	r.sendNative(r.payer, crypto.PubkeyToAddress(funder.PublicKey), bigOf("20000000000000000000"))
	r.apiAddr, r.workAddr = freeAddr(t), freeAddr(t)
	r.env = []string{
		"DATABASE_URL=" + r.dbURL, "RPC_URL=" + chain.rpc, fmt.Sprintf("CHAIN_ID=%d", chain.chainID),
		"WEBHOOK_ALLOW_PRIVATE_NETWORKS=true", "CONFIRMATIONS=3", "PUBLIC_BASE_URL=http://" + r.apiAddr,
		"PAY_TOKENS=USDC:" + usdc.Address.Hex() + ":6",
		"PAY_MNEMONIC_FILE=" + writeSecret(t, secrets, "mnemonic", m.Phrase()),
		"PAY_SECRET_KEY_FILE=" + writeSecret(t, secrets, "secret-key", hex.EncodeToString(crypto.Keccak256([]byte(t.Name())))),
		"GAS_FUNDER_PRIVATE_KEY_FILE=" + writeSecret(t, secrets, "funder", hex.EncodeToString(crypto.FromECDSA(funder))),
		"PAY_ADMIN_TOKEN_FILE=" + writeSecret(t, secrets, "admin-token", "operator-token-for-tests"),
	}
	gwAddr, proxyAddr := freeAddr(t), freeAddr(t)
	r.procs["api"] = startProcess(t, "api", r.env, "serve", "--roles", "api", "--http", r.apiAddr, "--metrics", "")
	r.procs["gateway"] = startProcess(t, "gateway", r.env, "serve", "--roles", "gateway", "--http", gwAddr, "--rpc-proxy", proxyAddr, "--metrics", "")
	r.startWorkers()
	for _, a := range []string{r.apiAddr, gwAddr} {
		waitHTTP(t, "http://"+a+"/readyz", 120*time.Second)
	}

	r.recv = newReceiver(t)
	var secret string
	r.api, secret = r.newMerchant("Refund shop", r.recv.srv.URL+"/hooks")
	r.recv.setSecret(secret)
	r.op = apiClient{t: t, base: "http://" + r.apiAddr, key: "operator-token-for-tests"}
	return r
}

// newMerchant makes a merchant with `payd merchants create` and returns a
// client with its own key, and its webhook secret.
func (r *refundRig) newMerchant(name, webhookURL string) (apiClient, string) {
	r.t.Helper()
	create := exec.Command(paydBinary(r.t), "merchants", "create", "--webhook-url", webhookURL,
		"--settlement-address", newAddr(r.t).Hex(), "--name", name)
	create.Env = append(os.Environ(), r.env...)
	out, err := create.CombinedOutput()
	require.NoError(r.t, err, "%s", out)
	key := regexp.MustCompile(`api_key=(\S+)`).FindSubmatch(out)
	secret := regexp.MustCompile(`webhook_secret=(\S+)`).FindSubmatch(out)
	require.NotNil(r.t, key, "%s", out)
	return apiClient{t: r.t, base: "http://" + r.apiAddr, key: string(key[1])}, string(secret[1])
}

// payoutWallet waits for the sweep role to record a merchant's payout
// wallet and returns it.
func (r *refundRig) payoutWallet(api apiClient) common.Address {
	r.t.Helper()
	var wallet map[string]any
	waitUntil(r.t, 60*time.Second, 300*time.Millisecond, func() bool {
		var code int
		code, wallet = api.do("GET", "/v1/merchant/payout-wallet", nil, nil)
		return code == http.StatusOK
	}, func() string { return fmt.Sprintf("no payout wallet: %v", wallet) })
	return common.HexToAddress(wallet["address"].(string))
}

// reconciled waits until the ledger has followed the chain's head and
// reconciles with it to the wei, and returns the reconciliation.
func (r *refundRig) reconciled() map[string]any {
	r.t.Helper()
	head, err := r.eth.BlockNumber(r.ctx)
	require.NoError(r.t, err)
	var rec map[string]any
	waitUntil(r.t, 3*time.Minute, 500*time.Millisecond, func() bool {
		var code int
		code, rec = r.op.do("GET", "/v1/admin/reconciliation", nil, nil)
		return code == http.StatusOK && rec["block"].(float64) >= float64(head) && rec["ok"] == true
	}, func() string { return fmt.Sprintf("the ledger never reconciled: %v", rec) })
	return rec
}

// startWorkers starts (or restarts) the process of the settlement, sweep
// and webhooks roles.
func (r *refundRig) startWorkers() {
	// Restarted by a subtest, the workers still serve the rest of the
	// test: they stop with the test that built the rig.
	r.procs["workers"] = startProcessFor(r.t, r.owner, "workers", r.env, "serve", "--roles", "settlement,sweep,webhooks",
		"--http", r.workAddr, "--metrics", "")
	waitHTTP(r.t, "http://"+r.workAddr+"/readyz", 120*time.Second)
}

// killWorkers kills the workers' process with SIGKILL: no shutdown, no
// lease handed back, whatever it was doing cut off.
func (r *refundRig) killWorkers() {
	p := r.procs["workers"]
	require.NoError(r.t, p.cmd.Process.Kill())
	_ = p.cmd.Wait() // reaped: its cleanup sees it gone
}

func id(v map[string]any) int64 { return int64(v["id"].(float64)) }

// invoice creates an invoice and pays it value wei from the payer.
func (r *refundRig) paidInvoice(amount, value string) map[string]any {
	r.t.Helper()
	code, inv := r.api.do("POST", "/v1/invoices", map[string]any{"amount_wei": amount},
		map[string]string{"Idempotency-Key": fmt.Sprint(time.Now().UnixNano())})
	require.Equal(r.t, http.StatusCreated, code, "%v", inv)
	r.payURI(r.payer, fmt.Sprintf("ethereum:%s@%d?value=%s", inv["deposit_address"], r.chain.chainID, value))
	return inv
}

func (r *refundRig) untilInvoice(invoiceID int64, statuses ...string) map[string]any {
	r.t.Helper()
	var got map[string]any
	waitUntil(r.t, 120*time.Second, 300*time.Millisecond, func() bool {
		_, got = r.api.do("GET", fmt.Sprintf("/v1/invoices/%d", invoiceID), nil, nil)
		for _, s := range statuses {
			if got["status"] == s {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("invoice %d never %v: %v", invoiceID, statuses, got) })
	return got
}

// untilOutbound polls a refund or payout until it is status.
func (r *refundRig) untilOutbound(path string, status string) map[string]any {
	r.t.Helper()
	return r.untilOutboundOf(r.api, path, status)
}

// untilOutboundOf polls a merchant's refund or payout until it is status.
func (r *refundRig) untilOutboundOf(api apiClient, path string, status string) map[string]any {
	r.t.Helper()
	var got map[string]any
	waitUntil(r.t, 150*time.Second, 300*time.Millisecond, func() bool {
		_, got = api.do("GET", path, nil, nil)
		require.NotEqual(r.t, "FAILED", got["status"], "%s failed: %v", path, got)
		return got["status"] == status
	}, func() string { return fmt.Sprintf("%s never %s: %v", path, status, got) })
	return got
}

// refund asks for a refund of the invoice; it retries while the payment
// has not its confirmations yet (nothing_to_refund, refund_exceeds_received).
func (r *refundRig) refund(api apiClient, invoiceID int64, body map[string]any) map[string]any {
	r.t.Helper()
	key := fmt.Sprint(time.Now().UnixNano())
	var got map[string]any
	var code int
	waitUntil(r.t, 60*time.Second, 300*time.Millisecond, func() bool {
		code, got = api.do("POST", fmt.Sprintf("/v1/invoices/%d/refunds", invoiceID), body, map[string]string{"Idempotency-Key": key})
		return code == http.StatusCreated
	}, func() string { return fmt.Sprintf("refund never made: %d %v", code, got) })
	return got
}

func refundPath(v map[string]any) string { return fmt.Sprintf("/v1/refunds/%d", id(v)) }
func payoutPath(v map[string]any) string { return fmt.Sprintf("/v1/payouts/%d", id(v)) }

// TestServe_RefundsAndPayoutsEndToEnd is the "done when" on the dev
// chain (refundsFlow).
func TestServe_RefundsAndPayoutsEndToEnd(t *testing.T) {
	t.Parallel()
	r := newRefundRig(t, refundsDevChain(t))
	refundsFlow(t, r)
}

// refundsFlow runs every case against the rig's payd, then checks that
// nothing was paid twice and that the ledger of the run reconciles with
// the chain to the wei.
func refundsFlow(t *testing.T, r *refundRig) {
	ctx := r.ctx
	// The sweep role records the merchant's payout wallet; the merchant
	// funds it from its own wallet, in the native coin and the token.
	r.payout = r.payoutWallet(r.api)
	r.sendNative(r.merchant, r.payout, bigOf("3000000000000000000"))
	r.sendToken(r.merchant, r.payout, big.NewInt(500_000_000))
	merchantAddr := crypto.PubkeyToAddress(r.merchant.PublicKey)
	// The merchant's own wallet pays its merchant-paid requests
	// (docs/refunds.md, "Which transfer pays a merchant-paid request").
	code, settings := r.api.do("PUT", "/v1/merchant/payout-settings", map[string]any{"paying_wallets": []string{merchantAddr.Hex()}}, nil)
	require.Equal(t, http.StatusOK, code, "%v", settings)
	type sent struct {
		to     common.Address
		amount *big.Int
		token  bool
	}
	var expect []sent // every destination and what it must hold at the end: paid once

	t.Run("RefundOfAnOverpayment", func(t *testing.T) {
		defer r.use(t)()
		inv := r.paidInvoice("1000000000000000000", "1250000000000000000")
		r.untilInvoice(id(inv), "CONFIRMED", "SETTLED")
		dest := newAddr(t)
		ref := r.refund(r.api, id(inv), map[string]any{"reason": "overpayment", "destination": dest.Hex()})
		require.Equal(t, "250000000000000000", ref["amount"])
		done := r.untilOutbound(refundPath(ref), "CONFIRMED")
		require.NotNil(t, done["tx_hash"])
		expect = append(expect, sent{dest, bigOf("250000000000000000"), false})
		t.Logf("overpayment refunded from the %s", done["source"])
	})

	t.Run("RefundOfAWholeSettledInvoice_ServicePaid", func(t *testing.T) {
		defer r.use(t)()
		inv := r.paidInvoice("500000000000000000", "500000000000000000")
		r.untilInvoice(id(inv), "SETTLED")
		dest := newAddr(t)
		ref := r.refund(r.api, id(inv), map[string]any{"reason": "full", "destination": dest.Hex()})
		require.Equal(t, "500000000000000000", ref["amount"])
		done := r.untilOutbound(refundPath(ref), "CONFIRMED")
		require.Equal(t, "payout_wallet", done["source"], "after the sweep, from the payout wallet")
		require.Equal(t, r.payout.Hex(), done["from"])
		expect = append(expect, sent{dest, bigOf("500000000000000000"), false})
	})

	t.Run("RefundOfAWholeSettledInvoice_MerchantPaid", func(t *testing.T) {
		defer r.use(t)()
		inv := r.paidInvoice("300000000000000000", "300000000000000000")
		r.untilInvoice(id(inv), "SETTLED")
		dest := newAddr(t)
		ref := r.refund(r.api, id(inv), map[string]any{"reason": "full", "destination": dest.Hex(), "paid_by": "merchant"})
		require.Equal(t, "AWAITING_PAYMENT", ref["status"])
		uri := ref["payment_uri"].(string)
		require.Equal(t, fmt.Sprintf("ethereum:%s@%d?value=300000000000000000", dest.Hex(), r.chain.chainID), uri)
		r.payURI(r.merchant, uri) // from the merchant's own wallet: nothing custodial
		done := r.untilOutbound(refundPath(ref), "CONFIRMED")
		require.Equal(t, merchantAddr.Hex(), done["from"])
		expect = append(expect, sent{dest, bigOf("300000000000000000"), false})
	})

	// Issue #32: a service-paid and a merchant-paid request for the same
	// amount to the same destination, in either order, within one
	// merchant and across two: the service's transfer pays only its own;
	// the merchant-paid one waits for the merchant's, and the ledger
	// reconciles after each.
	otherRecv := newReceiver(t)
	other, otherSecret := r.newMerchant("Other shop", otherRecv.srv.URL+"/hooks")
	otherRecv.setSecret(otherSecret)
	otherWallet, err := crypto.GenerateKey()
	require.NoError(t, err)
	r.sendNative(r.payer, crypto.PubkeyToAddress(otherWallet.PublicKey), bigOf("1000000000000000000"))
	code, settings = other.do("PUT", "/v1/merchant/payout-settings", map[string]any{"paying_wallets": []string{crypto.PubkeyToAddress(otherWallet.PublicKey).Hex()}}, nil)
	require.Equal(t, http.StatusOK, code, "%v", settings)
	for _, c := range []struct {
		name              string
		merchantPaidFirst bool
		asker             apiClient
		askerWallet       *ecdsa.PrivateKey
	}{
		{"OneMerchant_MerchantPaidFirst", true, r.api, r.merchant},
		{"OneMerchant_ServicePaidFirst", false, r.api, r.merchant},
		{"TwoMerchants_MerchantPaidFirst", true, other, otherWallet},
		{"TwoMerchants_ServicePaidFirst", false, other, otherWallet},
	} {
		t.Run("ServicePaidTransferNeverPaysAMerchantPaidRequest_"+c.name, func(t *testing.T) {
			dest := newAddr(t)
			amount := "7700000000000000"
			body := func(paidBy string) map[string]any {
				b := map[string]any{"amount": amount, "destination": dest.Hex()}
				if paidBy != "" {
					b["paid_by"] = paidBy
				}
				return b
			}
			var asked, sentByService map[string]any
			askMerchantPaid := func() {
				var code int
				code, asked = c.asker.do("POST", "/v1/payouts", body("merchant"), map[string]string{"Idempotency-Key": "mp-" + c.name})
				require.Equal(t, http.StatusCreated, code, "%v", asked)
				require.Equal(t, "AWAITING_PAYMENT", asked["status"])
			}
			askServicePaid := func() {
				var code int
				code, sentByService = r.api.do("POST", "/v1/payouts", body(""), map[string]string{"Idempotency-Key": "sp-" + c.name})
				require.Equal(t, http.StatusCreated, code, "%v", sentByService)
			}
			if c.merchantPaidFirst {
				askMerchantPaid()
				askServicePaid()
			} else {
				askServicePaid()
				askMerchantPaid()
			}
			svc := r.untilOutbound(payoutPath(sentByService), "CONFIRMED")
			r.reconciled()
			_, still := c.asker.do("GET", payoutPath(asked), nil, nil)
			require.Equal(t, "AWAITING_PAYMENT", still["status"], "the service's transfer %v paid only its own payout", svc["tx_hash"])
			require.Nil(t, still["tx_hash"])
			// Named, the service's transaction is refused.
			code, refused := c.asker.do("POST", payoutPath(asked)+"/payment", map[string]any{"tx_hash": svc["tx_hash"]}, nil)
			require.Equal(t, http.StatusUnprocessableEntity, code, "%v", refused)
			require.Equal(t, "transfer_mismatch", refused["code"])
			// The merchant's own transfer pays it.
			r.payURI(c.askerWallet, still["payment_uri"].(string))
			done := r.untilOutboundOf(c.asker, payoutPath(asked), "CONFIRMED")
			require.NotEqual(t, svc["tx_hash"], done["tx_hash"])
			require.Equal(t, crypto.PubkeyToAddress(c.askerWallet.PublicKey).Hex(), done["from"])
			expect = append(expect, sent{dest, new(big.Int).Mul(bigOf(amount), big.NewInt(2)), false})
			r.reconciled()
		})
	}

	t.Run("RefundOfAWrongAssetToken", func(t *testing.T) {
		defer r.use(t)()
		code, inv := r.api.do("POST", "/v1/invoices", map[string]any{"amount_wei": "1000000000000000000"},
			map[string]string{"Idempotency-Key": "wrong-asset"})
		require.Equal(t, http.StatusCreated, code)
		r.sendToken(r.payer, common.HexToAddress(inv["deposit_address"].(string)), big.NewInt(7_500_000))
		dest := newAddr(t)
		ref := r.refund(r.api, id(inv), map[string]any{"reason": "wrong_asset", "destination": dest.Hex()})
		require.Equal(t, "7500000", ref["amount"])
		require.Equal(t, "USDC", ref["asset"].(map[string]any)["symbol"])
		done := r.untilOutbound(refundPath(ref), "CONFIRMED")
		require.Equal(t, "deposit", done["source"], "never swept: straight from the deposit address")
		expect = append(expect, sent{dest, big.NewInt(7_500_000), true})
	})

	t.Run("ClaimLinkRefundInARealBrowser", func(t *testing.T) {
		defer r.use(t)()
		inv := r.paidInvoice("200000000000000000", "200000000000000000")
		r.untilInvoice(id(inv), "CONFIRMED", "SETTLED")
		ref := r.refund(r.api, id(inv), map[string]any{"amount": "50000000000000000"})
		require.Equal(t, "AWAITING_DESTINATION", ref["status"])
		claimURL := ref["claim_url"].(string)
		require.True(t, strings.HasPrefix(claimURL, "http://"+r.apiAddr+"/claim#"), claimURL)
		dest := newAddr(t)
		claimInBrowser(t, claimURL, r.chain.chainID, dest, func() { r.untilOutbound(refundPath(ref), "CONFIRMED") })
		expect = append(expect, sent{dest, bigOf("50000000000000000"), false})
	})

	t.Run("BatchPayout_EachItemOnce", func(t *testing.T) {
		defer r.use(t)()
		a, b, c := newAddr(t), newAddr(t), newAddr(t)
		batch := map[string]any{"items": []map[string]any{
			{"idempotency_key": "b1", "amount": "10000000000000000", "destination": a.Hex(), "reference": "supplier A"},
			{"idempotency_key": "b2", "asset": "USDC", "amount_formatted": "2.5", "destination": b.Hex()},
			{"idempotency_key": "b3", "amount": "20000000000000000", "destination": c.Hex()},
		}}
		code, res := r.api.do("POST", "/v1/payouts", batch, nil)
		require.Equal(t, http.StatusOK, code, "%v", res)
		items := res["items"].([]any)
		var paths []string
		for _, it := range items {
			item := it.(map[string]any)
			require.EqualValues(t, 201, item["status"], "%v", item)
			paths = append(paths, payoutPath(item["payout"].(map[string]any)))
		}
		code, again := r.api.do("POST", "/v1/payouts", batch, nil)
		require.Equal(t, http.StatusOK, code)
		for _, it := range again["items"].([]any) {
			require.Equal(t, true, it.(map[string]any)["replayed"], "sent again: replayed, nothing made twice")
		}
		for _, p := range paths {
			r.untilOutbound(p, "CONFIRMED")
		}
		expect = append(expect, sent{a, bigOf("10000000000000000"), false}, sent{b, big.NewInt(2_500_000), true},
			sent{c, bigOf("20000000000000000"), false})
	})

	t.Run("PayoutAboveTheThreshold_ApprovedByASecondKey", func(t *testing.T) {
		defer r.use(t)()
		mk := func(scopes ...string) apiClient {
			code, k := r.api.do("POST", "/v1/merchant/api-keys", map[string]any{"name": strings.Join(scopes, "+"), "scopes": scopes}, nil)
			require.Equal(t, http.StatusCreated, code, "%v", k)
			return apiClient{t: t, base: r.api.base, key: k["api_key"].(string)}
		}
		payer, approver := mk("payouts", "read"), mk("approve", "read")
		code, s := r.api.do("PUT", "/v1/merchant/payout-settings", map[string]any{"assets": []map[string]any{
			{"asset": "ETH", "approval_threshold": "100000000000000000"}}}, nil)
		require.Equal(t, http.StatusOK, code, "%v", s)
		dest := newAddr(t)
		code, p := payer.do("POST", "/v1/payouts", map[string]any{"amount": "200000000000000000", "destination": dest.Hex()},
			map[string]string{"Idempotency-Key": "big"})
		require.Equal(t, http.StatusCreated, code, "%v", p)
		require.Equal(t, "AWAITING_APPROVAL", p["status"])
		code, _ = payer.do("POST", payoutPath(p)+"/approve", nil, nil)
		require.Equal(t, http.StatusForbidden, code, "the key that made it has no approve scope")
		code, own := r.api.do("POST", payoutPath(p)+"/approve", nil, nil)
		require.Equal(t, http.StatusOK, code, "%v", own) // the merchant's own key is a second key too…
		require.Equal(t, "QUEUED", own["status"])
		// …and a scoped approver approves the next one.
		code, p2 := payer.do("POST", "/v1/payouts", map[string]any{"amount": "150000000000000000", "destination": dest.Hex()},
			map[string]string{"Idempotency-Key": "big2"})
		require.Equal(t, http.StatusCreated, code, "%v", p2)
		code, ap := approver.do("POST", payoutPath(p2)+"/approve", nil, nil)
		require.Equal(t, http.StatusOK, code, "%v", ap)
		r.untilOutbound(payoutPath(p), "CONFIRMED")
		r.untilOutbound(payoutPath(p2), "CONFIRMED")
		code, _ = r.api.do("PUT", "/v1/merchant/payout-settings", map[string]any{}, nil)
		require.Equal(t, http.StatusOK, code)
		expect = append(expect, sent{dest, bigOf("350000000000000000"), false})
	})

	t.Run("ConcurrentDoubleRefund_ExactlyOneSucceeds", func(t *testing.T) {
		defer r.use(t)()
		inv := r.paidInvoice("400000000000000000", "400000000000000000")
		r.untilInvoice(id(inv), "CONFIRMED", "SETTLED")
		one := newAddr(t)
		first := r.refund(r.api, id(inv), map[string]any{"amount": "1", "destination": one.Hex()}) // confirmed: refunds accepted now
		expect = append(expect, sent{one, big.NewInt(1), false})
		dest := newAddr(t)
		const n = 6
		codes := make([]int, n)
		bodies := make([]map[string]any, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], bodies[i] = r.api.do("POST", fmt.Sprintf("/v1/invoices/%d/refunds", id(inv)),
					map[string]any{"reason": "full", "destination": dest.Hex()}, map[string]string{"Idempotency-Key": fmt.Sprintf("twice-%d", i)})
			}()
		}
		wg.Wait()
		var made map[string]any
		for i, c := range codes {
			if c == http.StatusCreated {
				require.Nil(t, made, "two refunds made: %v", codes)
				made = bodies[i]
			} else {
				require.Equal(t, http.StatusUnprocessableEntity, c, "%v", bodies[i])
			}
		}
		require.NotNil(t, made, "%v", codes)
		require.Equal(t, "399999999999999999", made["amount"])
		r.untilOutbound(refundPath(made), "CONFIRMED")
		r.untilOutbound(refundPath(first), "CONFIRMED")
		expect = append(expect, sent{dest, bigOf("399999999999999999"), false})
	})

	t.Run("KilledWorkerMidFlight_NothingSentTwice", func(t *testing.T) {
		defer r.use(t)()
		st, err := postgres.Open(ctx, r.dbURL, postgres.Config{MaxOpenConns: 2})
		require.NoError(t, err)
		defer st.Close()
		// Twice: once a funding of a send is stored, once a send is.
		for round, kind := range []string{store.SweepTxFunding, store.SweepTxOutbound} {
			var paths []string
			var dests []sent
			for i, amt := range []string{"30000000000000000", "40000000000000000"} {
				d := newAddr(t)
				code, p := r.api.do("POST", "/v1/payouts", map[string]any{"amount": amt, "destination": d.Hex()},
					map[string]string{"Idempotency-Key": fmt.Sprintf("kill-%d-%d", round, i)})
				require.Equal(t, http.StatusCreated, code, "%v", p)
				paths = append(paths, payoutPath(p))
				dests = append(dests, sent{d, bigOf(amt), false})
			}
			waitUntil(t, 60*time.Second, 20*time.Millisecond, func() bool {
				for _, p := range paths {
					var oid int64
					fmt.Sscanf(p, "/v1/payouts/%d", &oid)
					txs, err := st.ListSweepTxsByOutbound(ctx, oid)
					require.NoError(t, err)
					for _, tx := range txs {
						if tx.Kind == kind {
							return true
						}
					}
				}
				return false
			}, func() string { return "no " + kind + " was stored" })
			r.killWorkers()
			t.Logf("killed the workers (SIGKILL) once a %s was stored", kind)
			r.startWorkers()
			for _, p := range paths {
				r.untilOutbound(p, "CONFIRMED")
				var oid int64
				fmt.Sscanf(p, "/v1/payouts/%d", &oid)
				txs, err := st.ListSweepTxsByOutbound(ctx, oid)
				require.NoError(t, err)
				mined := 0
				for _, tx := range txs {
					if tx.Kind == store.SweepTxOutbound && tx.Status == store.SweepTxMined {
						mined++
					}
				}
				require.Equal(t, 1, mined, "%s: one send mined", p)
			}
			expect = append(expect, dests...)
		}
	})

	// Nothing was paid twice: every destination holds exactly what was
	// sent to it, once.
	for _, e := range expect {
		got := r.balance(e.to)
		if e.token {
			got = r.tokenBalance(e.to)
		}
		require.Equal(t, e.amount.String(), got.String(), "%s", e.to.Hex())
	}

	// Webhooks: every state, signed.
	waitUntil(t, 30*time.Second, 300*time.Millisecond, func() bool {
		return r.recv.count("refund.confirmed") >= 7 && r.recv.count("payout.confirmed") >= 9
	}, func() string {
		return fmt.Sprintf("refund.confirmed %d, payout.confirmed %d", r.recv.count("refund.confirmed"), r.recv.count("payout.confirmed"))
	})
	require.GreaterOrEqual(t, r.recv.count("refund.awaiting_destination"), 1)
	require.GreaterOrEqual(t, r.recv.count("refund.awaiting_payment"), 1)
	require.GreaterOrEqual(t, r.recv.count("payout.awaiting_approval"), 2)
	r.recv.mu.Lock()
	require.Empty(t, r.recv.bad, "every webhook carried a valid signature")
	r.recv.mu.Unlock()

	// The ledger: the export has the refunds and payouts with their
	// transactions…
	code, _ = r.api.do("GET", "/v1/ledger?format=jsonl", nil, nil)
	require.Equal(t, http.StatusOK, code)
	kinds := r.ledgerKinds()
	for _, k := range []string{"payment", "sweep", "gas_funding", "gas_fee", "refund", "payout", "wallet_funding"} {
		require.Positive(t, kinds[k], "the ledger has %s entries: %v", k, kinds)
	}
	// …and reconciles with the chain to the wei, once the ledger has
	// followed the last block of the run.
	rec := r.reconciled()
	roles := map[string]int{}
	for _, w := range rec["wallets"].([]any) {
		roles[w.(map[string]any)["role"].(string)]++
	}
	require.Positive(t, roles["deposit"])
	require.Positive(t, roles["payout"])
	require.Positive(t, roles["sweep"])
	require.Positive(t, roles["funder"])
	t.Logf("reconciled at block %v: %v ledger entries, %v wallet balances, by role %v", rec["block"], rec["entries"],
		len(rec["wallets"].([]any)), roles)
	cmd := exec.Command(paydBinary(t), "reconcile", "--all")
	cmd.Env = append(os.Environ(), r.env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), " 0 differ")
}

// ledgerKinds counts the merchant's ledger entries by kind (its JSON-lines
// export).
func (r *refundRig) ledgerKinds() map[string]int {
	r.t.Helper()
	req, err := http.NewRequest("GET", r.api.base+"/v1/ledger?format=jsonl", nil)
	require.NoError(r.t, err)
	req.Header.Set("Authorization", "Bearer "+r.api.key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(r.t, err)
	defer resp.Body.Close()
	out := map[string]int{}
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var e struct {
			Kind   string  `json:"kind"`
			TxHash *string `json:"tx_hash"`
		}
		require.NoError(r.t, dec.Decode(&e))
		if e.Kind != "opening_balance" {
			require.NotNil(r.t, e.TxHash, "%s without its transaction", e.Kind)
		}
		out[e.Kind]++
	}
	return out
}

// count is how many events of typ the receiver got (once each).
func (r *receiver) count(typ string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, e := range r.events {
		if e.Type == typ {
			seen[e.ID] = true
		}
	}
	return len(seen)
}

func bigOf(s string) *big.Int {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic("not a decimal: " + s)
	}
	return v
}
