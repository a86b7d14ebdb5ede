package pkcs11key

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/miekg/pkcs11"

	"github.com/evmpay/evmpay/hdwallet"
)

// secp256k1Params is CKA_EC_PARAMS for secp256k1: the DER of the named
// curve's OID, 1.3.132.0.10.
var secp256k1Params = []byte{0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x0a}

// Signer signs with one secp256k1 key in the token. It has the method set
// of sweep.AccountSigner. It prints as its label and address only.
type Signer struct {
	tok   *Token
	label string
	pub   *ecdsa.PublicKey
	addr  common.Address
}

// Signer returns the signer of the key pair labelled label. It checks,
// before anything is signed, that the private key is a secp256k1 key that
// may sign (ErrNotSigningKey otherwise) and reads the address from the
// public key object.
func (t *Token) Signer(ctx context.Context, label string) (*Signer, error) {
	var pub *ecdsa.PublicKey
	err := t.do(ctx, func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		priv, err := findOne(c, s, pkcs11.CKO_PRIVATE_KEY, label)
		if err != nil {
			return err
		}
		attrs, err := c.GetAttributeValue(s, priv, []*pkcs11.Attribute{
			pkcs11.NewAttribute(pkcs11.CKA_KEY_TYPE, nil),
			pkcs11.NewAttribute(pkcs11.CKA_SIGN, nil),
			pkcs11.NewAttribute(pkcs11.CKA_EC_PARAMS, nil),
		})
		if err != nil {
			return err
		}
		if !bytes.Equal(attrs[2].Value, secp256k1Params) || !isKeyType(attrs[0].Value, pkcs11.CKK_EC) {
			return fmt.Errorf("%w: key %q in token %q is not a secp256k1 EC key", ErrNotSigningKey, label, t.cfg.Token)
		}
		if !isTrue(attrs[1].Value) {
			return fmt.Errorf("%w: key %q in token %q has CKA_SIGN false", ErrNotSigningKey, label, t.cfg.Token)
		}
		pubObj, err := findOne(c, s, pkcs11.CKO_PUBLIC_KEY, label)
		if err != nil {
			return err
		}
		pub, err = readPublic(c, s, pubObj)
		return err
	})
	if err != nil {
		return nil, t.keyError(label, err)
	}
	return &Signer{tok: t, label: label, pub: pub, addr: crypto.PubkeyToAddress(*pub)}, nil
}

// GenerateKey creates a secp256k1 key pair labelled label inside the
// token: the private key is sensitive and non-extractable, and may only
// sign. It refuses a label already in use (ErrKeyExists).
func (t *Token) GenerateKey(ctx context.Context, label string) (*Signer, error) {
	err := t.do(ctx, func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		if err := absent(c, s, label); err != nil {
			return err
		}
		id := labelID(label)
		_, _, err := c.GenerateKeyPair(s, []*pkcs11.Mechanism{pkcs11.NewMechanism(pkcs11.CKM_EC_KEY_PAIR_GEN, nil)},
			[]*pkcs11.Attribute{
				pkcs11.NewAttribute(pkcs11.CKA_CLASS, pkcs11.CKO_PUBLIC_KEY),
				pkcs11.NewAttribute(pkcs11.CKA_KEY_TYPE, pkcs11.CKK_EC),
				pkcs11.NewAttribute(pkcs11.CKA_TOKEN, true),
				pkcs11.NewAttribute(pkcs11.CKA_VERIFY, true),
				pkcs11.NewAttribute(pkcs11.CKA_EC_PARAMS, secp256k1Params),
				pkcs11.NewAttribute(pkcs11.CKA_LABEL, label),
				pkcs11.NewAttribute(pkcs11.CKA_ID, id),
			},
			privateTemplate(label, id))
		return err
	})
	if err != nil {
		return nil, t.keyError(label, err)
	}
	return t.Signer(ctx, label)
}

// ImportKey stores an existing private key in the token under label, once:
// afterwards it is as non-extractable as a generated one, and the caller
// should destroy its copy. The public key is stored beside it (the
// address is read from it).
func (t *Token) ImportKey(ctx context.Context, label string, key *ecdsa.PrivateKey) (*Signer, error) {
	if key == nil || key.Curve != crypto.S256() {
		return nil, errors.New("pkcs11key: ImportKey needs a secp256k1 private key")
	}
	point, err := asn1.Marshal(crypto.FromECDSAPub(&key.PublicKey))
	if err != nil {
		return nil, err
	}
	d := make([]byte, 32)
	key.D.FillBytes(d)
	defer clear(d)
	err = t.do(ctx, func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		if err := absent(c, s, label); err != nil {
			return err
		}
		id := labelID(label)
		priv := append(privateTemplate(label, id),
			pkcs11.NewAttribute(pkcs11.CKA_CLASS, pkcs11.CKO_PRIVATE_KEY),
			pkcs11.NewAttribute(pkcs11.CKA_KEY_TYPE, pkcs11.CKK_EC),
			pkcs11.NewAttribute(pkcs11.CKA_EC_PARAMS, secp256k1Params),
			pkcs11.NewAttribute(pkcs11.CKA_VALUE, d))
		privObj, err := c.CreateObject(s, priv)
		if err != nil {
			return err
		}
		_, err = c.CreateObject(s, []*pkcs11.Attribute{
			pkcs11.NewAttribute(pkcs11.CKA_CLASS, pkcs11.CKO_PUBLIC_KEY),
			pkcs11.NewAttribute(pkcs11.CKA_KEY_TYPE, pkcs11.CKK_EC),
			pkcs11.NewAttribute(pkcs11.CKA_TOKEN, true),
			pkcs11.NewAttribute(pkcs11.CKA_VERIFY, true),
			pkcs11.NewAttribute(pkcs11.CKA_EC_PARAMS, secp256k1Params),
			pkcs11.NewAttribute(pkcs11.CKA_EC_POINT, point),
			pkcs11.NewAttribute(pkcs11.CKA_LABEL, label),
			pkcs11.NewAttribute(pkcs11.CKA_ID, id),
		})
		if err != nil {
			_ = c.DestroyObject(s, privObj)
		}
		return err
	})
	if err != nil {
		return nil, t.keyError(label, err)
	}
	return t.Signer(ctx, label)
}

// privateTemplate is the private half of every key pair: kept in the
// token, sensitive, never extractable, signing only.
func privateTemplate(label string, id []byte) []*pkcs11.Attribute {
	return []*pkcs11.Attribute{
		pkcs11.NewAttribute(pkcs11.CKA_TOKEN, true),
		pkcs11.NewAttribute(pkcs11.CKA_PRIVATE, true),
		pkcs11.NewAttribute(pkcs11.CKA_SENSITIVE, true),
		pkcs11.NewAttribute(pkcs11.CKA_EXTRACTABLE, false),
		pkcs11.NewAttribute(pkcs11.CKA_SIGN, true),
		pkcs11.NewAttribute(pkcs11.CKA_DECRYPT, false),
		pkcs11.NewAttribute(pkcs11.CKA_DERIVE, false),
		pkcs11.NewAttribute(pkcs11.CKA_LABEL, label),
		pkcs11.NewAttribute(pkcs11.CKA_ID, id),
	}
}

// labelID is the CKA_ID of a key pair, which ties its halves together:
// the label's bytes (at most 64).
func labelID(label string) []byte {
	id := []byte(label)
	if len(id) > 64 {
		id = crypto.Keccak256(id)
	}
	return id
}

// Label is the key's CKA_LABEL.
func (k *Signer) Label() string { return k.label }

// KeyID is where the key lives: token/label.
func (k *Signer) KeyID() string { return k.tok.cfg.Token + "/" + k.label }

// Address is the key's Ethereum address.
func (k *Signer) Address() common.Address { return k.addr }

// PublicKey is the key's public half.
func (k *Signer) PublicKey() *ecdsa.PublicKey { return k.pub }

// SignTx signs tx in the token for chain signer.
func (k *Signer) SignTx(ctx context.Context, tx *types.Transaction, signer types.Signer) (*types.Transaction, error) {
	return hdwallet.SignTxWith(ctx, tx, signer, k.addr, k.SignHash)
}

// SignHash signs a 32-byte digest in the token and returns [R || S || V]
// with a low s and V 0 or 1.
func (k *Signer) SignHash(ctx context.Context, hash common.Hash) ([]byte, error) {
	var raw []byte
	err := k.tok.do(ctx, func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		priv, err := k.tok.handle(c, s, pkcs11.CKO_PRIVATE_KEY, k.label)
		if err != nil {
			return err
		}
		if err := c.SignInit(s, []*pkcs11.Mechanism{pkcs11.NewMechanism(pkcs11.CKM_ECDSA, nil)}, priv); err != nil {
			return err
		}
		raw, err = c.Sign(s, hash[:])
		return err
	})
	if err != nil {
		return nil, k.tok.keyError(k.label, err)
	}
	if len(raw) != 64 {
		return nil, fmt.Errorf("pkcs11key: key %q in token %q: CKM_ECDSA returned %d bytes, want 64", k.label, k.tok.cfg.Token, len(raw))
	}
	r, s := new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:])
	sig, err := hdwallet.RecoverableSignature(hash[:], r, s, k.pub)
	if err != nil {
		return nil, fmt.Errorf("pkcs11key: key %q in token %q: %w", k.label, k.tok.cfg.Token, err)
	}
	return sig, nil
}

// Check reports whether the key can be reached: the token answers and the
// key is still there.
func (k *Signer) Check(ctx context.Context) error {
	err := k.tok.do(ctx, func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		_, err := findOne(c, s, pkcs11.CKO_PRIVATE_KEY, k.label)
		return err
	})
	if err != nil {
		return k.tok.keyError(k.label, err)
	}
	return nil
}

// String names the key: "pkcs11:token/label(0xAddress)".
func (k *Signer) String() string { return "pkcs11:" + k.KeyID() + "(" + k.addr.Hex() + ")" }

// GoString is String.
func (k *Signer) GoString() string { return k.String() }

// LogValue logs the key's name and address.
func (k *Signer) LogValue() slog.Value { return slog.StringValue(k.String()) }

// keyError turns a PKCS#11 error into one of the package's, naming the key.
func (t *Token) keyError(label string, err error) error {
	switch {
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrWrongPIN), errors.Is(err, ErrKeyNotFound),
		errors.Is(err, ErrKeyExists), errors.Is(err, ErrNotSigningKey), errors.Is(err, ErrNotWrappingKey),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case is(err, pkcs11.CKR_KEY_FUNCTION_NOT_PERMITTED, pkcs11.CKR_KEY_TYPE_INCONSISTENT):
		return fmt.Errorf("%w: key %q in token %q: %s", ErrNotSigningKey, label, t.cfg.Token, rvName(err))
	case is(err, pkcs11.CKR_MECHANISM_INVALID, pkcs11.CKR_DOMAIN_PARAMS_INVALID, pkcs11.CKR_CURVE_NOT_SUPPORTED):
		return fmt.Errorf("pkcs11key: token %q does not support secp256k1 keys (key %q): %s", t.cfg.Token, label, rvName(err))
	case broken(err):
		return fmt.Errorf("%w: key %q in token %q: %s", ErrUnavailable, label, t.cfg.Token, rvName(err))
	}
	return fmt.Errorf("pkcs11key: key %q in token %q: %s", label, t.cfg.Token, rvName(err))
}

// findOne finds the one object of class labelled label.
func findOne(c *pkcs11.Ctx, s pkcs11.SessionHandle, class uint, label string) (pkcs11.ObjectHandle, error) {
	objs, err := find(c, s, class, label)
	if err != nil {
		return 0, err
	}
	switch len(objs) {
	case 0:
		return 0, fmt.Errorf("%w: no %s labelled %q", ErrKeyNotFound, className(class), label)
	case 1:
		return objs[0], nil
	}
	return 0, fmt.Errorf("pkcs11key: %d objects of class %s are labelled %q: labels must be unique", len(objs), className(class), label)
}

func find(c *pkcs11.Ctx, s pkcs11.SessionHandle, class uint, label string) ([]pkcs11.ObjectHandle, error) {
	if err := c.FindObjectsInit(s, []*pkcs11.Attribute{
		pkcs11.NewAttribute(pkcs11.CKA_CLASS, class),
		pkcs11.NewAttribute(pkcs11.CKA_LABEL, label),
	}); err != nil {
		return nil, err
	}
	objs, _, err := c.FindObjects(s, 4)
	if ferr := c.FindObjectsFinal(s); err == nil {
		err = ferr
	}
	return objs, err
}

// absent fails with ErrKeyExists when any object is labelled label.
func absent(c *pkcs11.Ctx, s pkcs11.SessionHandle, label string) error {
	for _, class := range []uint{pkcs11.CKO_PRIVATE_KEY, pkcs11.CKO_PUBLIC_KEY, pkcs11.CKO_SECRET_KEY} {
		objs, err := find(c, s, class, label)
		if err != nil {
			return err
		}
		if len(objs) > 0 {
			return fmt.Errorf("%w: %q", ErrKeyExists, label)
		}
	}
	return nil
}

func readPublic(c *pkcs11.Ctx, s pkcs11.SessionHandle, obj pkcs11.ObjectHandle) (*ecdsa.PublicKey, error) {
	attrs, err := c.GetAttributeValue(s, obj, []*pkcs11.Attribute{pkcs11.NewAttribute(pkcs11.CKA_EC_POINT, nil)})
	if err != nil {
		return nil, err
	}
	point := attrs[0].Value
	// CKA_EC_POINT is a DER OCTET STRING holding the uncompressed point;
	// some modules return the bare point.
	var inner []byte
	if rest, err := asn1.Unmarshal(point, &inner); err == nil && len(rest) == 0 {
		point = inner
	}
	pub, err := crypto.UnmarshalPubkey(point)
	if err != nil {
		return nil, fmt.Errorf("pkcs11key: the public key's CKA_EC_POINT is not a secp256k1 point: %w", err)
	}
	return pub, nil
}

func className(class uint) string {
	switch class {
	case pkcs11.CKO_PRIVATE_KEY:
		return "private key"
	case pkcs11.CKO_PUBLIC_KEY:
		return "public key"
	case pkcs11.CKO_SECRET_KEY:
		return "secret key"
	}
	return fmt.Sprintf("object class %d", class)
}

// isTrue reads a CK_BBOOL attribute.
func isTrue(v []byte) bool { return len(v) == 1 && v[0] != 0 }

// isKeyType reads a CK_ULONG attribute (native byte order, as the module
// writes it) and compares it with want.
func isKeyType(v []byte, want uint) bool {
	switch len(v) {
	case 8:
		return binary.NativeEndian.Uint64(v) == uint64(want)
	case 4:
		return binary.NativeEndian.Uint32(v) == uint32(want)
	}
	return false
}
