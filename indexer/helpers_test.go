package indexer_test

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest"
	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const waitFor = 30 * time.Second

// chain is a simulated go-ethereum chain (a real EVM) with a funded key.
type chain struct {
	t       *testing.T
	b       *simchain.Backend
	client  simulated.Client
	rpc     *rpc.Client
	key     *ecdsa.PrivateKey
	from    common.Address
	nonce   uint64
	signer  types.Signer
	counter int
}

func newChain(t *testing.T) *chain {
	t.Helper()
	kit := evmpaytest.NewChain(t, evmpaytest.ChainConfig{Accounts: 1})
	payer := kit.Accounts()[0]
	return &chain{
		t: t, b: kit.Backend(), client: kit.Client(),
		rpc:    kit.RPC(), // the node's JSON-RPC, for RPCSource
		key:    payer.Key,
		from:   payer.Address,
		signer: types.LatestSignerForChainID(big.NewInt(1337)),
	}
}

func (c *chain) source() *indexer.RPCSource { return indexer.NewRPCSource(c.rpc) }

// mine commits n blocks; every block holds txsPer transactions of varied
// types (legacy, access list, dynamic fee, contract creation).
func (c *chain) mine(n, txsPer int) {
	c.t.Helper()
	for range n {
		for range txsPer {
			c.send(nil)
		}
		c.b.Commit()
	}
}

// send sends one transaction to `to`, cycling through transaction types;
// when to is nil, to a fresh address or (every fourth) creating a contract.
func (c *chain) send(to *common.Address) common.Hash {
	c.t.Helper()
	kind := c.counter % 4
	if to == nil {
		a := common.BigToAddress(big.NewInt(int64(0x1000 + c.counter)))
		to = &a
	} else {
		kind = c.counter % 3 // never a contract creation
	}
	var data types.TxData
	value := big.NewInt(int64(1_000_000_000 + c.counter))
	gasPrice := big.NewInt(10 * params.GWei)
	switch kind {
	case 0:
		data = &types.LegacyTx{Nonce: c.nonce, To: to, Value: value, Gas: 21000, GasPrice: gasPrice}
	case 1:
		data = &types.AccessListTx{ChainID: big.NewInt(1337), Nonce: c.nonce, To: to, Value: value,
			Gas: 30000, GasPrice: gasPrice}
	case 2:
		data = &types.DynamicFeeTx{ChainID: big.NewInt(1337), Nonce: c.nonce, To: to, Value: value,
			Gas: 21000, GasTipCap: big.NewInt(params.GWei), GasFeeCap: gasPrice}
	default:
		// A contract creation whose init code returns empty code.
		data = &types.DynamicFeeTx{ChainID: big.NewInt(1337), Nonce: c.nonce, Value: big.NewInt(0),
			Gas: 60000, GasTipCap: big.NewInt(params.GWei), GasFeeCap: gasPrice, Data: []byte{0x60, 0x00, 0x60, 0x00, 0xf3}}
	}
	tx, err := types.SignNewTx(c.key, c.signer, data)
	require.NoError(c.t, err)
	require.NoError(c.t, c.client.SendTransaction(context.Background(), tx))
	c.nonce++
	c.counter++
	return tx.Hash()
}

func (c *chain) head() uint64 {
	c.t.Helper()
	n, err := c.client.BlockNumber(context.Background())
	require.NoError(c.t, err)
	return n
}

func (c *chain) block(n uint64) *types.Block {
	c.t.Helper()
	b, err := c.client.BlockByNumber(context.Background(), new(big.Int).SetUint64(n))
	require.NoError(c.t, err)
	return b
}

// fork makes the chain's head `depth` blocks lower: the next Commit builds
// on that block. The orphaned blocks' transactions go back to the pool, so
// the next Commits include them again (in blocks with other hashes).
func (c *chain) fork(depth uint64) {
	c.t.Helper()
	parent := c.block(c.head() - depth)
	require.NoError(c.t, c.b.Fork(parent.Hash()))
}

// commit seals n blocks of whatever the pool holds.
func (c *chain) commit(n int) {
	for range n {
		c.b.Commit()
	}
	nonce, err := c.client.PendingNonceAt(context.Background(), c.from)
	require.NoError(c.t, err)
	c.nonce = nonce
}

// running is an indexer started in the background.
type running struct {
	ix     *indexer.Indexer
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// start runs an indexer until the test ends (or stop is called).
func start(t *testing.T, src indexer.Source, st indexer.Store, cfg indexer.Config) *running {
	t.Helper()
	cfg.PollInterval = cmpOr(cfg.PollInterval, 10*time.Millisecond)
	cfg.RetryMin = cmpOr(cfg.RetryMin, 5*time.Millisecond)
	cfg.RetryMax = cmpOr(cfg.RetryMax, 50*time.Millisecond)
	cfg.LockRetryInterval = cmpOr(cfg.LockRetryInterval, 20*time.Millisecond)
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	ix, err := indexer.New(src, st, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{ix: ix, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = ix.Run(ctx)
		close(r.done)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and returns what it returned.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t)
}

// wait waits for Run to return by itself.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(waitFor):
		t.Fatal("Run did not return")
		return nil
	}
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// testLogger writes the indexer's log to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// waitIndexed waits until the indexer's cursor is at the chain's head
// block (same number and hash).
func waitIndexed(t *testing.T, st store.Store, c *chain) {
	t.Helper()
	want := c.block(c.head())
	require.Eventually(t, func() bool {
		cur, err := st.GetCursor(context.Background(), store.CursorIndexer)
		return err == nil && cur.BlockNumber == want.NumberU64() && cur.BlockHash == want.Hash()
	}, waitFor, 5*time.Millisecond, "indexer did not reach block %d", want.NumberU64())
}

// requireCanonical checks that the database holds exactly the chain's
// canonical blocks from..head: every block once with the node's hash, its
// transactions and nothing else.
func requireCanonical(t *testing.T, st *postgres.Store, c *chain, from uint64) {
	t.Helper()
	ctx := context.Background()
	head := c.head()
	latest, err := st.LatestBlock(ctx)
	require.NoError(t, err)
	require.Equal(t, head, latest.Number, "latest indexed block")
	var nBlocks, nTxs int
	require.NoError(t, st.DB().GetContext(ctx, &nBlocks, `SELECT count(*) FROM blocks`))
	require.EqualValues(t, head-from+1, nBlocks, "blocks in the database")
	var lowest uint64
	require.NoError(t, st.DB().GetContext(ctx, &lowest, `SELECT min(number) FROM blocks`))
	require.Equal(t, from, lowest, "lowest indexed block")
	hashes, err := st.ListBlockHashes(ctx, from, head)
	require.NoError(t, err)
	wantTxs := 0
	for n := from; n <= head; n++ {
		b := c.block(n)
		require.Equal(t, b.Hash(), hashes[n], "hash of block %d", n)
		stored, err := st.GetBlock(ctx, n)
		require.NoError(t, err)
		require.Equal(t, b.ParentHash(), stored.ParentHash)
		require.Equal(t, b.Time(), stored.Timestamp)
		require.Equal(t, b.GasUsed(), stored.GasUsed)
		require.Equal(t, b.BaseFee().String(), stored.BaseFeeWei.String())
		require.Equal(t, len(b.Transactions()), stored.TxCount)
		txs, err := st.ListTxsByBlock(ctx, n)
		require.NoError(t, err)
		require.Len(t, txs, len(b.Transactions()), "transactions of block %d", n)
		for i, tx := range b.Transactions() {
			got := txs[i]
			require.Equal(t, tx.Hash(), got.Hash)
			require.Equal(t, b.Hash(), got.BlockHash)
			require.Equal(t, i, got.Index)
			require.Equal(t, tx.Type(), got.Type)
			require.Equal(t, tx.Nonce(), got.Nonce)
			require.Equal(t, tx.Value().String(), got.ValueWei.String())
			if tx.To() == nil {
				require.Nil(t, got.To)
			} else {
				require.Equal(t, *tx.To(), *got.To)
			}
			sender, err := types.Sender(c.signer, tx)
			require.NoError(t, err)
			require.Equal(t, sender, got.From)
			require.Equal(t, tx.Data(), []byte(got.Input))
		}
		wantTxs += len(b.Transactions())
	}
	require.NoError(t, st.DB().GetContext(ctx, &nTxs, `SELECT count(*) FROM transactions`))
	require.Equal(t, wantTxs, nTxs, "transactions in the database")
}

// flakySource wraps a real source and fails some calls: every errEvery-th
// call returns an error, every hangEvery-th call hangs until its context
// ends (a timeout), and every shortEvery-th Blocks call returns only part
// of the batch.
type flakySource struct {
	indexer.Source
	errEvery, hangEvery, shortEvery int64
	calls, failed                   atomic.Int64
}

var errInjected = errors.New("injected upstream failure")

func (f *flakySource) fault(ctx context.Context) error {
	n := f.calls.Add(1)
	switch {
	case f.errEvery > 0 && n%f.errEvery == 0:
		f.failed.Add(1)
		return fmt.Errorf("call %d: %w", n, errInjected)
	case f.hangEvery > 0 && n%f.hangEvery == 0:
		f.failed.Add(1)
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (f *flakySource) ChainID(ctx context.Context) (uint64, error) {
	if err := f.fault(ctx); err != nil {
		return 0, err
	}
	return f.Source.ChainID(ctx)
}

func (f *flakySource) BlockNumber(ctx context.Context) (uint64, error) {
	if err := f.fault(ctx); err != nil {
		return 0, err
	}
	return f.Source.BlockNumber(ctx)
}

func (f *flakySource) Blocks(ctx context.Context, from uint64, count int, full bool) ([]indexer.Block, error) {
	if err := f.fault(ctx); err != nil {
		return nil, err
	}
	bs, err := f.Source.Blocks(ctx, from, count, full)
	if err == nil && f.shortEvery > 0 && f.calls.Load()%f.shortEvery == 0 && len(bs) > 1 {
		bs = bs[:len(bs)/2]
	}
	return bs, err
}

// countingSource counts calls (to see that an indexer waiting for the lock
// does not read the chain).
type countingSource struct {
	indexer.Source
	mu    sync.Mutex
	calls int
}

func (s *countingSource) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *countingSource) BlockNumber(ctx context.Context) (uint64, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	return s.Source.BlockNumber(ctx)
}

// metricValue reads a counter or gauge without labels.
func metricValue(t *testing.T, ix *indexer.Indexer, name string) float64 {
	t.Helper()
	mfs, err := ix.Gatherer().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}
