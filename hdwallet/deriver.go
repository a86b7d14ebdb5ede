package hdwallet

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// Deriver turns deposit indexes into addresses using only the extended public
// key of the account node m/44'/60'/0'/0: it holds no private key, so the
// invoice API can use it without being able to spend. Address i is one
// non-hardened BIP-32 step from the cached account node.
//
// A Deriver is immutable and safe for concurrent use.
type Deriver struct {
	account    *ExtendedKey // public, depth 4, child 0
	xpub       string
	compressed [33]byte                // serP(K) of the account node, the HMAC input prefix
	point      secp256k1.JacobianPoint // K of the account node, affine (Z = 1)
	chainCode  [32]byte
}

// NewDeriver builds a Deriver from the "xpub..." string of the account node
// m/44'/60'/0'/0, as exported by Deriver.XPub or by wallets that export the
// BIP-44 external chain (for example ethers' HDNodeWallet at that path,
// neutered).
//
// The key must be a public key of depth 4 with child number 0; anything else
// (an xprv, the master key, the depth-3 account key m/44'/60'/0') is
// rejected with ErrNotAccountKey, because it would silently derive different
// addresses. A depth and child number cannot prove the whole path, so the
// xpub must come from m/44'/60'/0'/0 of the deposit mnemonic: compare one
// address with Wallet.Address when you configure it.
func NewDeriver(xpub string) (*Deriver, error) {
	k, err := ParseExtendedKey(xpub)
	if err != nil {
		return nil, err
	}
	if k.IsPrivate() {
		k.Wipe()
		return nil, fmt.Errorf("%w: got a private key (xprv); pass the xpub", ErrNotAccountKey)
	}
	return newDeriver(k)
}

// newDeriver builds a Deriver from the account node; a private key is
// neutered first.
func newDeriver(k *ExtendedKey) (*Deriver, error) {
	if k.Depth() != uint8(len(accountPath)) || k.ChildIndex() != accountPath[len(accountPath)-1] {
		return nil, fmt.Errorf("%w: depth %d, child number %d; want depth 4, child number 0",
			ErrNotAccountKey, k.Depth(), k.ChildIndex())
	}
	pub := k.Public()
	d := &Deriver{account: pub, xpub: pub.Serialize(), chainCode: pub.k.chainCode}
	copy(d.compressed[:], pub.k.pub.SerializeCompressed())
	pub.k.pub.AsJacobian(&d.point)
	return d, nil
}

// Address returns the EIP-55 address of m/44'/60'/0'/0/index. index must be
// in [0, 2^31) (ErrIndexOutOfRange otherwise). With probability below 2^-127
// the index has no valid key and the error wraps ErrInvalidChild: skip to the
// next index.
func (d *Deriver) Address(index uint32) (common.Address, error) {
	if index > MaxIndex {
		return common.Address{}, fmt.Errorf("%w: %d", ErrIndexOutOfRange, index)
	}
	// I = HMAC-SHA512(c, serP(K) || ser32(i)); Ki = IL·G + K.
	var data [37]byte
	copy(data[:33], d.compressed[:])
	binary.BigEndian.PutUint32(data[33:], index)
	mac := hmac.New(sha512.New, d.chainCode[:])
	mac.Write(data[:])
	var sum [64]byte
	mac.Sum(sum[:0])

	var il secp256k1.ModNScalar
	if overflow := il.SetByteSlice(sum[:32]); overflow {
		return common.Address{}, fmt.Errorf("%w: index %d", ErrInvalidChild, index)
	}
	var tweak, child secp256k1.JacobianPoint
	secp256k1.ScalarBaseMultNonConst(&il, &tweak)
	secp256k1.AddNonConst(&tweak, &d.point, &child)
	if child.Z.IsZero() || (child.X.IsZero() && child.Y.IsZero()) {
		return common.Address{}, fmt.Errorf("%w: index %d", ErrInvalidChild, index)
	}
	child.ToAffine()
	return affineAddress(&child), nil
}

// affineAddress is Keccak-256(X || Y)[12:] of a normalised affine point.
func affineAddress(p *secp256k1.JacobianPoint) common.Address {
	var xy [64]byte
	p.X.PutBytesUnchecked(xy[:32])
	p.Y.PutBytesUnchecked(xy[32:])
	return common.BytesToAddress(crypto.Keccak256(xy[:])[12:])
}

// XPub returns the account node's extended public key, the string NewDeriver
// accepts. It is not a secret, but it reveals every deposit address: treat it
// as confidential.
func (d *Deriver) XPub() string { return d.xpub }

// AccountKey returns the account node m/44'/60'/0'/0 as a public
// ExtendedKey.
func (d *Deriver) AccountKey() *ExtendedKey { return d.account }

// String identifies the Deriver by its account key's fingerprint, without
// printing the xpub.
func (d *Deriver) String() string {
	fp := d.account.Fingerprint()
	return "hdwallet.Deriver{" + AccountPath + " fingerprint " + hex.EncodeToString(fp[:]) + "}"
}
