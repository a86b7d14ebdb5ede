package indexer

import (
	"context"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/holiman/uint256"

	"github.com/evmpay/evmpay/store"
)

// TransferTopic is topic 0 of an ERC-20 Transfer(address,address,uint256)
// log.
var TransferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))

// rpcLog is one eth_getLogs result, decoded field by field (see decode.go:
// the hashes are the node's).
type rpcLog struct {
	Address     common.Address `json:"address"`
	Topics      []common.Hash  `json:"topics"`
	Data        hexData        `json:"data"`
	BlockNumber quantity       `json:"blockNumber"`
	BlockHash   common.Hash    `json:"blockHash"`
	TxHash      common.Hash    `json:"transactionHash"`
	TxIndex     quantity       `json:"transactionIndex"`
	LogIndex    quantity       `json:"logIndex"`
	Removed     bool           `json:"removed"`
}

// logFilter is an eth_getLogs filter by block hash (EIP-234).
type logFilter struct {
	BlockHash common.Hash      `json:"blockHash"`
	Address   []common.Address `json:"address"`
	Topics    [][]common.Hash  `json:"topics"`
}

// TransferLogs implements Source: one eth_getLogs call per block, filtered
// by the block's hash (EIP-234), all in one batch. Filtering by hash rather
// than by a range of numbers ties the logs to exactly the block fetched: a
// reorg between the two reads cannot pair a block with another branch's
// logs, or silently with none.
func (s *RPCSource) TransferLogs(ctx context.Context, blocks []store.Block, tokens []common.Address) ([][]store.TokenTransfer, error) {
	out := make([][]store.TokenTransfer, len(blocks))
	if len(blocks) == 0 || len(tokens) == 0 {
		return out, nil
	}
	results := make([][]rpcLog, len(blocks))
	batch := make([]rpc.BatchElem, len(blocks))
	for i := range blocks {
		batch[i] = rpc.BatchElem{
			Method: "eth_getLogs",
			Args: []any{logFilter{BlockHash: blocks[i].Hash, Address: tokens,
				Topics: [][]common.Hash{{TransferTopic}}}},
			Result: &results[i],
		}
	}
	if err := s.c.BatchCallContext(ctx, batch); err != nil {
		return nil, fmt.Errorf("eth_getLogs batch %d+%d: %w", blocks[0].Number, len(blocks), err)
	}
	for i := range batch {
		b := &blocks[i]
		if err := batch[i].Error; err != nil {
			return nil, fmt.Errorf("eth_getLogs block %d %s: %w", b.Number, b.Hash, err)
		}
		var err error
		if out[i], err = blockTransfers(b, results[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// blockTransfers keeps the Transfer logs among the logs the node returned
// for block b, in order; ErrChainMoved when one belongs to another block.
func blockTransfers(b *store.Block, logs []rpcLog) ([]store.TokenTransfer, error) {
	var out []store.TokenTransfer
	for j := range logs {
		l := &logs[j]
		if l.Removed || l.BlockHash != b.Hash || uint64(l.BlockNumber) != b.Number {
			return nil, fmt.Errorf("%w: eth_getLogs for block %d %s returned a log of block %d %s (removed %t)",
				ErrChainMoved, b.Number, b.Hash, uint64(l.BlockNumber), l.BlockHash, l.Removed)
		}
		if t, ok := l.transfer(); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// transfer converts a Transfer log; ok is false for a log of another shape
// under the same topic (ERC-721's Transfer indexes its third argument, so
// it has four topics and no data).
func (l *rpcLog) transfer() (store.TokenTransfer, bool) {
	if len(l.Topics) != 3 || l.Topics[0] != TransferTopic || len(l.Data) != 32 {
		return store.TokenTransfer{}, false
	}
	var v uint256.Int
	v.SetBytes32(l.Data)
	return store.TokenTransfer{
		BlockNumber: uint64(l.BlockNumber), BlockHash: l.BlockHash, TxHash: l.TxHash,
		TxIndex: int(clampInt64(uint64(l.TxIndex))), LogIndex: int(clampInt64(uint64(l.LogIndex))),
		Token: l.Address, From: common.BytesToAddress(l.Topics[1][:]), To: common.BytesToAddress(l.Topics[2][:]),
		Value: store.AmountFromUint256(&v),
	}, true
}
