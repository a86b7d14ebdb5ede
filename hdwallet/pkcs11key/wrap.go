package pkcs11key

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"

	"github.com/miekg/pkcs11"
)

// gcmIVLen and gcmTagBits are the AES-GCM parameters of wrapping: a
// 96-bit random IV and a 128-bit tag.
const (
	gcmIVLen   = 12
	gcmTagBits = 128
)

// Wrapper encrypts and decrypts the data keys of sealed secrets with an
// AES-256 key that never leaves the token (CKM_AES_GCM). It satisfies
// sealed.KeyWrapper.
type Wrapper struct {
	tok   *Token
	label string
}

// GenerateWrapKey creates an AES-256 key labelled label in the token:
// sensitive, non-extractable, for encrypting and decrypting data keys
// only. It refuses a label already in use (ErrKeyExists).
func (t *Token) GenerateWrapKey(ctx context.Context, label string) (*Wrapper, error) {
	err := t.do(ctx, func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		if err := absent(c, s, label); err != nil {
			return err
		}
		_, err := c.GenerateKey(s, []*pkcs11.Mechanism{pkcs11.NewMechanism(pkcs11.CKM_AES_KEY_GEN, nil)}, []*pkcs11.Attribute{
			pkcs11.NewAttribute(pkcs11.CKA_CLASS, pkcs11.CKO_SECRET_KEY),
			pkcs11.NewAttribute(pkcs11.CKA_KEY_TYPE, pkcs11.CKK_AES),
			pkcs11.NewAttribute(pkcs11.CKA_VALUE_LEN, 32),
			pkcs11.NewAttribute(pkcs11.CKA_TOKEN, true),
			pkcs11.NewAttribute(pkcs11.CKA_PRIVATE, true),
			pkcs11.NewAttribute(pkcs11.CKA_SENSITIVE, true),
			pkcs11.NewAttribute(pkcs11.CKA_EXTRACTABLE, false),
			pkcs11.NewAttribute(pkcs11.CKA_ENCRYPT, true),
			pkcs11.NewAttribute(pkcs11.CKA_DECRYPT, true),
			pkcs11.NewAttribute(pkcs11.CKA_SIGN, false),
			pkcs11.NewAttribute(pkcs11.CKA_WRAP, false),
			pkcs11.NewAttribute(pkcs11.CKA_UNWRAP, false),
			pkcs11.NewAttribute(pkcs11.CKA_LABEL, label),
			pkcs11.NewAttribute(pkcs11.CKA_ID, labelID(label)),
		})
		return err
	})
	if err != nil {
		return nil, t.wrapError(label, err)
	}
	return t.Wrapper(ctx, label)
}

// Wrapper returns the wrapper of the AES key labelled label, checking that
// it may encrypt and decrypt (ErrNotWrappingKey otherwise).
func (t *Token) Wrapper(ctx context.Context, label string) (*Wrapper, error) {
	err := t.do(ctx, func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		obj, err := findOne(c, s, pkcs11.CKO_SECRET_KEY, label)
		if err != nil {
			return err
		}
		attrs, err := c.GetAttributeValue(s, obj, []*pkcs11.Attribute{
			pkcs11.NewAttribute(pkcs11.CKA_KEY_TYPE, nil),
			pkcs11.NewAttribute(pkcs11.CKA_ENCRYPT, nil),
			pkcs11.NewAttribute(pkcs11.CKA_DECRYPT, nil),
		})
		if err != nil {
			return err
		}
		if !isKeyType(attrs[0].Value, pkcs11.CKK_AES) || !isTrue(attrs[1].Value) || !isTrue(attrs[2].Value) {
			return fmt.Errorf("%w: key %q in token %q is not an AES key with CKA_ENCRYPT and CKA_DECRYPT", ErrNotWrappingKey, label, t.cfg.Token)
		}
		return nil
	})
	if err != nil {
		return nil, t.wrapError(label, err)
	}
	return &Wrapper{tok: t, label: label}, nil
}

// Provider is "pkcs11".
func (w *Wrapper) Provider() string { return "pkcs11" }

// KeyID is token/label.
func (w *Wrapper) KeyID() string { return w.tok.cfg.Token + "/" + w.label }

// String names the key.
func (w *Wrapper) String() string { return "pkcs11:" + w.KeyID() }

// LogValue logs the key's name.
func (w *Wrapper) LogValue() slog.Value { return slog.StringValue(w.String()) }

// WrapKey encrypts a data key in the token with AES-GCM, binding aad; the
// result is IV || ciphertext || tag.
func (w *Wrapper) WrapKey(ctx context.Context, dataKey, aad []byte) ([]byte, error) {
	iv := make([]byte, gcmIVLen)
	if _, err := rand.Read(iv); err != nil {
		return nil, err
	}
	var out []byte
	err := w.tok.do(ctx, func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		obj, err := w.tok.handle(c, s, pkcs11.CKO_SECRET_KEY, w.label)
		if err != nil {
			return err
		}
		params := pkcs11.NewGCMParams(iv, aad, gcmTagBits)
		defer params.Free()
		if err := c.EncryptInit(s, []*pkcs11.Mechanism{pkcs11.NewMechanism(pkcs11.CKM_AES_GCM, params)}, obj); err != nil {
			return err
		}
		ct, err := c.Encrypt(s, dataKey)
		if err != nil {
			return err
		}
		if got := params.IV(); len(got) == gcmIVLen {
			iv = got // modules that choose their own IV write it back
		}
		out = append(append([]byte{}, iv...), ct...)
		return nil
	})
	if err != nil {
		return nil, w.tok.wrapError(w.label, err)
	}
	return out, nil
}

// UnwrapKey decrypts what WrapKey returned, checking aad.
func (w *Wrapper) UnwrapKey(ctx context.Context, wrapped, aad []byte) ([]byte, error) {
	if len(wrapped) < gcmIVLen+gcmTagBits/8 {
		return nil, fmt.Errorf("pkcs11key: key %q in token %q: wrapped data key too short", w.label, w.tok.cfg.Token)
	}
	var out []byte
	err := w.tok.do(ctx, func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		obj, err := w.tok.handle(c, s, pkcs11.CKO_SECRET_KEY, w.label)
		if err != nil {
			return err
		}
		params := pkcs11.NewGCMParams(wrapped[:gcmIVLen], aad, gcmTagBits)
		defer params.Free()
		if err := c.DecryptInit(s, []*pkcs11.Mechanism{pkcs11.NewMechanism(pkcs11.CKM_AES_GCM, params)}, obj); err != nil {
			return err
		}
		out, err = c.Decrypt(s, wrapped[gcmIVLen:])
		return err
	})
	if err != nil {
		if is(err, pkcs11.CKR_ENCRYPTED_DATA_INVALID, pkcs11.CKR_ENCRYPTED_DATA_LEN_RANGE) {
			return nil, fmt.Errorf("pkcs11key: key %q in token %q did not wrap this data key (or it was altered)", w.label, w.tok.cfg.Token)
		}
		return nil, w.tok.wrapError(w.label, err)
	}
	return out, nil
}

// Check reports whether the wrapping key can be reached.
func (w *Wrapper) Check(ctx context.Context) error {
	err := w.tok.do(ctx, func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		_, err := findOne(c, s, pkcs11.CKO_SECRET_KEY, w.label)
		return err
	})
	if err != nil {
		return w.tok.wrapError(w.label, err)
	}
	return nil
}

func (t *Token) wrapError(label string, err error) error {
	if is(err, pkcs11.CKR_KEY_FUNCTION_NOT_PERMITTED, pkcs11.CKR_KEY_TYPE_INCONSISTENT) {
		return fmt.Errorf("%w: key %q in token %q: %s", ErrNotWrappingKey, label, t.cfg.Token, rvName(err))
	}
	return t.keyError(label, err)
}
