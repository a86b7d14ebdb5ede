package indexer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/holiman/uint256"

	"github.com/evmpay/evmpay/store"
)

// The node's JSON is decoded field by field into these shapes rather than
// into go-ethereum's types.Block, for two reasons: the block hash must be the
// one the node reports (Cosmos EVM chains do not hash headers the way geth
// does, so types.Header.Hash() would be wrong), and fields that such chains
// omit or shape differently (mixHash, nonce, sha3Uncles, totalDifficulty,
// v/r/s/yParity, accessList, …) are simply not read. Unknown fields are
// ignored; missing optional ones decode to zero or nil.

type rpcBlock struct {
	Number       *quantity      `json:"number"`
	Hash         *common.Hash   `json:"hash"`
	ParentHash   common.Hash    `json:"parentHash"`
	Timestamp    quantity       `json:"timestamp"`
	Miner        lenientAddress `json:"miner"`
	GasLimit     quantity       `json:"gasLimit"`
	GasUsed      quantity       `json:"gasUsed"`
	BaseFee      *bigQuantity   `json:"baseFeePerGas"`
	Transactions []rpcTx        `json:"transactions"`
}

// rpcHeader is a block fetched without full transactions (hashes only).
type rpcHeader struct {
	Number       *quantity         `json:"number"`
	Hash         *common.Hash      `json:"hash"`
	ParentHash   common.Hash       `json:"parentHash"`
	Timestamp    quantity          `json:"timestamp"`
	Miner        lenientAddress    `json:"miner"`
	GasLimit     quantity          `json:"gasLimit"`
	GasUsed      quantity          `json:"gasUsed"`
	BaseFee      *bigQuantity      `json:"baseFeePerGas"`
	Transactions []json.RawMessage `json:"transactions"`
}

// rpcTx holds values rather than pointers (presence is tracked by the
// types themselves) so that decoding a transaction allocates little.
type rpcTx struct {
	Hash     common.Hash    `json:"hash"`
	From     common.Address `json:"from"`
	To       optAddress     `json:"to"`
	Value    bigQuantity    `json:"value"`
	Nonce    quantity       `json:"nonce"`
	Gas      quantity       `json:"gas"`
	Type     quantity       `json:"type"`
	GasPrice bigQuantity    `json:"gasPrice"`
	MaxFee   bigQuantity    `json:"maxFeePerGas"`
	MaxTip   bigQuantity    `json:"maxPriorityFeePerGas"`
	Input    hexData        `json:"input"`
	Data     hexData        `json:"data"` // older nodes name the input "data"
}

// decodeBlock turns one eth_getBlockByNumber result into a Block. raw must
// not be null (the caller handles a missing block). When full is false only
// the header and the transaction count are kept.
func decodeBlock(raw []byte, full bool) (Block, error) {
	if !full {
		var h rpcHeader
		if err := json.Unmarshal(raw, &h); err != nil {
			return Block{}, fmt.Errorf("decode block: %w", err)
		}
		return h.block()
	}
	// As RPCSource.Blocks decodes: into a reused transaction slice.
	rb := &rpcBlock{Transactions: getTxBuf()}
	defer putTxBufs([]*rpcBlock{rb})
	if err := json.Unmarshal(raw, rb); err != nil {
		return Block{}, fmt.Errorf("decode block (full transactions): %w", err)
	}
	return rb.block()
}

func (h *rpcHeader) block() (Block, error) {
	rb := rpcBlock{Number: h.Number, Hash: h.Hash, ParentHash: h.ParentHash, Timestamp: h.Timestamp,
		Miner: h.Miner, GasLimit: h.GasLimit, GasUsed: h.GasUsed, BaseFee: h.BaseFee}
	b, err := rb.header()
	b.TxCount = len(h.Transactions)
	return b, err
}

// block converts a block decoded with full transactions. Transactions
// decode straight into rpcTx (no per-element UnmarshalJSON, which would
// make encoding/json validate each one twice); a node that ignores
// full=true sends hashes, which fail to decode.
func (rb *rpcBlock) block() (Block, error) {
	b, err := rb.header()
	if err != nil || len(rb.Transactions) == 0 {
		return b, err
	}
	n := len(rb.Transactions)
	b.Txs = make([]store.Transaction, n)
	// The records' pointer fields point into two slabs per block.
	sl := slabs{amounts: make([]store.Amount, 0, 3*n), addrs: make([]common.Address, 0, n)}
	for i := range rb.Transactions {
		if err := rb.Transactions[i].toStore(&b.Txs[i], &b, i, &sl); err != nil {
			return Block{}, fmt.Errorf("decode block %d: transaction %d: %w", b.Number, i, err)
		}
	}
	return b, nil
}

type slabs struct {
	amounts []store.Amount
	addrs   []common.Address
}

func (s *slabs) amount(q *bigQuantity) *store.Amount {
	if !q.set {
		return nil
	}
	s.amounts = append(s.amounts, store.AmountFromUint256(&q.v))
	return &s.amounts[len(s.amounts)-1]
}

func (s *slabs) addr(a *optAddress) *common.Address {
	if !a.set {
		return nil
	}
	s.addrs = append(s.addrs, a.a)
	return &s.addrs[len(s.addrs)-1]
}

func (rb *rpcBlock) header() (Block, error) {
	if rb.Number == nil {
		return Block{}, errors.New("decode block: no number")
	}
	if rb.Hash == nil {
		return Block{}, fmt.Errorf("decode block %d: no hash (a pending block?)", *rb.Number)
	}
	b := Block{Block: store.Block{
		Number:     uint64(*rb.Number),
		Hash:       *rb.Hash,
		ParentHash: rb.ParentHash,
		Timestamp:  uint64(rb.Timestamp),
		Miner:      common.Address(rb.Miner),
		GasLimit:   clampInt64(uint64(rb.GasLimit)),
		GasUsed:    clampInt64(uint64(rb.GasUsed)),
		TxCount:    len(rb.Transactions),
	}}
	if rb.BaseFee != nil {
		fee := store.AmountFromUint256(&rb.BaseFee.v)
		b.BaseFeeWei = &fee
	}
	return b, nil
}

func (rt *rpcTx) toStore(t *store.Transaction, b *Block, pos int, sl *slabs) error {
	if rt.Hash == (common.Hash{}) {
		return errors.New("no hash")
	}
	*t = store.Transaction{
		Hash:        rt.Hash,
		BlockNumber: b.Number,
		BlockHash:   b.Hash,
		// The position in the block, not the node's transactionIndex:
		// some Cosmos EVM versions miscount it.
		Index:             pos,
		From:              rt.From,
		To:                sl.addr(&rt.To),
		ValueWei:          store.AmountFromUint256(&rt.Value.v),
		Nonce:             clampInt64(uint64(rt.Nonce)),
		Gas:               clampInt64(uint64(rt.Gas)),
		Type:              txType(uint64(rt.Type)),
		GasPriceWei:       sl.amount(&rt.GasPrice),
		MaxFeeWei:         sl.amount(&rt.MaxFee),
		MaxPriorityFeeWei: sl.amount(&rt.MaxTip),
	}
	switch {
	case rt.Input != nil:
		t.Input = rt.Input
	case rt.Data != nil:
		t.Input = rt.Data
	default:
		t.Input = []byte{}
	}
	return nil
}

// txType keeps EIP-2718 types (0x00–0x7f, and whatever a chain adds up to
// 0xff); a larger value, which no chain defines, is recorded as 0xff.
func txType(v uint64) uint8 {
	if v > math.MaxUint8 {
		return math.MaxUint8
	}
	return uint8(v)
}

// clampInt64 caps a value at the largest BIGINT: some Cosmos EVM chains
// report a block gas limit of 2^64-1 ("unlimited").
func clampInt64(v uint64) uint64 {
	return min(v, math.MaxInt64)
}

// quantity is a non-negative integer that nodes send as a 0x-prefixed hex
// string. It also accepts leading zeros ("0x00"), the empty "0x", decimal
// strings and plain JSON numbers, which some nodes send; null leaves it 0.
type quantity uint64

func (q *quantity) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	s, quoted := unquote(b)
	var (
		v   uint64
		err error
	)
	switch {
	case quoted && has0x(s):
		h := s[2:]
		if len(h) == 0 {
			v = 0
		} else {
			v, err = strconv.ParseUint(string(h), 16, 64)
		}
	default:
		v, err = strconv.ParseUint(string(s), 10, 64)
	}
	if err != nil {
		return fmt.Errorf("invalid quantity %s", truncate(b))
	}
	*q = quantity(v)
	return nil
}

// bigQuantity is a quantity up to 2^256-1 (wei amounts); set reports
// that it was present and not null.
type bigQuantity struct {
	v   uint256.Int
	set bool
}

func (q *bigQuantity) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	q.set = true
	s, quoted := unquote(b)
	if quoted && has0x(s) {
		h := bytes.TrimLeft(s[2:], "0")
		if len(h) == 0 {
			q.v.Clear()
			return nil
		}
		if len(h) > 64 {
			return fmt.Errorf("quantity %s exceeds 256 bits", truncate(b))
		}
		if err := q.v.SetFromHex("0x" + string(h)); err != nil {
			return fmt.Errorf("invalid quantity %s", truncate(b))
		}
		return nil
	}
	if err := q.v.SetFromDecimal(string(s)); err != nil {
		return fmt.Errorf("invalid quantity %s", truncate(b))
	}
	return nil
}

// optAddress is an address that may be null (a contract creation's "to").
type optAddress struct {
	a   common.Address
	set bool
}

func (o *optAddress) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if err := o.a.UnmarshalJSON(b); err != nil {
		return err
	}
	o.set = true
	return nil
}

// hexData is 0x-prefixed hex bytes; an odd number of digits is tolerated.
type hexData []byte

func (d *hexData) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	s, quoted := unquote(b)
	if !quoted || !has0x(s) {
		return fmt.Errorf("invalid hex data %s", truncate(b))
	}
	h := s[2:]
	if len(h)%2 == 1 {
		h = append([]byte{'0'}, h...)
	}
	out := make([]byte, len(h)/2)
	if _, err := hexDecode(out, h); err != nil {
		return fmt.Errorf("invalid hex data %s", truncate(b))
	}
	*d = out
	return nil
}

// lenientAddress is an address that decodes to zero when the node sends
// something else (it is informational: the block's miner).
type lenientAddress common.Address

func (a *lenientAddress) UnmarshalJSON(b []byte) error {
	var addr common.Address
	if err := addr.UnmarshalJSON(b); err == nil {
		*a = lenientAddress(addr)
	}
	return nil
}

func unquote(b []byte) ([]byte, bool) {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		return b[1 : len(b)-1], true
	}
	return b, false
}

func has0x(s []byte) bool {
	return len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

func hexDecode(dst, src []byte) (int, error) {
	// hexutil.Decode allocates a string; decode in place instead.
	for i := 0; i < len(src)/2; i++ {
		hi, ok1 := fromHexChar(src[2*i])
		lo, ok2 := fromHexChar(src[2*i+1])
		if !ok1 || !ok2 {
			return i, hexutil.ErrSyntax
		}
		dst[i] = hi<<4 | lo
	}
	return len(src) / 2, nil
}

func fromHexChar(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
