package hdwallet

import (
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"fmt"
	"log/slog"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"golang.org/x/crypto/ripemd160" //nolint:staticcheck // BIP-32 fingerprints are HASH160 = RIPEMD-160(SHA-256).
)

// Version bytes of mainnet extended keys (BIP-32): "xprv" and "xpub".
const (
	versionXprv uint32 = 0x0488ADE4
	versionXpub uint32 = 0x0488B21E
)

// serializedLen is the length of a serialized extended key before the
// Base58Check checksum: version(4) depth(1) fingerprint(4) child(4)
// chain code(32) key(33).
const serializedLen = 78

// masterHMACKey is the HMAC key BIP-32 uses to turn a seed into a master key.
var masterHMACKey = []byte("Bitcoin seed")

// ExtendedKey is a BIP-32 extended key on secp256k1, private (xprv) or public
// (xpub). It is immutable and safe for concurrent use, except Wipe.
//
// A private ExtendedKey prints as "[REDACTED]" under every fmt verb and in
// log/slog; a public one prints as its xpub string. Serialize gives the
// encoded key explicitly.
type ExtendedKey struct {
	k *extKey // behind a pointer so that printing a copied value shows nothing
}

type extKey struct {
	private    bool
	depth      uint8
	parentFP   [4]byte
	childIndex uint32
	chainCode  [32]byte
	priv       secp256k1.ModNScalar // zero unless private
	pub        secp256k1.PublicKey  // always set
}

// NewMasterKey derives the BIP-32 master key from a seed of 16 to 64 bytes
// (a BIP-39 seed is 64 bytes).
func NewMasterKey(seed []byte) (*ExtendedKey, error) {
	if len(seed) < 16 || len(seed) > 64 {
		return nil, ErrSeedLength
	}
	mac := hmac.New(sha512.New, masterHMACKey)
	mac.Write(seed)
	var sum [64]byte
	mac.Sum(sum[:0])
	defer clear(sum[:])

	k := &extKey{private: true}
	copy(k.chainCode[:], sum[32:])
	if overflow := k.priv.SetByteSlice(sum[:32]); overflow || k.priv.IsZero() {
		k.priv.Zero()
		return nil, fmt.Errorf("%w: master key", ErrInvalidChild)
	}
	k.pub = *secp256k1.NewPrivateKey(&k.priv).PubKey()
	return &ExtendedKey{k: k}, nil
}

// IsPrivate reports whether the key holds a private key (xprv).
func (x *ExtendedKey) IsPrivate() bool { return x.k.private }

// Depth is 0 for the master key, 1 for its children, and so on.
func (x *ExtendedKey) Depth() uint8 { return x.k.depth }

// ChildIndex is the child number this key was derived with (hardened ones
// include HardenedOffset); 0 for the master key.
func (x *ExtendedKey) ChildIndex() uint32 { return x.k.childIndex }

// ParentFingerprint is the fingerprint of the parent key; zero for the
// master key.
func (x *ExtendedKey) ParentFingerprint() [4]byte { return x.k.parentFP }

// Fingerprint is the first four bytes of HASH160 of the compressed public
// key, as stored in children's ParentFingerprint.
func (x *ExtendedKey) Fingerprint() [4]byte { return fingerprint(&x.k.pub) }

func fingerprint(pub *secp256k1.PublicKey) [4]byte {
	sha := sha256.Sum256(pub.SerializeCompressed())
	r := ripemd160.New()
	r.Write(sha[:])
	var fp [4]byte
	copy(fp[:], r.Sum(nil))
	return fp
}

// Public returns the public (xpub) form of the key. For a public key it
// returns the key itself.
func (x *ExtendedKey) Public() *ExtendedKey {
	if !x.k.private {
		return x
	}
	k := *x.k
	k.private = false
	k.priv.Zero()
	return &ExtendedKey{k: &k}
}

// Child derives child number i (CKDpriv for a private key, CKDpub for a
// public one). i ≥ HardenedOffset is a hardened child and needs a private
// key. Errors: ErrHardenedFromPublic, ErrDepth, and, with probability below
// 2^-127, ErrInvalidChild.
func (x *ExtendedKey) Child(i uint32) (*ExtendedKey, error) {
	p := x.k
	if p.depth == 255 {
		return nil, ErrDepth
	}
	hardened := i >= HardenedOffset
	if hardened && !p.private {
		return nil, ErrHardenedFromPublic
	}

	var data [37]byte
	if hardened {
		// 0x00 || ser256(kpar) || ser32(i)
		p.priv.PutBytesUnchecked(data[1:33])
	} else {
		// serP(Kpar) || ser32(i)
		copy(data[:33], p.pub.SerializeCompressed())
	}
	binary.BigEndian.PutUint32(data[33:], i)
	var sum [64]byte
	mac := hmac.New(sha512.New, p.chainCode[:])
	mac.Write(data[:])
	mac.Sum(sum[:0])
	clear(data[:])
	defer clear(sum[:])

	var il secp256k1.ModNScalar
	if overflow := il.SetByteSlice(sum[:32]); overflow {
		return nil, fmt.Errorf("%w: child %d", ErrInvalidChild, i)
	}
	defer il.Zero()

	c := &extKey{
		private:    p.private,
		depth:      p.depth + 1,
		parentFP:   fingerprint(&p.pub),
		childIndex: i,
	}
	copy(c.chainCode[:], sum[32:])
	if p.private {
		// ki = IL + kpar (mod n)
		c.priv.Add2(&il, &p.priv)
		if c.priv.IsZero() {
			return nil, fmt.Errorf("%w: child %d", ErrInvalidChild, i)
		}
		c.pub = *secp256k1.NewPrivateKey(&c.priv).PubKey()
	} else {
		// Ki = IL·G + Kpar
		pt, ok := addTweak(&il, &p.pub)
		if !ok {
			return nil, fmt.Errorf("%w: child %d", ErrInvalidChild, i)
		}
		c.pub = *secp256k1.NewPublicKey(&pt.X, &pt.Y)
	}
	return &ExtendedKey{k: c}, nil
}

// addTweak returns IL·G + K in affine coordinates, or false for the point at
// infinity.
func addTweak(il *secp256k1.ModNScalar, k *secp256k1.PublicKey) (secp256k1.JacobianPoint, bool) {
	var tweak, parent, sum secp256k1.JacobianPoint
	secp256k1.ScalarBaseMultNonConst(il, &tweak)
	k.AsJacobian(&parent)
	secp256k1.AddNonConst(&tweak, &parent, &sum)
	if sum.Z.IsZero() || (sum.X.IsZero() && sum.Y.IsZero()) {
		return sum, false
	}
	sum.ToAffine()
	return sum, true
}

// Derive follows path from this key. A path is absolute ("m/..."), so the
// key should be the master key; Derive does not check that.
func (x *ExtendedKey) Derive(path Path) (*ExtendedKey, error) {
	k := x
	for _, i := range path {
		var err error
		if k, err = k.Child(i); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// Address is the Ethereum address of the key's public key.
func (x *ExtendedKey) Address() common.Address { return pubkeyAddress(&x.k.pub) }

// pubkeyAddress is Keccak-256(X || Y)[12:] of an uncompressed public key.
func pubkeyAddress(pub *secp256k1.PublicKey) common.Address {
	var pt secp256k1.JacobianPoint
	pub.AsJacobian(&pt) // affine and normalised
	return affineAddress(&pt)
}

// ECDSAPublicKey returns the public key in go-ethereum's form.
func (x *ExtendedKey) ECDSAPublicKey() *ecdsa.PublicKey {
	return &ecdsa.PublicKey{Curve: crypto.S256(), X: x.k.pub.X(), Y: x.k.pub.Y()}
}

// ECDSAPrivateKey returns the private key in go-ethereum's form, ready for
// types.SignTx. It fails for a public key.
func (x *ExtendedKey) ECDSAPrivateKey() (*ecdsa.PrivateKey, error) {
	if !x.k.private {
		return nil, fmt.Errorf("%w: not a private key", ErrInvalidExtendedKey)
	}
	var b [32]byte
	x.k.priv.PutBytes(&b)
	defer clear(b[:])
	return crypto.ToECDSA(b[:])
}

// Serialize returns the Base58Check encoding: "xprv..." for a private key,
// "xpub..." for a public one. An xprv is a secret; never log it.
func (x *ExtendedKey) Serialize() string {
	var b [serializedLen]byte
	k := x.k
	if k.private {
		binary.BigEndian.PutUint32(b[0:4], versionXprv)
		k.priv.PutBytesUnchecked(b[46:78]) // b[45] stays 0x00
	} else {
		binary.BigEndian.PutUint32(b[0:4], versionXpub)
		copy(b[45:78], k.pub.SerializeCompressed())
	}
	b[4] = k.depth
	copy(b[5:9], k.parentFP[:])
	binary.BigEndian.PutUint32(b[9:13], k.childIndex)
	copy(b[13:45], k.chainCode[:])
	s := base58CheckEncode(b[:])
	clear(b[:])
	return s
}

// ParseExtendedKey decodes a mainnet "xprv..." or "xpub..." string and checks
// it as BIP-32 requires: checksum, version, private key in [1, n-1], public
// key on the curve, and a depth-0 key with zero fingerprint and child number.
// Errors wrap ErrInvalidExtendedKey and never contain the input.
func ParseExtendedKey(s string) (*ExtendedKey, error) {
	b, err := base58CheckDecode(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidExtendedKey, err)
	}
	defer clear(b)
	if len(b) != serializedLen {
		return nil, fmt.Errorf("%w: decoded length %d, want %d", ErrInvalidExtendedKey, len(b), serializedLen)
	}
	k := &extKey{depth: b[4], childIndex: binary.BigEndian.Uint32(b[9:13])}
	copy(k.parentFP[:], b[5:9])
	copy(k.chainCode[:], b[13:45])
	if k.depth == 0 && (k.parentFP != [4]byte{} || k.childIndex != 0) {
		return nil, fmt.Errorf("%w: depth 0 with a parent fingerprint or child number", ErrInvalidExtendedKey)
	}
	key := b[45:78]
	switch binary.BigEndian.Uint32(b[0:4]) {
	case versionXprv:
		if key[0] != 0x00 {
			return nil, fmt.Errorf("%w: private key data must start with 0x00", ErrInvalidExtendedKey)
		}
		k.private = true
		if overflow := k.priv.SetByteSlice(key[1:]); overflow || k.priv.IsZero() {
			k.priv.Zero()
			return nil, fmt.Errorf("%w: private key not in [1, n-1]", ErrInvalidExtendedKey)
		}
		k.pub = *secp256k1.NewPrivateKey(&k.priv).PubKey()
	case versionXpub:
		if key[0] != secp256k1.PubKeyFormatCompressedEven && key[0] != secp256k1.PubKeyFormatCompressedOdd {
			return nil, fmt.Errorf("%w: public key must be compressed (0x02/0x03)", ErrInvalidExtendedKey)
		}
		pub, err := secp256k1.ParsePubKey(key)
		if err != nil {
			return nil, fmt.Errorf("%w: public key is not a point on the curve", ErrInvalidExtendedKey)
		}
		k.pub = *pub
	default:
		return nil, fmt.Errorf("%w: unknown version (want mainnet xprv or xpub)", ErrInvalidExtendedKey)
	}
	return &ExtendedKey{k: k}, nil
}

// Wipe overwrites the private key and chain code. The key must not be used
// afterwards, and no other goroutine may be using it.
func (x *ExtendedKey) Wipe() {
	x.k.priv.Zero()
	clear(x.k.chainCode[:])
}

// String returns the xpub of a public key and "[REDACTED]" for a private one.
func (x ExtendedKey) String() string {
	if x.k == nil {
		return "<nil>"
	}
	if x.k.private {
		return redacted
	}
	return x.Serialize()
}

// GoString returns a Go-syntax-like form that never shows a private key.
func (x ExtendedKey) GoString() string {
	if x.k != nil && x.k.private {
		return "hdwallet.ExtendedKey{" + redacted + "}"
	}
	return "hdwallet.ExtendedKey{" + x.String() + "}"
}

// Format prints String for every verb, so a private key prints as
// "[REDACTED]" whatever the verb.
func (x ExtendedKey) Format(f fmt.State, verb rune) {
	if f.Flag('#') {
		_, _ = fmt.Fprint(f, x.GoString())
		return
	}
	_, _ = fmt.Fprint(f, x.String())
}

// LogValue keeps private keys out of log/slog output.
func (x ExtendedKey) LogValue() slog.Value { return slog.StringValue(x.String()) }
