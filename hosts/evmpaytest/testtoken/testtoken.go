// Package testtoken holds two ERC-20 test tokens and the Go helpers to deploy
// and drive them on any chain backend (go-ethereum's simulated backend, the
// payd dev chain, a real node):
//
//   - StableToken: USDC-shaped, configurable decimals (6 in [DeployStable]),
//     EIP-2612 permit, mint by the deployer.
//   - TetherLike: USDT-shaped, transfer/transferFrom/approve return no bool,
//     no permit, mint by the deployer.
//
// The Solidity sources live beside this file; scripts/build-contracts.sh
// rebuilds the committed ABI (*.abi.json) and bytecode (*.bin) with a pinned
// solc from npm. It is shared test infrastructure of the test kit
// (hosts/evmpaytest): every package's tests and `payd dev` import it; no
// library package does.
package testtoken

import (
	"context"
	"crypto/ecdsa"
	_ "embed"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

var (
	//go:embed StableToken.abi.json
	stableABI string
	//go:embed StableToken.bin
	stableBin string
	//go:embed TetherLike.abi.json
	tetherABI string
	//go:embed TetherLike.bin
	tetherBin string
	//go:embed PermitLookalike.abi.json
	lookalikeABI string
	//go:embed PermitLookalike.bin
	lookalikeBin string
)

// TransferTopic is topic 0 of an ERC-20 Transfer(address,address,uint256) log.
var TransferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))

// Kind names one of the test token contracts.
type Kind struct {
	Name     string // contract name
	ABI      abi.ABI
	Bytecode []byte
	Permit   bool // implements EIP-2612 permit
}

// Stable is the USDC-shaped token with EIP-2612 permit.
var Stable = mustKind("StableToken", stableABI, stableBin, true)

// Tether is the USDT-shaped token (no bool returns, no permit).
var Tether = mustKind("TetherLike", tetherABI, tetherBin, false)

// PermitLookalike is a token that answers EIP-2612's DOMAIN_SEPARATOR() and
// nonces(address) but whose permit always reverts.
var PermitLookalike = mustKind("PermitLookalike", lookalikeABI, lookalikeBin, false)

func mustKind(name, abiJSON, bin string, permit bool) Kind {
	parsed, err := abi.JSON(strings.NewReader(abiJSON))
	if err != nil {
		panic(fmt.Sprintf("testtoken: %s ABI: %v", name, err))
	}
	return Kind{Name: name, ABI: parsed, Bytecode: common.FromHex(strings.TrimSpace(bin)), Permit: permit}
}

// Token is a deployed test token.
type Token struct {
	Kind     Kind
	Address  common.Address
	Name     string
	Symbol   string
	Decimals uint8
	bc       *bind.BoundContract
}

// Deploy sends the creation transaction of a token of kind k, signed by opts
// (the deployer becomes the token's owner, the only one who may mint). The
// token exists once that transaction is mined: commit a block on the
// simulated backend, or wait for the receipt on a node.
func Deploy(opts *bind.TransactOpts, backend bind.ContractBackend, k Kind, name, symbol string, decimals uint8) (*Token, *types.Transaction, error) {
	input, err := k.ABI.Pack("", name, symbol, decimals)
	if err != nil {
		return nil, nil, fmt.Errorf("testtoken: pack constructor: %w", err)
	}
	addr, tx, err := bind.DeployContract(opts, k.Bytecode, backend, input)
	if err != nil {
		return nil, nil, fmt.Errorf("testtoken: deploy %s: %w", k.Name, err)
	}
	return Bind(k, addr, backend, name, symbol, decimals), tx, nil
}

// DeployStable deploys a StableToken with 6 decimals ("Test USD Coin", "USDC").
func DeployStable(opts *bind.TransactOpts, backend bind.ContractBackend) (*Token, *types.Transaction, error) {
	return Deploy(opts, backend, Stable, "Test USD Coin", "USDC", 6)
}

// DeployTether deploys a TetherLike with 6 decimals ("Test Tether USD", "USDT").
func DeployTether(opts *bind.TransactOpts, backend bind.ContractBackend) (*Token, *types.Transaction, error) {
	return Deploy(opts, backend, Tether, "Test Tether USD", "USDT", 6)
}

// Bind returns a handle on an already deployed token.
func Bind(k Kind, addr common.Address, backend bind.ContractBackend, name, symbol string, decimals uint8) *Token {
	return &Token{
		Kind: k, Address: addr, Name: name, Symbol: symbol, Decimals: decimals,
		bc: bind.NewBoundContract(addr, k.ABI, backend, backend, backend),
	}
}

// Mint sends a mint of value base units to `to`; opts must be the deployer.
func (t *Token) Mint(opts *bind.TransactOpts, to common.Address, value *big.Int) (*types.Transaction, error) {
	return t.bc.Transact(opts, "mint", to, value)
}

// MintBatch mints value base units to each of to, one Transfer log each
// (StableToken only); opts must be the deployer.
func (t *Token) MintBatch(opts *bind.TransactOpts, to []common.Address, value *big.Int) (*types.Transaction, error) {
	return t.bc.Transact(opts, "mintBatch", to, value)
}

// Transfer sends value base units from opts.From to `to`.
func (t *Token) Transfer(opts *bind.TransactOpts, to common.Address, value *big.Int) (*types.Transaction, error) {
	return t.bc.Transact(opts, "transfer", to, value)
}

// Approve lets spender move value base units of opts.From.
func (t *Token) Approve(opts *bind.TransactOpts, spender common.Address, value *big.Int) (*types.Transaction, error) {
	return t.bc.Transact(opts, "approve", spender, value)
}

// TransferFrom moves value base units from `from` to `to` on an allowance
// held by opts.From.
func (t *Token) TransferFrom(opts *bind.TransactOpts, from, to common.Address, value *big.Int) (*types.Transaction, error) {
	return t.bc.Transact(opts, "transferFrom", from, to, value)
}

// Permit submits a signed EIP-2612 permit (StableToken only).
func (t *Token) Permit(opts *bind.TransactOpts, p PermitSig) (*types.Transaction, error) {
	if !t.Kind.Permit {
		return nil, errors.New("testtoken: " + t.Kind.Name + " has no permit")
	}
	return t.bc.Transact(opts, "permit", p.Owner, p.Spender, p.Value, p.Deadline, p.V, p.R, p.S)
}

// BalanceOf reads the token balance of who at the latest block.
func (t *Token) BalanceOf(ctx context.Context, who common.Address) (*big.Int, error) {
	return t.callBig(ctx, "balanceOf", who)
}

// Allowance reads how much spender may move of owner's balance.
func (t *Token) Allowance(ctx context.Context, owner, spender common.Address) (*big.Int, error) {
	return t.callBig(ctx, "allowance", owner, spender)
}

// Nonce reads owner's current EIP-2612 nonce (StableToken only).
func (t *Token) Nonce(ctx context.Context, owner common.Address) (*big.Int, error) {
	return t.callBig(ctx, "nonces", owner)
}

func (t *Token) callBig(ctx context.Context, method string, args ...any) (*big.Int, error) {
	var out []any
	if err := t.bc.Call(&bind.CallOpts{Context: ctx}, &out, method, args...); err != nil {
		return nil, fmt.Errorf("testtoken: %s: %w", method, err)
	}
	v, ok := out[0].(*big.Int)
	if !ok {
		return nil, fmt.Errorf("testtoken: %s returned %T", method, out[0])
	}
	return v, nil
}

// PermitSig is an EIP-2612 permit with its signature.
type PermitSig struct {
	Owner, Spender common.Address
	Value, Nonce   *big.Int
	Deadline       *big.Int
	V              uint8
	R, S           [32]byte
}

// PermitDigest is the EIP-712 digest a StableToken permit signs: domain
// (name, version "1", chainId, token address) and
// Permit(owner, spender, value, nonce, deadline).
func PermitDigest(tokenName string, chainID *big.Int, token, owner, spender common.Address, value, nonce, deadline *big.Int) common.Hash {
	word := func(b *big.Int) []byte { return common.LeftPadBytes(b.Bytes(), 32) }
	addr := func(a common.Address) []byte { return common.LeftPadBytes(a.Bytes(), 32) }
	domain := crypto.Keccak256(
		crypto.Keccak256([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")),
		crypto.Keccak256([]byte(tokenName)),
		crypto.Keccak256([]byte("1")),
		word(chainID),
		addr(token),
	)
	structHash := crypto.Keccak256(
		crypto.Keccak256([]byte("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)")),
		addr(owner), addr(spender), word(value), word(nonce), word(deadline),
	)
	return crypto.Keccak256Hash([]byte("\x19\x01"), domain, structHash)
}

// SignPermit signs, off-chain with owner's key, a permit for spender to move
// value of t's tokens; nonce is the owner's current permit nonce.
func (t *Token) SignPermit(key *ecdsa.PrivateKey, chainID *big.Int, spender common.Address, value, nonce, deadline *big.Int) (PermitSig, error) {
	owner := crypto.PubkeyToAddress(key.PublicKey)
	digest := PermitDigest(t.Name, chainID, t.Address, owner, spender, value, nonce, deadline)
	sig, err := crypto.Sign(digest[:], key)
	if err != nil {
		return PermitSig{}, fmt.Errorf("testtoken: sign permit: %w", err)
	}
	p := PermitSig{Owner: owner, Spender: spender, Value: value, Nonce: nonce, Deadline: deadline, V: sig[64] + 27}
	copy(p.R[:], sig[:32])
	copy(p.S[:], sig[32:64])
	return p, nil
}
