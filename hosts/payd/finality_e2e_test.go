package main

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// forkAt rewinds c to its block n and seals one block there carrying a
// transfer of chain id's coin from the first dev account: the chain goes
// on from a branch that leaves the old one after block n.
func (c *devChain) forkAt(t *testing.T, id, n uint64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	h, err := c.backend.Client().HeaderByNumber(context.Background(), new(big.Int).SetUint64(n))
	require.NoError(t, err)
	require.NoError(t, c.backend.Fork(h.Hash()))
	c.sendDevTransfer(t, id)
	c.backend.Commit()
}

// sendDevTransfer sends 1 wei of chain id's coin from the first dev
// account to a fixed address (a block that carries it differs from one
// that does not).
func (c *devChain) sendDevTransfer(t *testing.T, id uint64) {
	t.Helper()
	ctx := context.Background()
	w, err := devWallet()
	require.NoError(t, err)
	key, err := w.PrivateKey(0)
	require.NoError(t, err)
	from, err := w.Address(0)
	require.NoError(t, err)
	nonce, err := c.backend.Client().PendingNonceAt(ctx, from)
	require.NoError(t, err)
	to := common.HexToAddress("0x00000000000000000000000000000000000000bb")
	chain := new(big.Int).SetUint64(id)
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chain), &types.DynamicFeeTx{
		ChainID: chain, Nonce: nonce, To: &to, Value: big.NewInt(1), Gas: 21000,
		GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(100 * params.GWei)})
	require.NoError(t, err)
	require.NoError(t, c.backend.Client().SendTransaction(ctx, tx))
}

// A reorg of a block recorded as finalized on the second chain (finality
// "tag": go-ethereum's simulated beacon finalises every 32nd block) is
// refused by that chain's indexer. That stops the chain's parts only:
// /readyz and the status report name it and why, and the first chain's
// invoices still confirm. (It once stopped the whole process.)
func TestServe_TwoChains_FinalizedBlockReorged_StopsOnlyThatChain(t *testing.T) {
	t.Parallel()
	r := newTwoChains(t, roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleWebhooks: true},
		func(c *appConfig) { c.chains[0].finality, c.chains[0].confirmations = store.FinalityTag, 0 })
	r.reorgFinalized(secondDevChain, fmt.Sprintf(`"indexer@%d":"%s"`, secondDevChain, problemReorgTooDeep))

	_, other := r.unhealthyOtherChain(problemReorgTooDeep)
	require.Contains(t, other["reason"], "finalized")
	r.refusesInvoicesOn(secondDevChain)

	inv := r.create(map[string]any{"amount_wei": "300000000000000000"})
	r.pay(devChainID, inv["payment_uri"].(string))
	r.waitStatus(inv, store.StatusConfirmed, 60*time.Second)
}

// An API process that does not run a chain (roles placed apart) refuses
// new invoices on it too once the process that runs it stopped its parts:
// the stop is recorded in the database (store.StopStore) and read by the
// API. Its other chain still takes invoices.
func TestServe_ChainStoppedInAnotherProcess_TheAPIRefusesItsInvoices(t *testing.T) {
	t.Parallel()
	r := newTwoChains(t, roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleWebhooks: true},
		func(c *appConfig) { c.chains[0].finality, c.chains[0].confirmations = store.FinalityTag, 0 })
	apiOnly := r.cfg
	apiOnly.roles = roleSet{roleAPI: true}
	api := r.start(apiOnly)
	require.Nil(t, api.unitOf(secondDevChain).svc, "the API process runs nothing of the chain")

	other := apiClient{t: t, base: api.httpURL(), key: r.api.key}
	r.reorgFinalized(secondDevChain, fmt.Sprintf(`"indexer@%d":"%s"`, secondDevChain, problemReorgTooDeep))
	recorded, _, ok, err := r.st.Chain(secondDevChain).ChainStop(context.Background())
	require.NoError(t, err)
	require.True(t, ok, "the stop is recorded")
	require.Equal(t, problemReorgTooDeep, recorded)

	var refused map[string]any
	waitUntil(t, 3*stopReadEvery, 100*time.Millisecond, func() bool {
		var code int
		code, refused = other.do("POST", "/v1/invoices", map[string]any{"amount_wei": "1", "chain_id": secondDevChain},
			map[string]string{"Idempotency-Key": fmt.Sprint(time.Now().UnixNano())})
		if code == http.StatusCreated {
			return false // read before the stop was recorded
		}
		require.Equal(t, http.StatusServiceUnavailable, code, "%v", refused)
		return true
	}, func() string { return "the API process refuses invoices on the stopped chain" })
	require.Equal(t, problem.CodeChainUnavailable, refused["code"])
	code, inv := other.do("POST", "/v1/invoices", map[string]any{"amount_wei": "1"}, map[string]string{"Idempotency-Key": "first"})
	require.Equal(t, http.StatusCreated, code, "%v", inv)

	// The operator asking the API process sees the stop too.
	op := apiClient{t: t, base: api.httpURL(), key: api.adminToken}
	code, status := op.do("GET", "/v1/admin/status", nil, nil)
	require.Equal(t, http.StatusOK, code, "%v", status)
	require.Equal(t, false, status["healthy"], "%v", status)
	require.Nil(t, status["chain"].(map[string]any)["problem"], "the first chain runs")
	require.Len(t, status["other_chains"], 1)
	second := status["other_chains"].([]any)[0].(map[string]any)
	require.EqualValues(t, secondDevChain, second["chain_id"])
	require.Equal(t, true, second["runs_elsewhere"])
	require.Equal(t, problemReorgTooDeep, second["problem"])
	require.Contains(t, second["reason"], "as the process that runs them recorded")
}

// The same refused reorg on the first chain stops the first chain's parts
// only, now that the process serves another: the API and webhooks go on,
// /readyz and the status report name the first chain's indexer, and the
// second chain's invoices are still created and confirmed. (With one
// chain, a chain problem still stops the process: identity_e2e_test.go.)
func TestServe_TwoChains_FirstChainsFinalizedBlockReorged_StopsOnlyThatChain(t *testing.T) {
	t.Parallel()
	r := newTwoChains(t, roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleWebhooks: true},
		func(c *appConfig) { c.chain.finality, c.chain.confirmations = store.FinalityTag, 0 })
	open := r.create(map[string]any{"amount_wei": "1000"}) // on the first chain, before the stop
	r.reorgFinalized(devChainID, `"indexer":"`+problemReorgTooDeep+`"`)
	// Its checkout learns that payments on the chain are seen late.
	_, pub := r.api.do("GET", "/v1/public/invoice", nil, map[string]string{"Authorization": "Bearer " + open["lookup_token"].(string)})
	require.Equal(t, []any{float64(devChainID)}, pub["delayed_chains"], "%v", pub)

	op := apiClient{t: t, base: r.app.httpURL(), key: r.app.adminToken}
	code, status := op.do("GET", "/v1/admin/status", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, false, status["healthy"])
	chain := status["chain"].(map[string]any)
	require.Equal(t, problemReorgTooDeep, chain["problem"])
	require.Contains(t, chain["reason"], "finalized")
	require.Nil(t, status["other_chains"].([]any)[0].(map[string]any)["problem"], "the second chain is fine")

	r.refusesInvoicesOn(devChainID)
	inv := r.create(map[string]any{"amount_wei": "300000000000000000", "chain_id": secondDevChain})
	r.pay(secondDevChain, inv["payment_uri"].(string))
	r.waitStatus(inv, store.StatusConfirmed, 60*time.Second)
}

// refusesInvoicesOn checks that the API creates no invoice on chain id,
// whose parts stopped: its payer would pay into an address nobody watches.
func (r *twoChains) refusesInvoicesOn(id uint64) {
	r.t.Helper()
	code, refused := r.api.do("POST", "/v1/invoices", map[string]any{"amount_wei": "1", "chain_id": id},
		map[string]string{"Idempotency-Key": fmt.Sprint("stopped-", id)})
	require.Equal(r.t, http.StatusServiceUnavailable, code, "%v", refused)
	require.Equal(r.t, problem.CodeChainUnavailable, refused["code"])
	require.Contains(r.t, refused["detail"], fmt.Sprintf("chain %d", id))
}

// reorgFinalized waits until chain id's finalized block 32 is recorded
// (finality "tag"), rewinds the chain to block 30 and waits until /readyz
// answers 503 with readyz in its body.
func (r *twoChains) reorgFinalized(id uint64, readyz string) {
	t := r.t
	t.Helper()
	waitUntil(t, 90*time.Second, 200*time.Millisecond, func() bool {
		n, ok, err := r.st.Chain(id).FinalizedBlock(context.Background())
		return err == nil && ok && n >= 32
	}, func() string { return fmt.Sprintf("chain %d's finalized block 32 recorded", id) })
	r.chains[id].forkAt(t, id, 30)
	waitUntil(t, 60*time.Second, 200*time.Millisecond, func() bool {
		code, body := getBody(t, r.app.httpURL()+"/readyz", "")
		return code == http.StatusServiceUnavailable && strings.Contains(body, readyz)
	}, func() string { _, body := getBody(t, r.app.httpURL()+"/readyz", ""); return "readyz: " + body })
}
