package hdwallet

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// Signer is the signing side of the deposit wallet: it knows the address of
// every deposit index and signs transactions that spend from it. Wallet
// implements it in memory; a KMS or HSM implementation can replace it without
// the consumer (sweep) noticing.
//
// Address must agree with Deriver.Address for the same mnemonic. SignTx
// returns tx signed by the key of m/44'/60'/0'/0/index with signer (use
// types.LatestSignerForChainID); it may be a network call, so it takes a
// context.
type Signer interface {
	Address(index uint32) (common.Address, error)
	SignTx(ctx context.Context, index uint32, tx *types.Transaction, signer types.Signer) (*types.Transaction, error)
}

var _ Signer = (*Wallet)(nil)

// Wallet is the in-memory signing side: it holds the BIP-32 master key of a
// mnemonic and derives private keys on demand. Only the process that signs
// (sweep) should hold one; everything else takes Wallet.Deriver().
//
// A Wallet is safe for concurrent use. It prints as "[REDACTED]" under every
// fmt verb and in log/slog.
type Wallet struct {
	s *walletState // behind a pointer so that printing a copied value shows nothing
}

type walletState struct {
	mu      sync.RWMutex
	master  *ExtendedKey // nil once wiped
	account *ExtendedKey // private m/44'/60'/0'/0
	deriver *Deriver
}

// NewWallet derives the wallet of a mnemonic with an optional BIP-39
// passphrase ("" for none). A different passphrase is a different wallet.
func NewWallet(m *Mnemonic, passphrase string) (*Wallet, error) {
	seed := m.Seed(passphrase)
	defer clear(seed)
	return NewWalletFromSeed(seed)
}

// NewWalletFromSeed builds a wallet from a BIP-32 seed of 16 to 64 bytes (a
// BIP-39 seed is 64). seed is not retained.
func NewWalletFromSeed(seed []byte) (*Wallet, error) {
	master, err := NewMasterKey(seed)
	if err != nil {
		return nil, err
	}
	account, err := master.Derive(accountPath)
	if err != nil {
		master.Wipe()
		return nil, err
	}
	d, err := newDeriver(account)
	if err != nil {
		master.Wipe()
		account.Wipe()
		return nil, err
	}
	return &Wallet{s: &walletState{master: master, account: account, deriver: d}}, nil
}

// Deriver returns the public-only side of the wallet, for the invoice API.
// It stays usable after Wipe.
func (w *Wallet) Deriver() *Deriver { return w.s.deriver }

// PrivateKey returns the private key of m/44'/60'/0'/0/index, index in
// [0, 2^31).
func (w *Wallet) PrivateKey(index uint32) (*ecdsa.PrivateKey, error) {
	if index > MaxIndex {
		return nil, fmt.Errorf("%w: %d", ErrIndexOutOfRange, index)
	}
	w.s.mu.RLock()
	defer w.s.mu.RUnlock()
	if w.s.master == nil {
		return nil, ErrWiped
	}
	child, err := w.s.account.Child(index)
	if err != nil {
		return nil, err
	}
	defer child.Wipe()
	return child.ECDSAPrivateKey()
}

// Address returns the address of m/44'/60'/0'/0/index, computed from the
// private key (so it cross-checks the public derivation of Deriver).
func (w *Wallet) Address(index uint32) (common.Address, error) {
	key, err := w.PrivateKey(index)
	if err != nil {
		return common.Address{}, err
	}
	defer key.D.SetInt64(0)
	return crypto.PubkeyToAddress(key.PublicKey), nil
}

// SignTx signs tx with the key of m/44'/60'/0'/0/index.
func (w *Wallet) SignTx(ctx context.Context, index uint32, tx *types.Transaction, signer types.Signer) (*types.Transaction, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key, err := w.PrivateKey(index)
	if err != nil {
		return nil, err
	}
	defer key.D.SetInt64(0)
	signed, err := types.SignTx(tx, signer, key)
	if err != nil {
		return nil, fmt.Errorf("hdwallet: signing for index %d: %w", index, err)
	}
	return signed, nil
}

// SignHash signs a 32-byte digest (an EIP-712 permit, for example) with
// the key of m/44'/60'/0'/0/index and returns the 65-byte [R || S || V]
// signature, V being 0 or 1.
func (w *Wallet) SignHash(ctx context.Context, index uint32, hash common.Hash) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key, err := w.PrivateKey(index)
	if err != nil {
		return nil, err
	}
	defer key.D.SetInt64(0)
	sig, err := crypto.Sign(hash[:], key)
	if err != nil {
		return nil, fmt.Errorf("hdwallet: signing a hash for index %d: %w", index, err)
	}
	return sig, nil
}

// DerivePath derives any path from the master key, e.g. SweepPath. The
// result is a private ExtendedKey; call Public on it before handing it to
// code that should not spend.
func (w *Wallet) DerivePath(path string) (*ExtendedKey, error) {
	p, err := ParsePath(path)
	if err != nil {
		return nil, err
	}
	w.s.mu.RLock()
	defer w.s.mu.RUnlock()
	if w.s.master == nil {
		return nil, ErrWiped
	}
	return w.s.master.Derive(p)
}

// SweepKey returns the private key of the sweep wallet at SweepPath
// (m/44'/60'/1'/0/0), an account separate from the deposit addresses.
func (w *Wallet) SweepKey() (*ecdsa.PrivateKey, error) {
	k, err := w.DerivePath(SweepPath)
	if err != nil {
		return nil, err
	}
	defer k.Wipe()
	return k.ECDSAPrivateKey()
}

// Wipe overwrites the wallet's private key material. Afterwards every method
// that needs a private key returns ErrWiped; Deriver keeps working.
func (w *Wallet) Wipe() {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.s.master == nil {
		return
	}
	w.s.master.Wipe()
	w.s.account.Wipe()
	w.s.master, w.s.account = nil, nil
}

// String returns "[REDACTED]".
func (Wallet) String() string { return redacted }

// GoString returns "hdwallet.Wallet{[REDACTED]}".
func (Wallet) GoString() string { return "hdwallet.Wallet{" + redacted + "}" }

// Format prints "[REDACTED]" for every verb.
func (Wallet) Format(f fmt.State, _ rune) { writeRedacted(f, "hdwallet.Wallet") }

// LogValue keeps the wallet out of log/slog output.
func (Wallet) LogValue() slog.Value { return slog.StringValue(redacted) }
