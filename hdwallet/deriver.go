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
	var child secp256k1.JacobianPoint
	if err := d.child(index, &child); err != nil {
		return common.Address{}, err
	}
	child.ToAffine()
	return affineAddress(&child), nil
}

// child sets p to the public key of index, in Jacobian coordinates.
func (d *Deriver) child(index uint32, p *secp256k1.JacobianPoint) error {
	if index > MaxIndex {
		return fmt.Errorf("%w: %d", ErrIndexOutOfRange, index)
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
		return fmt.Errorf("%w: index %d", ErrInvalidChild, index)
	}
	var tweak secp256k1.JacobianPoint
	secp256k1.ScalarBaseMultNonConst(&il, &tweak)
	secp256k1.AddNonConst(&tweak, &d.point, p)
	if p.Z.IsZero() || (p.X.IsZero() && p.Y.IsZero()) {
		return fmt.Errorf("%w: index %d", ErrInvalidChild, index)
	}
	return nil
}

// Addresses returns the addresses of the n indexes from first on:
// addrs[i] is what Address(first+i) returns. It shares one field inversion
// among them (Montgomery's trick), the part of Address that turns the key
// into affine coordinates, so that each address costs about a quarter less.
// An index with no valid key (ErrInvalidChild, see Address) has the zero
// address in addrs: ask Address for it. The indexes must lie in
// [0, 2^31) (ErrIndexOutOfRange otherwise).
func (d *Deriver) Addresses(first uint32, n int) ([]common.Address, error) {
	if n < 0 || uint64(first)+uint64(n) > uint64(MaxIndex)+1 {
		return nil, fmt.Errorf("%w: %d indexes from %d", ErrIndexOutOfRange, n, first)
	}
	pts := make([]secp256k1.JacobianPoint, n)
	valid := make([]bool, n)
	// before[i] is the product of the Z of the valid points before i.
	before := make([]secp256k1.FieldVal, n)
	var acc secp256k1.FieldVal
	acc.SetInt(1)
	for i := range pts {
		if d.child(first+uint32(i), &pts[i]) != nil {
			continue
		}
		valid[i] = true
		before[i].Set(&acc)
		acc.Mul(&pts[i].Z)
	}
	acc.Inverse() // 1 / the product of every valid Z
	addrs := make([]common.Address, n)
	for i := n - 1; i >= 0; i-- {
		if !valid[i] {
			continue
		}
		p := &pts[i]
		var zInv, zInv2 secp256k1.FieldVal
		zInv.Mul2(&acc, &before[i]) // 1 / Z
		acc.Mul(&p.Z)               // 1 / the product of the Z before i
		zInv2.SquareVal(&zInv)
		p.X.Mul(&zInv2)
		p.Y.Mul(zInv2.Mul(&zInv))
		p.Z.SetInt(1)
		p.X.Normalize()
		p.Y.Normalize()
		addrs[i] = affineAddress(p)
	}
	return addrs, nil
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
