package rpcreplay_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/rpcreplay"
)

// node is a JSON-RPC server of go-ethereum's own rpc package: the calls a
// test records go to a real JSON-RPC implementation.
type node struct{}

type block struct {
	Number       hexutil.Uint64 `json:"number"`
	Hash         string         `json:"hash"`
	Transactions []any          `json:"transactions"`
}

func (node) ChainId() hexutil.Uint64     { return 262144 }
func (node) BlockNumber() hexutil.Uint64 { return 9 }
func (node) GetBlockByNumber(n hexutil.Uint64, full bool) *block {
	if n > 9 {
		return nil
	}
	b := &block{Number: n, Hash: "0x" + string(rune('a'+n)), Transactions: []any{}}
	if n == 0 {
		b.Number = 1 // as evmd does
	}
	if n == 5 {
		if full {
			b.Transactions = []any{map[string]any{"hash": "0x55", "value": "0x1"}}
		} else {
			b.Transactions = []any{"0x55"}
		}
	}
	return b
}
func (node) GetLogs(q map[string]any) []map[string]any {
	return []map[string]any{
		{"address": "0xAAAA000000000000000000000000000000000000", "topics": []string{"0x01", "0x02"}},
		{"address": "0xbbbb000000000000000000000000000000000000", "topics": []string{"0x01"}},
	}
}

// What the recorder heard, the replayer answers: recorded calls exactly,
// blocks by the number asked (a full block answers the header request too),
// nothing above the head, logs by block hash filtered as asked, and an
// error naming any call the transcript lacks.
func TestRecordThenReplay(t *testing.T) {
	srv := rpc.NewServer()
	require.NoError(t, srv.RegisterName("eth", node{}))
	upstream := httptest.NewServer(srv)
	t.Cleanup(upstream.Close)
	rec := rpcreplay.NewRecorder(upstream.URL)
	front := httptest.NewServer(rec)
	t.Cleanup(front.Close)
	c, err := rpc.DialHTTP(front.URL)
	require.NoError(t, err)
	ctx := context.Background()
	var id hexutil.Uint64
	require.NoError(t, c.CallContext(ctx, &id, "eth_chainId"))
	batch := []rpc.BatchElem{
		{Method: "eth_getBlockByNumber", Args: []any{"0x0", false}, Result: new(json.RawMessage)},
		{Method: "eth_getBlockByNumber", Args: []any{"0x5", true}, Result: new(json.RawMessage)},
		{Method: "eth_getLogs", Args: []any{map[string]any{"blockHash": "0xF0"}}, Result: new(json.RawMessage)},
	}
	require.NoError(t, c.BatchCallContext(ctx, batch))
	require.NoError(t, c.CallContext(ctx, &id, "eth_chainId")) // the same call and answer: kept once

	path := filepath.Join(t.TempDir(), "t.jsonl.gz")
	require.NoError(t, rpcreplay.Save(path, rec.Calls()))
	calls, err := rpcreplay.Load(path)
	require.NoError(t, err)
	require.Len(t, calls, 4)

	rp, err := rpcreplay.NewReplayer(calls, 7)
	require.NoError(t, err)
	replay := httptest.NewServer(rp)
	t.Cleanup(replay.Close)
	r, err := rpc.DialHTTP(replay.URL)
	require.NoError(t, err)

	require.NoError(t, r.CallContext(ctx, &id, "eth_chainId"))
	require.EqualValues(t, 262144, id)
	require.NoError(t, r.CallContext(ctx, &id, "eth_blockNumber"))
	require.EqualValues(t, 7, id, "the head the test chose")
	var b *block
	require.NoError(t, r.CallContext(ctx, &b, "eth_getBlockByNumber", "0x0", false))
	require.EqualValues(t, 1, b.Number, "block 0 as the node answered it")
	require.NoError(t, r.CallContext(ctx, &b, "eth_getBlockByNumber", "0x5", false))
	require.Equal(t, []any{"0x55"}, b.Transactions, "the header form of a recorded full block")
	require.NoError(t, r.CallContext(ctx, &b, "eth_getBlockByNumber", "0x8", true))
	require.Nil(t, b, "above the head: no block")
	var logs []map[string]any
	require.NoError(t, r.CallContext(ctx, &logs, "eth_getLogs", map[string]any{"blockHash": "0xf0", "address": []string{"0xaaaa000000000000000000000000000000000000"}}))
	require.Len(t, logs, 1, "filtered by address, any case")
	require.NoError(t, r.CallContext(ctx, &logs, "eth_getLogs", map[string]any{"blockHash": "0xf0", "topics": []any{"0x01", "0x03"}}))
	require.Empty(t, logs, "filtered by topic")
	err = r.CallContext(ctx, &b, "eth_getBlockByNumber", "0x6", true)
	require.ErrorContains(t, err, "not in the transcript; record it again")
	err = r.CallContext(ctx, &id, "eth_gasPrice")
	require.ErrorContains(t, err, "eth_gasPrice")
}
