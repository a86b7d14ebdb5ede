package indexer_test

import (
	"context"
	"errors"
	"math/big"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// deploy deploys a test token of kind k from the chain's key and mints
// supply to it.
func (c *chain) deploy(k testtoken.Kind, symbol string, supply int64) *testtoken.Token {
	c.t.Helper()
	opts := bind.NewKeyedTransactor(c.key, big.NewInt(1337))
	tok, _, err := testtoken.Deploy(opts, c.client, k, "Test "+symbol, symbol, 6)
	require.NoError(c.t, err)
	c.commit(1)
	_, err = tok.Mint(opts, c.from, big.NewInt(supply))
	require.NoError(c.t, err)
	c.commit(1)
	return tok
}

// transfer sends value of tok to `to`; it is mined by the next commit.
func (c *chain) transfer(tok *testtoken.Token, to common.Address, value int64) common.Hash {
	c.t.Helper()
	opts := bind.NewKeyedTransactor(c.key, big.NewInt(1337))
	opts.Nonce = new(big.Int).SetUint64(c.nonce)
	tx, err := tok.Transfer(opts, to, big.NewInt(value))
	require.NoError(c.t, err)
	c.nonce++
	return tx.Hash()
}

func TestTokens_Backfill_IndexesTransferLogsOfConfiguredTokensOnly(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	usdc := c.deploy(testtoken.Stable, "USDC", 10_000_000)
	usdt := c.deploy(testtoken.Tether, "USDT", 10_000_000)
	other := c.deploy(testtoken.Stable, "XXX", 10_000_000)
	a, b := common.HexToAddress("0xaaaa"), common.HexToAddress("0xbbbb")
	h1 := c.transfer(usdc, a, 1_500_000)
	h2 := c.transfer(usdt, b, 7)
	c.transfer(other, a, 9) // not a configured token
	c.send(&a)
	c.commit(1)
	c.mine(2, 1)

	start(t, c.source(), st, indexer.Config{Backfill: true, Tokens: []common.Address{usdc.Address, usdt.Address}})
	waitIndexed(t, st, c)

	ctx := context.Background()
	got, err := st.ListTokenTransfersByTx(ctx, h1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	r, err := c.client.TransactionReceipt(ctx, h1)
	require.NoError(t, err)
	require.Equal(t, store.TokenTransfer{BlockNumber: r.BlockNumber.Uint64(), BlockHash: r.BlockHash, TxHash: h1,
		TxIndex: int(r.TransactionIndex), LogIndex: int(r.Logs[0].Index), Token: usdc.Address, From: c.from, To: a,
		Value: store.NewAmount(1_500_000)}, got[0])
	require.Equal(t, c.block(r.BlockNumber.Uint64()).Hash(), got[0].BlockHash, "the node's block hash")

	toA, err := st.ListTokenTransfersByAddress(ctx, a, 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, toA, 1, "the unconfigured token's transfer to a is not indexed")
	got, err = st.ListTokenTransfersByTx(ctx, h2)
	require.NoError(t, err)
	require.Len(t, got, 1, "a USDT-shaped token's Transfer log is indexed")
	require.Equal(t, "7", got[0].Value.String())

	var n int
	require.NoError(t, st.DB().GetContext(ctx, &n, `SELECT count(*) FROM token_transfers`))
	require.Equal(t, 4, n, "two mints and two transfers of the configured tokens")
}

func TestTokens_Follow_ReorgRemovesTheOrphanedTransfer(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	usdc := c.deploy(testtoken.Stable, "USDC", 10_000_000)
	start(t, c.source(), st, indexer.Config{Backfill: true, Tokens: []common.Address{usdc.Address}})
	waitIndexed(t, st, c)

	deposit := common.HexToAddress("0xdddd")
	nonce := c.nonce
	h := c.transfer(usdc, deposit, 2_000_000)
	c.commit(1)
	waitIndexed(t, st, c)
	ctx := context.Background()
	got, err := st.ListTokenTransfersByTx(ctx, h)
	require.NoError(t, err)
	require.Len(t, got, 1)

	// The block is orphaned and the transfer replaced (same nonce, higher
	// fee) by a plain coin transfer on the new branch.
	c.fork(1)
	replacement, err := types.SignNewTx(c.key, c.signer, &types.DynamicFeeTx{ChainID: big.NewInt(1337),
		Nonce: nonce, To: &common.Address{1}, Value: big.NewInt(1), Gas: 21000,
		GasTipCap: big.NewInt(100 * params.GWei), GasFeeCap: big.NewInt(300 * params.GWei)})
	require.NoError(t, err)
	// The kit's Fork returns once the pool is at the fork (the orphaned
	// transfer back in it): the replacement takes its place at once.
	require.NoError(t, c.client.SendTransaction(ctx, replacement), "the pool accepts the replacement")
	c.commit(2)
	waitIndexed(t, st, c)

	got, err = st.ListTokenTransfersByTx(ctx, h)
	require.NoError(t, err)
	require.Empty(t, got, "the orphaned block's transfer is gone")
	toDeposit, err := st.ListTokenTransfersByAddress(ctx, deposit, 0, 0, 10)
	require.NoError(t, err)
	require.Empty(t, toDeposit)
	_, err = c.client.TransactionReceipt(ctx, h)
	require.Error(t, err, "the transfer is on no canonical block")
}

// capSource fails, like a node over its response-size limit, every
// TransferLogs batch of more than max blocks.
type capSource struct {
	indexer.Source
	max   int
	fails atomic.Int64
}

func (s *capSource) TransferLogs(ctx context.Context, blocks []store.Block, tokens []common.Address) ([][]store.TokenTransfer, error) {
	if len(blocks) > s.max {
		s.fails.Add(1)
		return nil, errors.New("batch response exceeds the size limit")
	}
	return s.Source.TransferLogs(ctx, blocks, tokens)
}

func TestTokens_LogBatchOverTheNodesLimit_HalvedAndEveryTransferIndexed(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	usdc := c.deploy(testtoken.Stable, "USDC", 10_000_000)
	to := common.HexToAddress("0xaaaa")
	var want []common.Hash
	for range 12 {
		want = append(want, c.transfer(usdc, to, 1))
		c.commit(1)
	}
	src := &capSource{Source: c.source(), max: 3}
	start(t, src, st, indexer.Config{Backfill: true, BatchSize: 16, Concurrency: 1,
		Tokens: []common.Address{usdc.Address}})
	waitIndexed(t, st, c)

	got, err := st.ListTokenTransfersByAddress(context.Background(), to, 0, 0, 100)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	require.NotZero(t, src.fails.Load())
	require.LessOrEqual(t, src.fails.Load(), int64(4), "the size that worked is kept for later batches")
}
