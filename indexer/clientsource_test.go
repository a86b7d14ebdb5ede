package indexer_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// Both go-ethereum clients are a Client, with no adapter.
var (
	_ indexer.Client = (*ethclient.Client)(nil)
	_ indexer.Client = simulated.Client(nil)
)

// variedChain builds a chain whose blocks hold every kind of transaction
// the indexer records — legacy, access list, dynamic fee, contract
// creations, token deployments and mints, and Transfer logs of a
// USDC-shaped and a USDT-shaped token, several in one block — and returns
// the two tokens.
func variedChain(t *testing.T) (*chain, []common.Address) {
	c := newChain(t)
	c.mine(3, 4)
	usdc := c.deploy(testtoken.Stable, "USDC", 10_000_000)
	usdt := c.deploy(testtoken.Tether, "USDT", 10_000_000)
	a, b := common.HexToAddress("0xaaaa"), common.HexToAddress("0xbbbb")
	c.transfer(usdc, a, 1_500_000)
	c.transfer(usdt, b, 7)
	c.transfer(usdc, b, 3)
	c.send(&a)
	c.commit(1)
	c.mine(2, 3)
	return c, []common.Address{usdc.Address, usdt.Address}
}

// ClientSource and RPCSource read the same simulated chain: every block
// (with and without transactions) and every block's Transfer logs come
// back equal, field by field.
func TestClientSource_ReadsWhatRPCSourceReads(t *testing.T) {
	t.Parallel()
	c, tokens := variedChain(t)
	ctx := context.Background()
	rpcSrc, clientSrc := c.source(), indexer.NewClientSource(c.client)

	id, err := clientSrc.ChainID(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1337, id)
	head, err := clientSrc.BlockNumber(ctx)
	require.NoError(t, err)
	require.Equal(t, c.head(), head)

	for _, full := range []bool{true, false} {
		want, err := rpcSrc.Blocks(ctx, 0, int(head)+5, full)
		require.NoError(t, err)
		got, err := clientSrc.Blocks(ctx, 0, int(head)+5, full)
		require.NoError(t, err)
		require.Len(t, want, int(head)+1, "RPCSource stops at the head")
		require.Len(t, got, len(want), "full=%t", full)
		for i := range want {
			require.Equal(t, want[i].Block, got[i].Block, "block %d, full=%t", i, full)
			require.Len(t, got[i].Txs, len(want[i].Txs), "block %d", i)
			for j := range want[i].Txs {
				require.Equal(t, want[i].Txs[j], got[i].Txs[j], "block %d transaction %d", i, j)
			}
		}
	}
	blocks, err := clientSrc.Blocks(ctx, 0, int(head)+1, true)
	require.NoError(t, err)
	txTypes, transfers := map[uint8]int{}, 0
	headers := make([]store.Block, len(blocks))
	for i, b := range blocks {
		headers[i] = b.Block
		for _, tx := range b.Txs {
			txTypes[tx.Type]++
		}
	}
	require.Len(t, txTypes, 3, "legacy, access-list and dynamic-fee transactions compared: %v", txTypes)

	want, err := rpcSrc.TransferLogs(ctx, headers, tokens)
	require.NoError(t, err)
	got, err := clientSrc.TransferLogs(ctx, headers, tokens)
	require.NoError(t, err)
	require.Equal(t, want, got)
	for _, ts := range got {
		transfers += len(ts)
	}
	require.Equal(t, 5, transfers, "two mints and three transfers compared")

	// Past the head: nothing, and no error.
	none, err := clientSrc.Blocks(ctx, head+1, 3, true)
	require.NoError(t, err)
	require.Empty(t, none)
}

// An indexer on ClientSource writes the same rows as an indexer on
// RPCSource, from the same chain, through a reorg.
func TestClientSource_IndexesTheSameRowsAsRPCSource(t *testing.T) {
	t.Parallel()
	c, tokens := variedChain(t)
	viaRPC, viaClient := pgtest.New(t), pgtest.New(t)
	start(t, c.source(), viaRPC, indexer.Config{Backfill: true, Tokens: tokens})
	start(t, indexer.NewClientSource(c.client), viaClient, indexer.Config{Backfill: true, Tokens: tokens})
	waitIndexed(t, viaRPC, c)
	waitIndexed(t, viaClient, c)

	// A reorg orphans the last two blocks; the new branch is longer.
	c.fork(2)
	c.mine(4, 2)
	waitIndexed(t, viaRPC, c)
	waitIndexed(t, viaClient, c)

	requireCanonical(t, viaClient, c, 0)
	for _, table := range []string{"blocks", "transactions", "token_transfers"} {
		require.Equal(t, rows(t, viaRPC, table), rows(t, viaClient, table), table)
	}
	require.NotEmpty(t, rows(t, viaClient, "token_transfers"))
}

// rows dumps a table as JSON objects in a stable order, without the time
// a row was written.
func rows(t *testing.T, st *postgres.Store, table string) []string {
	t.Helper()
	var out []string
	require.NoError(t, st.DB().SelectContext(context.Background(), &out,
		`SELECT (to_jsonb(r) - 'indexed_at')::text AS j FROM `+table+` r ORDER BY 1`))
	for _, j := range out {
		require.True(t, json.Valid([]byte(j)))
	}
	return out
}
