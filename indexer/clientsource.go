package indexer

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/holiman/uint256"

	"github.com/evmpay/evmpay/store"
)

// Client is what ClientSource reads the chain through: go-ethereum's own
// client interfaces, so that *ethclient.Client and the simulated backend's
// simulated.Client satisfy it as they are.
type Client interface {
	ethereum.ChainIDReader
	ethereum.BlockNumberReader
	// BlockByNumber is ethereum.ChainReader's: the block with its
	// transactions; ethereum.NotFound when the node does not have it.
	BlockByNumber(ctx context.Context, number *big.Int) (*types.Block, error)
	ethereum.LogFilterer
}

// ClientSource is a Source on go-ethereum's client interfaces (Client): the
// way to index go-ethereum's simulated backend, or a go-ethereum node
// through an *ethclient.Client, without a raw *rpc.Client.
//
// Its limit: go-ethereum's types.Block computes a block's hash from its
// header (keccak of the RLP header), and a transaction's sender from its
// signature. That is what a go-ethereum node and the simulated backend
// report, so on them ClientSource indexes exactly what RPCSource indexes
// (a differential test checks it). It is NOT what a Cosmos EVM chain
// reports: there a block's hash is its CometBFT hash, and go-ethereum's
// decoding refuses some of its blocks' shapes. On a Cosmos EVM chain use
// NewRPCSource, which keeps the node's hash (docs/cosmos-evm.md).
//
// It reads one block per call (BlockByNumber) and one eth_getLogs per block
// (FilterLogs), without batching: RPCSource, which batches, is the one for
// catching up with a long chain over a network.
type ClientSource struct {
	c Client

	mu     sync.Mutex
	signer types.Signer // for the chain id, read once
}

var (
	_ Source          = (*ClientSource)(nil)
	_ FinalizedSource = (*ClientSource)(nil)
)

// NewClientSource returns a Source on c: an *ethclient.Client (from
// ethclient.Dial) on a go-ethereum node, or a simulated backend's Client().
func NewClientSource(c Client) *ClientSource { return &ClientSource{c: c} }

// ChainID implements Source.
func (s *ClientSource) ChainID(ctx context.Context) (uint64, error) {
	id, err := s.c.ChainID(ctx)
	if err != nil {
		return 0, fmt.Errorf("eth_chainId: %w", err)
	}
	if !id.IsUint64() {
		return 0, fmt.Errorf("eth_chainId: %s is out of range", id)
	}
	return id.Uint64(), nil
}

// BlockNumber implements Source.
func (s *ClientSource) BlockNumber(ctx context.Context) (uint64, error) {
	n, err := s.c.BlockNumber(ctx)
	if err != nil {
		return 0, fmt.Errorf("eth_blockNumber: %w", err)
	}
	return n, nil
}

// Finalized implements FinalizedSource: BlockByNumber with
// rpc.FinalizedBlockNumber (eth_getBlockByNumber("finalized")). Its hash
// is go-ethereum's (see ClientSource's limit).
func (s *ClientSource) Finalized(ctx context.Context) (uint64, common.Hash, error) {
	gb, err := s.c.BlockByNumber(ctx, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	switch {
	case errors.Is(err, ethereum.NotFound) || err == nil && gb == nil:
		return 0, common.Hash{}, fmt.Errorf("eth_getBlockByNumber(\"finalized\"): the node has no finalized block; %s", errNoFinalized)
	case err != nil:
		return 0, common.Hash{}, fmt.Errorf("eth_getBlockByNumber(\"finalized\"): %w; %s", err, errNoFinalized)
	}
	return gb.NumberU64(), gb.Hash(), nil
}

// Blocks implements Source, one BlockByNumber call per block. Without
// full, the transactions are fetched all the same and dropped (TxCount
// still says how many).
func (s *ClientSource) Blocks(ctx context.Context, from uint64, count int, full bool) ([]Block, error) {
	if count <= 0 {
		return nil, nil
	}
	signer, err := s.txSigner(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Block, 0, count)
	for i := range count {
		n := from + uint64(i)
		b, err := s.block(ctx, n, full, signer)
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

// block fetches block n and converts it through the same code as
// RPCSource's (rpcBlock.block), with each transaction's fields as
// go-ethereum's JSON-RPC server reports them.
func (s *ClientSource) block(ctx context.Context, n uint64, full bool, signer types.Signer) (Block, error) {
	gb, err := s.c.BlockByNumber(ctx, new(big.Int).SetUint64(n))
	switch {
	case errors.Is(err, ethereum.NotFound):
		return Block{}, errNoBlock
	case err != nil:
		return Block{}, err
	case gb == nil:
		return Block{}, errNoBlock
	}
	num, hash := quantity(gb.NumberU64()), gb.Hash()
	rb := rpcBlock{
		Number:     &num,
		Hash:       &hash,
		ParentHash: gb.ParentHash(),
		Timestamp:  quantity(gb.Time()),
		Miner:      lenientAddress(gb.Coinbase()),
		GasLimit:   quantity(gb.GasLimit()),
		GasUsed:    quantity(gb.GasUsed()),
	}
	if bf := gb.BaseFee(); bf != nil {
		rb.BaseFee = bigQ(bf)
	}
	txs := gb.Transactions()
	if full {
		rb.Transactions = make([]rpcTx, len(txs))
		for i, tx := range txs {
			if rb.Transactions[i], err = rpcTxOf(tx, gb.BaseFee(), signer); err != nil {
				return Block{}, fmt.Errorf("block %d: transaction %d: %w", n, i, err)
			}
		}
	}
	b, err := rb.block()
	if err != nil {
		return Block{}, err
	}
	b.TxCount = len(txs)
	if b.Number != n {
		if n == 0 {
			return Block{}, errNoBlock // as RPCSource: a chain without block 0
		}
		return Block{}, fmt.Errorf("asked for block %d, got %d", n, b.Number)
	}
	return b, nil
}

// rpcTxOf is a mined transaction as go-ethereum's JSON-RPC server shapes it
// (internal/ethapi newRPCTransaction): legacy and access-list transactions
// carry gasPrice only; EIP-1559 kinds carry maxFeePerGas,
// maxPriorityFeePerGas and, in a block with a base fee, the effective gas
// price min(tip + base fee, fee cap) as gasPrice.
func rpcTxOf(tx *types.Transaction, baseFee *big.Int, signer types.Signer) (rpcTx, error) {
	from, err := types.Sender(signer, tx)
	if err != nil {
		return rpcTx{}, fmt.Errorf("sender: %w", err)
	}
	rt := rpcTx{
		Hash:  tx.Hash(),
		From:  from,
		Value: *bigQ(tx.Value()),
		Nonce: quantity(tx.Nonce()),
		Gas:   quantity(tx.Gas()),
		Type:  quantity(tx.Type()),
		Input: tx.Data(),
	}
	if to := tx.To(); to != nil {
		rt.To = optAddress{a: *to, set: true}
	}
	switch tx.Type() {
	case types.DynamicFeeTxType, types.BlobTxType, types.SetCodeTxType:
		rt.MaxFee, rt.MaxTip = *bigQ(tx.GasFeeCap()), *bigQ(tx.GasTipCap())
		price := tx.GasFeeCap()
		if baseFee != nil {
			if eff := new(big.Int).Add(tx.GasTipCap(), baseFee); eff.Cmp(price) < 0 {
				price = eff
			}
		}
		rt.GasPrice = *bigQ(price)
	default:
		rt.GasPrice = *bigQ(tx.GasPrice())
	}
	return rt, nil
}

// bigQ converts a non-negative big.Int of at most 256 bits (what a valid
// transaction or header holds).
func bigQ(x *big.Int) *bigQuantity {
	q := &bigQuantity{set: true}
	if x != nil {
		if v, overflow := uint256.FromBig(x); !overflow && v != nil {
			q.v = *v
		}
	}
	return q
}

// txSigner is the signer that recovers senders on this chain (every
// transaction type go-ethereum knows, at the node's chain id).
func (s *ClientSource) txSigner(ctx context.Context) (types.Signer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signer != nil {
		return s.signer, nil
	}
	id, err := s.ChainID(ctx)
	if err != nil {
		return nil, err
	}
	s.signer = types.LatestSignerForChainID(new(big.Int).SetUint64(id))
	return s.signer, nil
}

// TransferLogs implements Source: one FilterLogs call per block, by the
// block's hash (EIP-234), as RPCSource does.
func (s *ClientSource) TransferLogs(ctx context.Context, blocks []store.Block, tokens []common.Address) ([][]store.TokenTransfer, error) {
	out := make([][]store.TokenTransfer, len(blocks))
	if len(tokens) == 0 {
		return out, nil
	}
	for i := range blocks {
		b := &blocks[i]
		logs, err := s.c.FilterLogs(ctx, ethereum.FilterQuery{BlockHash: &b.Hash, Addresses: tokens,
			Topics: [][]common.Hash{{TransferTopic}}})
		if err != nil {
			return nil, fmt.Errorf("eth_getLogs block %d %s: %w", b.Number, b.Hash, err)
		}
		rls := make([]rpcLog, len(logs))
		for j, l := range logs {
			rls[j] = rpcLog{Address: l.Address, Topics: l.Topics, Data: l.Data, BlockNumber: quantity(l.BlockNumber),
				BlockHash: l.BlockHash, TxHash: l.TxHash, TxIndex: quantity(l.TxIndex), LogIndex: quantity(l.Index),
				Removed: l.Removed}
		}
		if out[i], err = blockTransfers(b, rls); err != nil {
			return nil, err
		}
	}
	return out, nil
}
