package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/sweep"
)

// swapRig is two dev chains with the same chain id and the same genesis
// (what a restarted `payd devchain` is) behind one switchable URL, and
// payd's roles in three in-process apps on one PostgreSQL database.
type swapRig struct {
	t        *testing.T
	a, b     *devChain
	proxy    *httptest.Server
	target   atomic.Pointer[url.URL]
	st       store.Store
	keysDir  string
	logs     syncBuffer
	apps     map[string]*app
	done     map[string]chan error
	cancel   context.CancelFunc
	stopOnce sync.Once
}

func newSwapRig(t *testing.T) *swapRig {
	t.Helper()
	r := &swapRig{t: t, st: pgtest.New(t), keysDir: t.TempDir(), apps: map[string]*app{}, done: map[string]chan error{}}
	var err error
	r.a, err = startDevChain(freeAddr(t), time.Hour, nil)
	require.NoError(t, err)
	t.Cleanup(func() { r.a.backend.Close() })
	r.b, err = startDevChain(freeAddr(t), time.Hour, nil)
	require.NoError(t, err)
	t.Cleanup(func() { r.b.backend.Close() })
	r.point(r.a)
	r.proxy = httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(r.target.Load())
	}})
	t.Cleanup(r.proxy.Close)
	return r
}

// point sends every later request to the node at c.
func (r *swapRig) point(c *devChain) {
	u, err := url.Parse(c.url)
	require.NoError(r.t, err)
	r.target.Store(u)
}

// mine seals n blocks on c; on chain b each carries a transfer, so that
// b differs from a from block 1 on although their genesis is the same.
func (r *swapRig) mine(c *devChain, n int) {
	r.t.Helper()
	for range n {
		if c == r.b {
			c.sendDevTransfer(r.t, devChainID)
		}
		c.backend.Commit()
	}
}

// newApp builds a payd process with the given roles on the rig's URL and
// database.
func (r *swapRig) newApp(roles ...string) (*app, error) {
	r.t.Helper()
	return r.newAppWith(roles, nil)
}

// newAppWith is newApp with opt changing the configuration (nil: none).
func (r *swapRig) newAppWith(roles []string, opt func(*appConfig)) (*app, error) {
	r.t.Helper()
	keys, err := newDevProvider(func(string) string { return "" }, r.keysDir)
	require.NoError(r.t, err)
	cfg := appConfig{
		roles:           roleSet{},
		httpAddr:        "127.0.0.1:0",
		proxyAddr:       "127.0.0.1:0",
		metricsAddr:     "127.0.0.1:0",
		chain:           chainSpec{rpcURL: r.proxy.URL, chainID: devChainID, confirmations: 2},
		keys:            keys,
		sweepPolicy:     sweep.PolicySponsor,
		archiveEvery:    time.Hour,
		proxyRate:       50,
		proxyBurst:      100,
		chainCheckEvery: 20 * time.Millisecond,
		log:             slog.New(slog.NewTextHandler(io.MultiWriter(&r.logs, testLog{r.t}), nil)),
	}
	for _, role := range roles {
		cfg.roles[role] = true
	}
	if opt != nil {
		opt(&cfg)
	}
	return newApp(context.Background(), r.st, cfg)
}

// startRoles starts the api, the gateway and the workers as three apps.
func (r *swapRig) startRoles() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for name, roles := range map[string][]string{
		"api":     {roleAPI},
		"gateway": {roleGateway},
		"workers": {roleSettlement, roleSweep, roleWebhooks},
	} {
		a, err := r.newApp(roles...)
		require.NoError(r.t, err, "%s starts on the recorded chain", name)
		r.apps[name] = a
		done := make(chan error, 1)
		r.done[name] = done
		go func() { done <- a.run(ctx) }()
	}
	r.t.Cleanup(func() {
		cancel()
		for _, d := range r.done {
			select {
			case <-d:
			case <-time.After(30 * time.Second):
			}
		}
	})
}

// waitIndexed waits until the gateway's indexer is at block n of c.
func (r *swapRig) waitIndexed(c *devChain, n uint64) {
	r.t.Helper()
	h, err := c.backend.Client().HeaderByNumber(context.Background(), new(big.Int).SetUint64(n))
	require.NoError(r.t, err)
	require.Eventually(r.t, func() bool {
		cur, err := r.st.GetCursor(context.Background(), store.CursorIndexer)
		return err == nil && cur.BlockNumber == n && cur.BlockHash == h.Hash()
	}, 60*time.Second, 10*time.Millisecond, "the gateway did not index block %d", n)
}

// requireAllStop waits for every app to stop by itself with an error
// wrapping ErrChainChanged.
func (r *swapRig) requireAllStop() {
	r.t.Helper()
	for name, d := range r.done {
		select {
		case err := <-d:
			require.Error(r.t, err, name)
			require.True(r.t, errors.Is(err, indexer.ErrChainChanged), "%s: %v", name, err)
			d <- err // for the cleanup
		case <-time.After(60 * time.Second):
			r.t.Fatalf("%s kept running on another chain", name)
		}
	}
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func getBody(t *testing.T, u, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Indexed to block 90, then the node is replaced by a fresh chain with the
// same chain id and genesis: every role is not ready at once (the node is
// 90 blocks behind, beyond the reorg limit), the operator status says why,
// the gateway exports it; when the new chain makes its first block every
// role stops, and a restart is refused with what to do.
func TestServe_ChainSwappedDeep_NotReadyThenEveryRoleRefuses(t *testing.T) {
	t.Parallel()
	r := newSwapRig(t)
	r.mine(r.a, 90)
	r.startRoles()
	r.waitIndexed(r.a, 90)
	for name, a := range r.apps {
		code, body := getBody(t, a.httpURL()+"/readyz", "")
		require.Equal(t, http.StatusOK, code, "%s: %s", name, body)
	}

	r.point(r.b) // b has only its genesis
	for name, a := range r.apps {
		require.Eventually(t, func() bool {
			code, body := getBody(t, a.httpURL()+"/readyz", "")
			return code == http.StatusServiceUnavailable && strings.Contains(body, `"chain_identity":"node_behind"`)
		}, 30*time.Second, 10*time.Millisecond, "%s stays ready on a node 90 blocks behind", name)
	}
	code, body := getBody(t, r.apps["api"].httpURL()+"/v1/admin/status", r.apps["api"].adminToken)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"healthy":false`)
	require.Contains(t, body, `"problem":"node_behind"`)
	require.Contains(t, body, `"behind_blocks":90`)
	require.Eventually(t, func() bool {
		_, metrics := getBody(t, r.apps["gateway"].metricsURL()+"/metrics", "")
		return strings.Contains(metrics, "\nevmpay_indexer_node_behind_blocks 90\n") &&
			strings.Contains(metrics, "\nevmpay_indexer_lag_blocks 0\n")
	}, 30*time.Second, 20*time.Millisecond, "the gateway exports how far behind the node is (lag cannot show it)")
	require.Contains(t, r.logs.String(), "far behind the indexed chain")
	// Sweep asks the same checker before it sends anything: it refuses.
	require.Eventually(t, func() bool {
		_, metrics := getBody(t, r.apps["workers"].metricsURL()+"/metrics", "")
		return strings.Contains(metrics, "\nevmpay_sweep_chain_guard_failed 1\n")
	}, 30*time.Second, 20*time.Millisecond, "the sweep's chain guard refuses a node far behind")

	r.mine(r.b, 1)
	r.requireAllStop()
	require.Contains(t, r.logs.String(), "start with a fresh database")
	_, err := r.newApp(roleAPI)
	require.ErrorIs(t, err, indexer.ErrChainChanged)
	require.Contains(t, err.Error(), "refusing to start")

	reorgs, err := r.st.ListReorgs(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Empty(t, reorgs, "nothing reverted")
}

// Indexed to block 16, then a fresh chain already at block 20: not a
// reorg of depth 16. Every role stops, nothing is reverted, a restart is
// refused.
func TestServe_ChainSwappedShallow_EveryRoleRefusesNothingReverted(t *testing.T) {
	t.Parallel()
	r := newSwapRig(t)
	r.mine(r.a, 5)
	r.startRoles()
	r.waitIndexed(r.a, 5)
	r.mine(r.a, 11)
	r.waitIndexed(r.a, 16)
	before, err := r.st.ListBlockHashes(context.Background(), 0, 100)
	require.NoError(t, err)

	r.mine(r.b, 20)
	r.point(r.b)
	r.requireAllStop()
	require.Contains(t, r.logs.String(), "start with a fresh database")

	after, err := r.st.ListBlockHashes(context.Background(), 0, 100)
	require.NoError(t, err)
	require.Equal(t, before, after, "nothing reverted, nothing of the new chain indexed")
	reorgs, err := r.st.ListReorgs(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Empty(t, reorgs, "not taken for a reorg")

	_, err = r.newApp(roleGateway)
	require.ErrorIs(t, err, indexer.ErrChainChanged)
	require.Contains(t, err.Error(), "refusing to start")

	// With a token configured, whose contract the new chain does not
	// have, the reason is still the chain (the evmd run once said
	// "decimals() returned 0 bytes").
	_, err = r.newAppWith([]string{roleAPI}, func(c *appConfig) {
		c.chain.tokens = []tokenConfig{{Symbol: "USDC", Address: common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")}}
	})
	require.ErrorIs(t, err, indexer.ErrChainChanged)
	require.Contains(t, err.Error(), "refusing to start")
}

// A chain swapped for a fresh one (same chain id, same genesis) while
// sweeps are in flight, the new chain held at its genesis until the sweep
// has refused two passes on it: its
// head is below every block the sweeps were mined in, so it is waited for,
// never acted on — nothing is broadcast to it, nothing new is signed, no
// mined transaction is taken for reorged out, no invoice fails. When it
// makes its first block, every role stops.
func TestServe_ChainSwappedWhileSweepsInFlight_NothingActedOnWhileTheNodeIsBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newSwapRig(t)
	keys, err := newDevProvider(func(string) string { return "" }, r.keysDir)
	require.NoError(t, err)
	sweepWallet, err := sweepWalletAddress(ctx, keys)
	require.NoError(t, err)
	payer, err := devWallet()
	require.NoError(t, err)
	payerKey, err := payer.PrivateKey(0)
	require.NoError(t, err)
	a := r.a.backend.Client()
	send := func(to common.Address, wei *big.Int) {
		from, err := payer.Address(0)
		require.NoError(t, err)
		nonce, err := a.PendingNonceAt(ctx, from)
		require.NoError(t, err)
		tx, err := types.SignNewTx(payerKey, types.LatestSignerForChainID(big.NewInt(devChainID)), &types.DynamicFeeTx{
			ChainID: big.NewInt(devChainID), Nonce: nonce, To: &to, Value: wei, Gas: 21000,
			GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(100 * params.GWei)})
		require.NoError(t, err)
		require.NoError(t, a.SendTransaction(ctx, tx))
	}
	send(sweepWallet, big.NewInt(params.Ether))
	r.mine(r.a, 3)
	r.startRoles()
	r.waitIndexed(r.a, 3)

	api := r.apps["api"]
	op := apiClient{t: t, base: api.httpURL(), key: api.adminToken}
	code, m := op.do("POST", "/v1/admin/merchants", map[string]any{
		"settlement_address": common.HexToAddress("0x00000000000000000000000000000000000000aa").Hex(), "webhook_url": "http://127.0.0.1:1/hooks"}, nil)
	require.Equal(t, http.StatusCreated, code, "%v", m)
	merchant := apiClient{t: t, base: api.httpURL(), key: m["api_key"].(string)}
	var ids []int64
	for i := range 3 {
		code, inv := merchant.do("POST", "/v1/invoices", map[string]any{"amount_wei": "1000000000000000"},
			map[string]string{"Idempotency-Key": fmt.Sprint("swap-", i)})
		require.Equal(t, http.StatusCreated, code, "%v", inv)
		ids = append(ids, int64(inv["id"].(float64)))
		send(common.HexToAddress(inv["deposit_address"].(string)), big.NewInt(1_000_000_000_000_000))
	}
	// Blocks one at a time until every invoice has a sweep transaction
	// mined on chain a and none is SETTLED: sweeps in flight.
	inFlight := func() bool {
		for _, id := range ids {
			inv, err := r.st.GetInvoice(ctx, id)
			require.NoError(t, err)
			require.NotEqual(t, store.SweepFailed, inv.SweepStatus)
			txs, err := r.st.ListSweepTxsByInvoice(ctx, id)
			require.NoError(t, err)
			mined := false
			for _, tx := range txs {
				mined = mined || tx.Status == store.SweepTxMined
			}
			if !mined || inv.Status == store.StatusSettled {
				return false
			}
		}
		return true
	}
	for i := 0; !inFlight(); i++ {
		require.Less(t, i, 60, "sweeps never got under way")
		r.mine(r.a, 1)
		time.Sleep(300 * time.Millisecond)
	}
	// Chain b, at its genesis, is held there for 20 s and until the roles
	// have met it: the indexer waits, and the sweep refuses passes on its
	// head and later idle passes (IdleInterval), when it would act on
	// receipts it no longer finds. A pass under way at the swap ends as it
	// began (it checked chain a; each broadcast asks the guard again, so
	// nothing reaches chain b); from the first refused pass on, nothing
	// stored may change.
	mark := len(r.logs.String())
	swapAt := time.Now()
	r.point(r.b)
	refused := `msg="sweep: pass stopped: the chain guard refused the node; nothing is broadcast"`
	waitUntil(t, 120*time.Second, 100*time.Millisecond, func() bool {
		return strings.Contains(r.logs.String()[mark:], refused)
	}, func() string { return "the sweep never refused the node behind:\n" + r.logs.String()[mark:] })
	before := map[int64][]store.SweepTx{}
	for _, id := range ids {
		before[id], err = r.st.ListSweepTxsByInvoice(ctx, id)
		require.NoError(t, err)
	}
	waitUntil(t, 120*time.Second, 100*time.Millisecond, func() bool {
		since := r.logs.String()[mark:]
		return time.Since(swapAt) >= 20*time.Second && strings.Count(since, refused) >= 2 &&
			strings.Contains(since, "indexer: the node's head is below the indexed head")
	}, func() string { return "the roles never met the node behind:\n" + r.logs.String()[mark:] })

	for _, id := range ids {
		after, err := r.st.ListSweepTxsByInvoice(ctx, id)
		require.NoError(t, err)
		require.Equal(t, before[id], after, "invoice %d: nothing signed, demoted or re-sent while the node is behind", id)
		inv, err := r.st.GetInvoice(ctx, id)
		require.NoError(t, err)
		require.NotEqual(t, store.SweepFailed, inv.SweepStatus, "invoice %d", id)
	}
	b := r.b.backend.Client()
	pending, err := b.PendingNonceAt(ctx, sweepWallet)
	require.NoError(t, err)
	require.Zero(t, pending, "nothing of the sweep wallet reached the new chain's pool")
	for _, txs := range before {
		for _, tx := range txs {
			n, err := b.PendingNonceAt(ctx, tx.From)
			require.NoError(t, err)
			require.Zero(t, n, "nothing from %s reached the new chain's pool", tx.From.Hex())
		}
	}
	require.Contains(t, r.logs.String(), "below")

	r.mine(r.b, 1)
	r.requireAllStop()
}
