package indexer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/evmpay/evmpay/store"
)

// Block is a block as the node reported it, decoded into the store's
// records: the header (with the node's own hash, never recomputed) and, when
// fetched with full transactions, its transactions in index order.
type Block struct {
	store.Block
	// Txs are the block's transactions; empty when the block was fetched
	// without them (TxCount still says how many it has).
	Txs []store.Transaction
	// Transfers are the block's Transfer logs of the configured tokens
	// (Config.Tokens), in log order.
	Transfers []store.TokenTransfer
}

// Source is the chain as the indexer reads it: three JSON-RPC methods.
// NewRPCSource implements it on a go-ethereum *rpc.Client; tests wrap it to
// inject failures.
type Source interface {
	// ChainID returns eth_chainId.
	ChainID(ctx context.Context) (uint64, error)
	// BlockNumber returns eth_blockNumber, the node's head.
	BlockNumber(ctx context.Context) (uint64, error)
	// Blocks returns the blocks from, from+1, … (count of them), fetched
	// with one batch of eth_getBlockByNumber calls, with full transactions
	// when full is true. The result is in order and may be shorter than
	// count: it stops before the first block the node does not have or
	// failed to return. An error means not even the first block came back.
	// Every block's Number is the one asked for: a node that answers a
	// request for block 0 with another block (evmd answers block 1: a
	// CometBFT chain has no block 0) does not have block 0.
	Blocks(ctx context.Context, from uint64, count int, full bool) ([]Block, error)
	// TransferLogs returns the ERC-20 Transfer logs emitted by the token
	// contracts tokens in each of blocks (result i for blocks[i]), in log
	// order, fetched by block hash. It fails unless every block's logs
	// came back; ErrChainMoved when a log belongs to another block than
	// asked (the node's chain changed).
	TransferLogs(ctx context.Context, blocks []store.Block, tokens []common.Address) ([][]store.TokenTransfer, error)
}

// FinalizedSource is a Source that also reads the node's finalized block,
// which the indexer needs under finality "tag" (Config.Finality,
// store.FinalityTag). RPCSource and ClientSource implement it; New refuses
// finality "tag" with a Source that does not.
type FinalizedSource interface {
	// Finalized returns the number and hash of the node's finalized block
	// (eth_getBlockByNumber("finalized")). A node that has none, or does
	// not know the tag, is an error that says so.
	Finalized(ctx context.Context) (number uint64, hash common.Hash, err error)
}

// RPCClient is the part of go-ethereum's *rpc.Client that RPCSource uses.
type RPCClient interface {
	CallContext(ctx context.Context, result any, method string, args ...any) error
	BatchCallContext(ctx context.Context, b []rpc.BatchElem) error
}

var _ RPCClient = (*rpc.Client)(nil)

// RPCSource reads the chain over JSON-RPC and decodes blocks itself.
type RPCSource struct {
	c RPCClient
}

var (
	_ Source          = (*RPCSource)(nil)
	_ FinalizedSource = (*RPCSource)(nil)
)

// NewRPCSource returns a Source on c, usually a *rpc.Client from rpc.Dial
// (HTTP or WebSocket) or a simulated backend's in-process client.
func NewRPCSource(c RPCClient) *RPCSource { return &RPCSource{c: c} }

// ChainID implements Source.
func (s *RPCSource) ChainID(ctx context.Context) (uint64, error) {
	var q quantity
	if err := s.c.CallContext(ctx, &q, "eth_chainId"); err != nil {
		return 0, fmt.Errorf("eth_chainId: %w", err)
	}
	return uint64(q), nil
}

// BlockNumber implements Source.
func (s *RPCSource) BlockNumber(ctx context.Context) (uint64, error) {
	var q quantity
	if err := s.c.CallContext(ctx, &q, "eth_blockNumber"); err != nil {
		return 0, fmt.Errorf("eth_blockNumber: %w", err)
	}
	return uint64(q), nil
}

// errNoFinalized ends the error of a node that reports no finalized block.
const errNoFinalized = "finality \"tag\" needs a node that reports its finalized block (an Ethereum proof-of-stake node, " +
	"a rollup node that reports one); use finality \"depth\" or \"instant\" on a chain without"

// Finalized implements FinalizedSource: eth_getBlockByNumber("finalized",
// false), decoded like Blocks (the node's hash, never recomputed).
func (s *RPCSource) Finalized(ctx context.Context) (uint64, common.Hash, error) {
	var h *rpcHeader
	if err := s.c.CallContext(ctx, &h, "eth_getBlockByNumber", "finalized", false); err != nil {
		return 0, common.Hash{}, fmt.Errorf("eth_getBlockByNumber(\"finalized\"): %w; %s", err, errNoFinalized)
	}
	if h == nil {
		return 0, common.Hash{}, fmt.Errorf("eth_getBlockByNumber(\"finalized\"): the node answered null (no finalized block); %s", errNoFinalized)
	}
	b, err := h.block()
	if err != nil {
		return 0, common.Hash{}, fmt.Errorf("eth_getBlockByNumber(\"finalized\"): %w", err)
	}
	return b.Number, b.Hash, nil
}

// errNoBlock marks a null result: the node does not have the block.
var errNoBlock = errors.New("block not found")

// Blocks implements Source.
func (s *RPCSource) Blocks(ctx context.Context, from uint64, count int, full bool) ([]Block, error) {
	if count <= 0 {
		return nil, nil
	}
	// Each result decodes straight from the response (a nil pointer when
	// the node answers null), without an intermediate copy.
	var (
		fulls   []*rpcBlock
		headers []*rpcHeader
	)
	batch := make([]rpc.BatchElem, count)
	if full {
		fulls = make([]*rpcBlock, count)
		for i := range fulls {
			fulls[i] = &rpcBlock{Transactions: getTxBuf()}
		}
		defer putTxBufs(fulls)
	} else {
		headers = make([]*rpcHeader, count)
	}
	for i := range batch {
		batch[i] = rpc.BatchElem{
			Method: "eth_getBlockByNumber",
			Args:   []any{hexutil.Uint64(from + uint64(i)), full},
		}
		if full {
			batch[i].Result = &fulls[i]
		} else {
			batch[i].Result = &headers[i]
		}
	}
	if err := s.c.BatchCallContext(ctx, batch); err != nil {
		return nil, fmt.Errorf("eth_getBlockByNumber batch %d+%d: %w", from, count, err)
	}
	out := make([]Block, 0, count)
	for i := range batch {
		n := from + uint64(i)
		err := batch[i].Error
		var b Block
		switch {
		case err != nil:
		case full && fulls[i] == nil, !full && headers[i] == nil:
			err = errNoBlock
		case full:
			b, err = fulls[i].block()
		default:
			b, err = headers[i].block()
		}
		if err == nil && b.Number != n {
			if n == 0 {
				// A chain without block 0: CometBFT chains start at 1,
				// and evmd answers a request for block 0 with block 1.
				err = errNoBlock
			} else {
				err = fmt.Errorf("asked for block %d, got %d", n, b.Number)
			}
		}
		if err != nil {
			if len(out) > 0 || errors.Is(err, errNoBlock) {
				return out, nil
			}
			return nil, fmt.Errorf("eth_getBlockByNumber %d: %w", n, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// txBufs holds the slices that full blocks' transactions are decoded into
// (rpcBlock.Transactions), reused across batches. encoding/json grows a
// slice it decodes into by doubling it, which made these slices most of
// what decoding a block allocates: about twice the size of the decoded
// transactions, every block. block() copies everything it keeps out of
// them.
var txBufs = sync.Pool{New: func() any { return []rpcTx(nil) }}

// getTxBuf returns an empty slice whose capacity is all zero elements:
// encoding/json decodes into the elements within a slice's capacity
// without zeroing them first, so a field a transaction lacks must find
// zero there, not the previous block's value.
func getTxBuf() []rpcTx {
	return txBufs.Get().([]rpcTx)
}

// maxTxBuf is the capacity above which a slice is not kept in txBufs: a
// slice is zeroed up to its capacity each time it is returned, which must
// stay cheap when a rare huge block's slice comes back for small ones.
const maxTxBuf = 1024

// putTxBufs zeroes the blocks' transaction slices, up to their capacity
// (a repeated "transactions" member can leave decoded elements past the
// length), and returns them to txBufs. A block the node answered null for
// was set to nil by encoding/json; its slice is dropped.
func putTxBufs(blocks []*rpcBlock) {
	for _, b := range blocks {
		if b == nil || cap(b.Transactions) == 0 || cap(b.Transactions) > maxTxBuf {
			continue
		}
		txs := b.Transactions[:cap(b.Transactions)]
		clear(txs)
		txBufs.Put(txs[:0])
	}
}
