package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// front is a node's HTTP front that the test can kill: a real reverse
// proxy to the one dev chain, so that two fronts are two nodes of one chain.
type front struct {
	url  string
	ln   net.Listener
	srv  *http.Server
	once sync.Once
}

func newFront(t *testing.T, node string) *front {
	u, err := url.Parse(node)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &front{url: "http://" + ln.Addr().String(), ln: ln, srv: &http.Server{Handler: httputil.NewSingleHostReverseProxy(u)}}
	go func() { _ = f.srv.Serve(ln) }()
	t.Cleanup(f.kill)
	return f
}

// kill closes the front and every connection through it.
func (f *front) kill() { f.once.Do(func() { _ = f.srv.Close() }) }

// payd serve with RPC_URL naming two nodes of one chain: invoices are paid
// and settled while the node in use is killed mid-run; no block is lost
// (every payment is recorded) and nothing is sent twice (one sweep each,
// the merchant paid exactly).
func TestServe_TwoNodes_OneKilledMidRun_NoBlockLostNothingSentTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	secrets := t.TempDir()
	m, err := hdwallet.GenerateMnemonic(24)
	require.NoError(t, err)
	funder, err := crypto.GenerateKey()
	require.NoError(t, err)
	payer, err := crypto.GenerateKey()
	require.NoError(t, err)
	chainAddr := freeAddr(t)
	startProcess(t, "devchain", nil, "devchain", "--chain-rpc", chainAddr, "--block-time", "300ms",
		"--fund", crypto.PubkeyToAddress(funder.PublicKey).Hex()+","+crypto.PubkeyToAddress(payer.PublicKey).Hex())
	waitRPC(t, "http://"+chainAddr)
	a, b := newFront(t, "http://"+chainAddr), newFront(t, "http://"+chainAddr)

	env := []string{"DATABASE_URL=" + dbURL, "RPC_URL=" + a.url + "," + b.url, "CHAIN_ID=1337", "CONFIRMATIONS=3",
		"WEBHOOK_ALLOW_PRIVATE_NETWORKS=true",
		"PAY_MNEMONIC_FILE=" + writeSecret(t, secrets, "mnemonic", m.Phrase()),
		"PAY_SECRET_KEY_FILE=" + writeSecret(t, secrets, "secret-key", hex.EncodeToString(crypto.Keccak256([]byte(t.Name())))),
		"GAS_FUNDER_PRIVATE_KEY_FILE=" + writeSecret(t, secrets, "funder", hex.EncodeToString(crypto.FromECDSA(funder))),
		"PAY_ADMIN_TOKEN_FILE=" + writeSecret(t, secrets, "admin-token", "operator-token-for-tests"),
	}
	apiAddr := freeAddr(t)
	startProcess(t, "serve", env, "serve", "--roles", "all", "--http", apiAddr, "--rpc-proxy", freeAddr(t), "--metrics", "")
	waitHTTP(t, "http://"+apiAddr+"/readyz", 90*time.Second)
	settle, err := crypto.GenerateKey()
	require.NoError(t, err)
	payTo := crypto.PubkeyToAddress(settle.PublicKey)
	create := exec.Command(paydBinary(t), "merchants", "create", "--settlement-address", payTo.Hex(), "--name", "shop")
	create.Env = append(os.Environ(), env...)
	out, err := create.CombinedOutput()
	require.NoError(t, err, "%s", out)
	key := regexp.MustCompile(`api_key=(\S+)`).FindSubmatch(out)
	require.NotNil(t, key, "%s", out)
	api := apiClient{t: t, base: "http://" + apiAddr, key: string(key[1])}

	eth, err := ethclient.DialContext(ctx, "http://"+chainAddr)
	require.NoError(t, err)
	t.Cleanup(eth.Close)
	const n = 6
	var ids []int64
	total := new(big.Int)
	for i := range n {
		amount := big.NewInt(int64(1e15) * int64(i+1))
		code, inv := api.do("POST", "/v1/invoices", map[string]any{"amount_wei": amount.String()}, map[string]string{"Idempotency-Key": fmt.Sprint(i)})
		require.Equal(t, http.StatusCreated, code, "%v", inv)
		ids = append(ids, id(inv))
		total.Add(total, amount)
		sendNativeTx(t, ctx, eth, 1337, payer, common.HexToAddress(inv["deposit_address"].(string)), amount, big.NewInt(2_000_000_000))
		if i == n/2 {
			a.kill() // the node reads go to (the first listed) dies mid-run
			t.Log("killed the first node")
		}
	}
	for _, invID := range ids {
		waitUntil(t, 120*time.Second, 300*time.Millisecond, func() bool {
			_, got := api.do("GET", fmt.Sprintf("/v1/invoices/%d", invID), nil, nil)
			return got["status"] == store.StatusSettled
		}, func() string { return fmt.Sprintf("invoice %d never SETTLED", invID) })
	}
	bal, err := eth.BalanceAt(ctx, payTo, nil)
	require.NoError(t, err)
	require.Equal(t, total.String(), bal.String(), "the merchant got exactly what was paid: nothing sent twice")
	db, err := postgres.Open(ctx, dbURL, postgres.Config{MaxOpenConns: 2})
	require.NoError(t, err)
	defer db.Close()
	st := onRecordedChain(t, db)
	for _, invID := range ids {
		txs, err := st.ListSweepTxsByInvoice(ctx, invID)
		require.NoError(t, err)
		sweeps := 0
		for _, tx := range txs {
			if tx.Kind == store.SweepTxSweep && tx.Status == store.SweepTxMined {
				sweeps++
			}
		}
		require.Equal(t, 1, sweeps, "invoice %d: one sweep mined", invID)
	}
	// Every block of the run is indexed once, in order: none was lost.
	head, err := eth.BlockNumber(ctx)
	require.NoError(t, err)
	cur, err := st.GetCursor(ctx, store.CursorIndexer)
	require.NoError(t, err)
	for n := cur.BlockNumber; n > 0 && n+20 > cur.BlockNumber; n-- {
		blk, err := st.GetBlock(ctx, n)
		require.NoError(t, err, "block %d indexed", n)
		parent, err := st.GetBlock(ctx, n-1)
		require.NoError(t, err, "block %d indexed", n-1)
		require.Equal(t, parent.Hash, blk.ParentHash, "block %d builds on the indexed %d", n, n-1)
	}
	require.LessOrEqual(t, cur.BlockNumber, head)
}
