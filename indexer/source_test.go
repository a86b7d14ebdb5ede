package indexer_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// cosmosNode is a JSON-RPC server (go-ethereum's rpc.Server over HTTP)
// answering with the blocks of testdata/cosmos_blocks.json, shaped the way
// Cosmos EVM chains (Evmos, Cronos) shape them. It tests decoding only;
// chain behaviour is tested against the simulated backend.
type cosmosNode struct {
	blocks []json.RawMessage
}

func (n *cosmosNode) ChainId() hexutil.Uint64     { return 25 }
func (n *cosmosNode) BlockNumber() hexutil.Uint64 { return hexutil.Uint64(len(n.blocks)) }

func (n *cosmosNode) GetBlockByNumber(number hexutil.Uint64, full bool) (json.RawMessage, error) {
	if number == 0 || int(number) > len(n.blocks) {
		return nil, nil
	}
	raw := n.blocks[number-1]
	if full {
		return raw, nil
	}
	var b map[string]any
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, err
	}
	var hashes []any
	for _, tx := range b["transactions"].([]any) {
		hashes = append(hashes, tx.(map[string]any)["hash"])
	}
	b["transactions"] = hashes
	return json.Marshal(b)
}

func cosmosFixture(t *testing.T) []json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile("testdata/cosmos_blocks.json")
	require.NoError(t, err)
	var blocks []json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &blocks))
	return blocks
}

func dialCosmosNode(t *testing.T) *rpc.Client {
	t.Helper()
	srv := rpc.NewServer()
	require.NoError(t, srv.RegisterName("eth", &cosmosNode{blocks: cosmosFixture(t)}))
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Stop)
	c, err := rpc.DialHTTP(hs.URL)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func TestRPCSource_CosmosBlocks_KeepsTheNodesHashAndToleratesTheirShapes(t *testing.T) {
	t.Parallel()
	fixture := cosmosFixture(t)
	// go-ethereum's own header decoding rejects the Evmos-style block
	// (missing sha3Uncles and more) ...
	var h types.Header
	require.Error(t, json.Unmarshal(fixture[0], &h))
	// ... and where it can decode one, the hash it computes is not the one
	// the node reports.
	require.NoError(t, json.Unmarshal(fixture[1], &h))
	reported := common.HexToHash("0x4444444444444444444444444444444444444444444444444444444444444444")
	require.NotEqual(t, reported, h.Hash())

	src := indexer.NewRPCSource(dialCosmosNode(t))
	ctx := context.Background()
	id, err := src.ChainID(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 25, id)
	head, err := src.BlockNumber(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, head)

	blocks, err := src.Blocks(ctx, 1, 5, true)
	require.NoError(t, err)
	require.Len(t, blocks, 3, "the batch stops at the first block the node does not have")

	b1 := blocks[0]
	require.Equal(t, common.HexToHash("0x1111111111111111111111111111111111111111111111111111111111111111"), b1.Hash)
	require.Nil(t, b1.BaseFeeWei, "no baseFeePerGas")
	require.EqualValues(t, 0x65a1b2c3, b1.Timestamp)
	require.EqualValues(t, 10_000_000, b1.GasLimit)
	require.Equal(t, common.HexToAddress("0x7f6b0e1b4a2d0f2f9e6e4b7b8c1f0b1a2c3d4e5f"), b1.Miner)
	require.Len(t, b1.Txs, 1)
	tx := b1.Txs[0]
	require.Zero(t, tx.Index, "the position in the block, not the node's transactionIndex")
	require.Equal(t, b1.Hash, tx.BlockHash)
	require.EqualValues(t, 0, tx.Type)
	require.Equal(t, "1000000000000000000", tx.ValueWei.String())
	require.Equal(t, "20000000000", tx.GasPriceWei.String())
	require.Nil(t, tx.MaxFeeWei)
	require.Empty(t, tx.Input)

	b2 := blocks[1]
	require.Equal(t, reported, b2.Hash)
	require.Equal(t, b1.Hash, b2.ParentHash)
	require.Equal(t, "0", b2.BaseFeeWei.String(), "a base fee of 0 is kept, not dropped")
	require.EqualValues(t, uint64(1<<63-1), b2.GasLimit, "2^64-1 is capped to fit a BIGINT")
	require.EqualValues(t, 0x1ab3f, b2.GasUsed)
	require.Equal(t, 5, b2.TxCount)
	require.Len(t, b2.Txs, 5)
	gotTypes := []uint8{b2.Txs[0].Type, b2.Txs[1].Type, b2.Txs[2].Type, b2.Txs[3].Type, b2.Txs[4].Type}
	require.Equal(t, []uint8{2, 0, 3, 4, 0x7e}, gotTypes)
	require.Equal(t, "115792089237316195423570985008687907853269984665640564039457584007913129639935",
		b2.Txs[0].ValueWei.String(), "2^256-1 wei")
	require.Equal(t, "0", b2.Txs[0].MaxPriorityFeeWei.String())
	require.EqualValues(t, 1, b2.Txs[0].Nonce, "0x01: leading zeros accepted")
	require.Nil(t, b2.Txs[1].To, "contract creation")
	require.Equal(t, hexutil.MustDecode("0x6080604052348015600f57600080fd5b50"), b2.Txs[1].Input)
	require.Equal(t, []byte{0xa9, 0x05, 0x9c, 0xbb}, b2.Txs[3].Input, "input sent as data")
	require.EqualValues(t, 4, b2.Txs[3].Nonce, "a plain JSON number")
	require.Nil(t, b2.Txs[4].GasPriceWei, "unknown type without gasPrice")
	for i, tx := range b2.Txs {
		require.Equal(t, i, tx.Index)
		require.Equal(t, b2.Hash, tx.BlockHash)
		require.EqualValues(t, 2, tx.BlockNumber)
	}

	b3 := blocks[2]
	require.Equal(t, common.Address{}, b3.Miner, "a miner that is not an address reads as zero")
	require.Empty(t, b3.Txs)
	require.Equal(t, "7", b3.BaseFeeWei.String())

	headers, err := src.Blocks(ctx, 2, 1, false)
	require.NoError(t, err)
	require.Len(t, headers, 1)
	require.Equal(t, reported, headers[0].Hash)
	require.Equal(t, 5, headers[0].TxCount)
	require.Empty(t, headers[0].Txs)

	_, err = src.Blocks(ctx, 9, 2, true)
	require.NoError(t, err, "a block the node does not have is not an error")
}

func TestIndexer_CosmosBlocks_StoredWithTheNodesHashes(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t).Chain(25)
	src := indexer.NewRPCSource(dialCosmosNode(t))
	start(t, src, st, indexer.Config{Backfill: true, StartBlock: 1, ChainID: 25})
	ctx := context.Background()
	require.Eventually(t, func() bool {
		c, err := st.GetCursor(ctx, store.CursorIndexer)
		return err == nil && c.BlockNumber == 3
	}, waitFor, 5*time.Millisecond)

	b2, err := st.GetBlockByHash(ctx, common.HexToHash("0x4444444444444444444444444444444444444444444444444444444444444444"))
	require.NoError(t, err)
	require.EqualValues(t, 2, b2.Number)
	txs, err := st.ListTxsByBlock(ctx, 2)
	require.NoError(t, err)
	require.Len(t, txs, 5)
	require.Nil(t, txs[1].To)
	require.EqualValues(t, 0x7e, txs[4].Type)
	max, err := st.GetTx(ctx, common.HexToHash("0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2"))
	require.NoError(t, err)
	require.Equal(t, txs[0].ValueWei, max.ValueWei)
}

// Transactions are decoded into slices reused from one call to the next:
// a field a transaction lacks must come out empty, not as the value the
// previous block's transaction at the same position had.
func TestRPCSource_ReusedDecodeBuffers_DoNotLeakFieldsBetweenBlocks(t *testing.T) {
	t.Parallel()
	src := indexer.NewRPCSource(dialCosmosNode(t))
	ctx := context.Background()
	for range 20 {
		// Block 2's first transaction is a dynamic-fee one …
		b2, err := src.Blocks(ctx, 2, 1, true)
		require.NoError(t, err)
		require.Len(t, b2, 1)
		require.NotNil(t, b2[0].Txs[0].MaxFeeWei)
		// … block 1's a legacy one, without maxFeePerGas or
		// maxPriorityFeePerGas.
		b1, err := src.Blocks(ctx, 1, 1, true)
		require.NoError(t, err)
		require.Len(t, b1, 1)
		tx := b1[0].Txs[0]
		require.Nil(t, tx.MaxFeeWei)
		require.Nil(t, tx.MaxPriorityFeeWei)
		require.EqualValues(t, 0, tx.Type)
		require.Equal(t, "1000000000000000000", tx.ValueWei.String())
		require.Equal(t, b1[0].Hash, tx.BlockHash)
	}
}
