//go:build evmd

package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/rpcreplay"
	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// devSide is the geth dev chain (`payd devchain`, chain 1337) beside evmd
// in the two-chain run: the evmd payer's key is funded there too, and a
// USDC of its own is deployed.
type devSide struct {
	url  string
	eth  *ethclient.Client
	usdc *testtoken.Token
}

// TestEvmd_TwoChains_OneServe runs one `payd serve` on two chains at once:
// evmd v0.7.0 (the environment's chain, instant finality) and the geth dev
// chain (CHAINS_FILE). Invoices on each settle and sweep on their chain; an
// invoice accepting USDC on both is paid on either; a payment sent on the
// wrong one of the two is recorded and refunded there. evmd's answers are
// recorded for TestEvmdTwoChainsReplay.
func TestEvmd_TwoChains_OneServe(t *testing.T) {
	r := newEvmdRig(t)
	dev := r.startDevSide()
	chains := filepath.Join(t.TempDir(), "chains.json")
	require.NoError(t, os.WriteFile(chains, []byte(fmt.Sprintf(`{"chains": [{"chain_id": %d, "rpc_url": %q, "name": "geth dev",
		"confirmations": 2, "tokens": [{"symbol": "USDC", "address": %q, "decimals": 6}]}]}`,
		devChainID, dev.url, dev.usdc.Address.Hex())), 0o600))
	r.startServeOne(pgtest.URL(t), dev, "FINALITY=instant", "NATIVE_SYMBOL=TEST", "PRICING_SYMBOLS=TEST=ETH", "CHAINS_FILE="+chains)

	// 1. A native invoice on evmd: CONFIRMED within a few blocks (instant
	// finality), settled on evmd.
	onEvmd := r.create(map[string]any{"amount_wei": "250000000000000000"})
	require.EqualValues(t, r.node.chainID, onEvmd["chain_id"])
	paid := time.Now()
	r.payWithEthers(onEvmd["payment_uri"].(string))
	r.untilStatus(int64(onEvmd["id"].(float64)), "CONFIRMED", 60*time.Second)
	figure(t, "two chains: evmd native paid→confirmed (instant)", time.Since(paid))
	got, _ := r.untilStatus(int64(onEvmd["id"].(float64)), "SETTLED", 120*time.Second)
	figure(t, "two chains: evmd native paid→settled", time.Since(paid))
	require.Equal(t, "SWEPT", got["sweep_status"])
	r.note(int64(onEvmd["id"].(float64)), onEvmd, got)

	// 2. A native invoice on the dev chain, paid there, settled there.
	onDev := r.create(map[string]any{"amount_wei": "300000000000000000", "chain_id": devChainID})
	require.Contains(t, onDev["payment_uri"], fmt.Sprintf("@%d", devChainID))
	paid = time.Now()
	r.payOn(dev.url, onDev["payment_uri"].(string))
	got, _ = r.untilStatus(int64(onDev["id"].(float64)), "SETTLED", 120*time.Second)
	figure(t, "two chains: dev native paid→settled", time.Since(paid))
	bal, err := dev.eth.BalanceAt(r.ctx, r.settle, nil)
	require.NoError(t, err)
	require.Equal(t, "300000000000000000", bal.String(), "swept on the dev chain")

	// 3. Fiat invoices accepting USDC on both chains: one paid on the dev
	// chain (it moves there), one on evmd (it stays).
	both := func() map[string]any {
		inv := r.create(map[string]any{"price": map[string]string{"amount": "5.00", "currency": "USD"},
			"accept": []string{"USDC", fmt.Sprintf("USDC@%d", devChainID)}})
		qs := inv["quotes"].([]any)
		require.Len(t, qs, 2)
		require.EqualValues(t, devChainID, qs[1].(map[string]any)["chain_id"])
		return inv
	}
	movesToDev := both()
	q := movesToDev["quotes"].([]any)[1].(map[string]any)
	paid = time.Now()
	r.payOn(dev.url, q["payment_uri"].(string))
	got, _ = r.untilStatus(int64(movesToDev["id"].(float64)), "SETTLED", 120*time.Second)
	figure(t, "two chains: USDC@dev of an evmd invoice paid→settled", time.Since(paid))
	require.EqualValues(t, devChainID, got["chain_id"], "paid on the dev chain: the invoice moved there")
	devUSDC, err := dev.usdc.BalanceOf(r.ctx, r.settle)
	require.NoError(t, err)
	require.Equal(t, q["amount"], devUSDC.String(), "swept on the dev chain")
	staysOnEvmd := both()
	paid = time.Now()
	r.payWithEthers(staysOnEvmd["payment_uri"].(string))
	got, _ = r.untilStatus(int64(staysOnEvmd["id"].(float64)), "SETTLED", 120*time.Second)
	figure(t, "two chains: USDC@evmd paid→settled", time.Since(paid))
	require.EqualValues(t, r.node.chainID, got["chain_id"])
	r.note(int64(staysOnEvmd["id"].(float64)), staysOnEvmd, got)

	// 4. The wrong network: a dev-chain invoice's address paid on evmd.
	wrong := r.create(map[string]any{"amount_wei": "200000000000000000", "chain_id": devChainID})
	r.sendNative(common.HexToAddress(wrong["deposit_address"].(string)), mustBig("200000000000000000"))
	id := int64(wrong["id"].(float64))
	waitUntil(t, 60*time.Second, 500*time.Millisecond, func() bool { return r.invoice(id)["needs_attention"] == true },
		func() string { return fmt.Sprintf("the wrong-network payment was never seen: %v", r.invoice(id)) })
	back, err := crypto.GenerateKey()
	require.NoError(t, err)
	backAddr := crypto.PubkeyToAddress(back.PublicKey)
	var refund map[string]any
	code, refund := r.api.do("POST", fmt.Sprintf("/v1/invoices/%d/refunds", id),
		map[string]any{"reason": "wrong_network", "destination": backAddr.Hex()}, map[string]string{"Idempotency-Key": "wn"})
	require.Equal(t, http.StatusCreated, code, "%v", refund)
	require.EqualValues(t, r.node.chainID, refund["chain_id"])
	rid := int64(refund["id"].(float64))
	waitUntil(t, 120*time.Second, 500*time.Millisecond, func() bool {
		_, refund = r.api.do("GET", fmt.Sprintf("/v1/refunds/%d", rid), nil, nil)
		return refund["status"] == "CONFIRMED"
	}, func() string { return fmt.Sprintf("refund: %v", refund) })
	require.Equal(t, "200000000000000000", r.nativeBalance(backAddr).String(), "refunded on evmd")
	refundTxs, err := openStore(t, r.env).Chain(r.node.chainID).ListSweepTxsByInvoice(r.ctx, id)
	require.NoError(t, err)
	require.NotEmpty(t, refundTxs, "the refund's transactions on evmd")
	r.wrongNetwork = append(r.wrongNetwork, evmdWrongNetwork{InvoiceChainID: devChainID,
		DepositAddress: wrong["deposit_address"].(string), Amount: "200000000000000000", SweepTxs: refundTxs})
	r.movedAway = append(r.movedAway, movesToDev["deposit_address"].(string))

	// Both chains' ledgers reconcile.
	for _, url := range []string{r.rpc, dev.url} {
		var out strings.Builder
		env := map[string]string{"RPC_URL": url}
		for _, kv := range r.env {
			if k, v, _ := strings.Cut(kv, "="); k == "DATABASE_URL" {
				env[k] = v
			}
		}
		require.NoError(t, reconcile(r.ctx, nil, envOf(env), &out), "%s: %s", url, out.String())
	}
	r.saveTwoChainsRecording()
}

// startDevSide starts `payd devchain` (chain 1337) with the evmd payer
// funded, and deploys and mints its USDC.
func (r *evmdRig) startDevSide() devSide {
	t := r.t
	addr := freeAddr(t)
	payer := crypto.PubkeyToAddress(r.payer.PublicKey)
	startProcess(t, "devchain", nil, "devchain", "--chain-rpc", addr, "--fund", payer.Hex())
	url := "http://" + addr
	waitRPC(t, url)
	eth, err := ethclient.DialContext(r.ctx, url)
	require.NoError(t, err)
	t.Cleanup(eth.Close)
	opts := bind.NewKeyedTransactor(r.payer, big.NewInt(devChainID))
	opts.Context = r.ctx
	usdc, tx, err := testtoken.DeployStable(opts, eth)
	require.NoError(t, err)
	waitMined(t, r.ctx, eth, tx, 60*time.Second)
	tx, err = usdc.Mint(opts, payer, big.NewInt(1_000_000_000_000))
	require.NoError(t, err)
	waitMined(t, r.ctx, eth, tx, 60*time.Second)
	return devSide{url: url, eth: eth, usdc: usdc}
}

// payOn pays an EIP-681 URI on the chain at url with ethers.js.
func (r *evmdRig) payOn(url, uri string) {
	r.t.Helper()
	saved := r.rpc
	r.rpc = url
	defer func() { r.rpc = saved }()
	r.payWithEthers(uri)
}

// startServeOne starts one payd serve with every role on the rig's chain
// (and CHAINS_FILE's), the gas funder funded on evmd and on the dev chain.
func (r *evmdRig) startServeOne(dbURL string, dev devSide, extraEnv ...string) {
	t := r.t
	r.startServeWith(dbURL, func(funder common.Address) {
		tip, err := dev.eth.SuggestGasTipCap(r.ctx)
		require.NoError(t, err)
		sendNativeTx(t, r.ctx, dev.eth, devChainID, r.payer, funder, mustBig("50000000000000000000"), tip)
	}, true, extraEnv...)
}

// saveTwoChainsRecording writes evmd's answers of the two-chain run to
// testdata/evmd-two-chains (EVMPAY_EVMD_RECORD set).
func (r *evmdRig) saveTwoChainsRecording() {
	if os.Getenv("EVMPAY_EVMD_RECORD") == "" {
		return
	}
	t := r.t
	calls := r.rec.Calls()
	m := r.recordedManifest(calls)
	m.WrongNetwork, m.MovedAway, m.Finality = r.wrongNetwork, r.movedAway, "instant"
	dir := filepath.Join("testdata", "evmd-two-chains")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, rpcreplay.Save(filepath.Join(dir, "transcript.jsonl.gz"), calls))
	b, err := json.MarshalIndent(m, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), append(b, '\n'), 0o644))
	t.Logf("recorded %d calls up to block %d into %s (payer %s)", len(calls), m.Head, dir, hex.EncodeToString(crypto.PubkeyToAddress(r.payer.PublicKey).Bytes()))
}
