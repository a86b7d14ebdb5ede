package sweep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// erc20 is the part of the ERC-20 and EIP-2612 interfaces the sweeper
// calls. transfer and transferFrom are declared without outputs, so that
// tokens that return nothing (USDT's shape) are called the same way; a
// returned bool is checked by hand (returnsFalse).
var erc20 = func() abi.ABI {
	a, err := abi.JSON(strings.NewReader(`[
	{"type":"function","name":"balanceOf","stateMutability":"view","inputs":[{"name":"a","type":"address"}],"outputs":[{"name":"","type":"uint256"}]},
	{"type":"function","name":"allowance","stateMutability":"view","inputs":[{"name":"o","type":"address"},{"name":"s","type":"address"}],"outputs":[{"name":"","type":"uint256"}]},
	{"type":"function","name":"nonces","stateMutability":"view","inputs":[{"name":"o","type":"address"}],"outputs":[{"name":"","type":"uint256"}]},
	{"type":"function","name":"DOMAIN_SEPARATOR","stateMutability":"view","inputs":[],"outputs":[{"name":"","type":"bytes32"}]},
	{"type":"function","name":"transfer","inputs":[{"name":"to","type":"address"},{"name":"value","type":"uint256"}],"outputs":[]},
	{"type":"function","name":"transferFrom","inputs":[{"name":"from","type":"address"},{"name":"to","type":"address"},{"name":"value","type":"uint256"}],"outputs":[]},
	{"type":"function","name":"permit","inputs":[{"name":"owner","type":"address"},{"name":"spender","type":"address"},{"name":"value","type":"uint256"},{"name":"deadline","type":"uint256"},{"name":"v","type":"uint8"},{"name":"r","type":"bytes32"},{"name":"s","type":"bytes32"}],"outputs":[]}
	]`))
	if err != nil {
		panic(err)
	}
	return a
}()

// transferTopic is keccak256("Transfer(address,address,uint256)").
var transferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))

// permitTypeHash is EIP-2612's
// keccak256("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)").
var permitTypeHash = crypto.Keccak256Hash([]byte("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)"))

// permitDeadline is the deadline of every permit the sweeper signs:
// 2^256 − 1, never. A permit is single-use (the token's nonce) and for the
// exact balance to its one spender, the sweep wallet; a deadline would only
// make a replacement of a slow permit transaction revert.
var permitDeadline = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

func packCall(method string, args ...any) []byte {
	data, err := erc20.Pack(method, args...)
	if err != nil {
		panic(fmt.Sprintf("sweep: pack %s: %v", method, err)) // only fixed, well-typed arguments
	}
	return data
}

// callUint reads a uint256 view of token at the block.
func callUint(ctx context.Context, c ethereum.ContractCaller, token common.Address, block *big.Int, method string, args ...any) (*big.Int, error) {
	out, err := c.CallContract(ctx, ethereum.CallMsg{To: &token, Data: packCall(method, args...)}, block)
	if err != nil {
		return nil, err
	}
	if len(out) != 32 {
		return nil, fmt.Errorf("sweep: %s of token %s returned %d bytes", method, token.Hex(), len(out))
	}
	return new(big.Int).SetBytes(out), nil
}

// returnsFalse reports whether the return data of transfer or transferFrom
// says the call failed: a token that returns a bool returned false. No
// return data (USDT's shape) is success; anything but a 32-byte 0 or 1 is
// a failure too.
func returnsFalse(out []byte) bool {
	if len(out) == 0 {
		return false
	}
	if len(out) != 32 {
		return true
	}
	return !bytes.Equal(out, common.LeftPadBytes([]byte{1}, 32))
}

// permitDigest is the EIP-712 digest a permit's owner signs:
// keccak256(0x1901 ‖ DOMAIN_SEPARATOR ‖ keccak256(abi.encode(PERMIT_TYPEHASH, owner, spender, value, nonce, deadline))).
// The token's own DOMAIN_SEPARATOR() is used as it reports it, so the name
// and version it was built from need not be known.
func permitDigest(domain common.Hash, owner, spender common.Address, value, nonce, deadline *big.Int) common.Hash {
	word := func(x *big.Int) []byte { return common.LeftPadBytes(x.Bytes(), 32) }
	structHash := crypto.Keccak256(permitTypeHash[:], common.LeftPadBytes(owner[:], 32), common.LeftPadBytes(spender[:], 32),
		word(value), word(nonce), word(deadline))
	return crypto.Keccak256Hash([]byte{0x19, 0x01}, domain[:], structHash)
}

// permitCall encodes permit(owner, spender, value, deadline, v, r, s) from a
// 65-byte [R ‖ S ‖ V] signature (V 0/1 or 27/28).
func permitCall(owner, spender common.Address, value *big.Int, sig []byte) ([]byte, error) {
	if len(sig) != 65 {
		return nil, errors.New("sweep: a permit signature is 65 bytes")
	}
	v := sig[64]
	if v < 27 {
		v += 27
	}
	var r, s [32]byte
	copy(r[:], sig[:32])
	copy(s[:], sig[32:64])
	return erc20.Pack("permit", owner, spender, value, permitDeadline, v, r, s)
}

// tokenCall is what a stored token call (transfer, transferFrom or
// permit) moves: its recipient (the spender of a permit) and amount.
type tokenCall struct {
	method string
	to     common.Address
	value  *big.Int
	data   []byte
}

// decodeTokenCall reads a stored transaction's token call.
func decodeTokenCall(raw []byte) (tokenCall, error) {
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		return tokenCall{}, err
	}
	data := tx.Data()
	if len(data) < 4 {
		return tokenCall{}, errors.New("sweep: not a token call")
	}
	m, err := erc20.MethodById(data[:4])
	if err != nil {
		return tokenCall{}, err
	}
	args, err := m.Inputs.Unpack(data[4:])
	if err != nil {
		return tokenCall{}, err
	}
	c := tokenCall{method: m.Name, data: data}
	for i, in := range m.Inputs {
		switch in.Name {
		case "to", "spender":
			c.to, _ = args[i].(common.Address)
		case "value":
			c.value, _ = args[i].(*big.Int)
		}
	}
	if c.value == nil {
		return tokenCall{}, errors.New("sweep: the token call has no value")
	}
	return c, nil
}

// hasTransferLog reports whether r holds token's Transfer(from, to, value)
// event: the proof that a mined transfer moved the tokens (a token that
// returns false, or a transfer that reverted, has none).
func hasTransferLog(r *types.Receipt, token, from, to common.Address, value *big.Int) bool {
	for _, l := range r.Logs {
		if l.Address != token || len(l.Topics) != 3 || l.Topics[0] != transferTopic {
			continue
		}
		if common.BytesToAddress(l.Topics[1][:]) == from && common.BytesToAddress(l.Topics[2][:]) == to &&
			new(big.Int).SetBytes(l.Data).Cmp(value) == 0 {
			return true
		}
	}
	return false
}
