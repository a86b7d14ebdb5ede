package pkcs11key

import (
	"context"

	"github.com/miekg/pkcs11"
)

// Hooks for the external tests, which do to the token what an operator or
// a fault would.

// PrivateKeyAttrs reads CKA_SENSITIVE and CKA_EXTRACTABLE of the private
// key labelled label, and tries to read its CKA_VALUE.
func PrivateKeyAttrs(t *Token, label string) (sensitive, extractable bool, valueErr error, err error) {
	err = t.do(context.Background(), func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		priv, err := findOne(c, s, pkcs11.CKO_PRIVATE_KEY, label)
		if err != nil {
			return err
		}
		attrs, err := c.GetAttributeValue(s, priv, []*pkcs11.Attribute{
			pkcs11.NewAttribute(pkcs11.CKA_SENSITIVE, nil),
			pkcs11.NewAttribute(pkcs11.CKA_EXTRACTABLE, nil),
		})
		if err != nil {
			return err
		}
		sensitive, extractable = isTrue(attrs[0].Value), isTrue(attrs[1].Value)
		_, valueErr = c.GetAttributeValue(s, priv, []*pkcs11.Attribute{pkcs11.NewAttribute(pkcs11.CKA_VALUE, nil)})
		return nil
	})
	return
}

// ForbidSigning sets CKA_SIGN false on the private key labelled label.
func ForbidSigning(t *Token, label string) error {
	return t.do(context.Background(), func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		priv, err := findOne(c, s, pkcs11.CKO_PRIVATE_KEY, label)
		if err != nil {
			return err
		}
		return c.SetAttributeValue(s, priv, []*pkcs11.Attribute{pkcs11.NewAttribute(pkcs11.CKA_SIGN, false)})
	})
}

// CloseAllSessions closes every session of the token's slot behind the
// Token's back, as a restarting network HSM does.
func CloseAllSessions(t *Token) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	slot, err := t.findSlot()
	if err != nil {
		return err
	}
	return t.mod.ctx.CloseAllSessions(slot)
}

// IsSensitive reports CKR_ATTRIBUTE_SENSITIVE.
func IsSensitive(err error) bool { return is(err, pkcs11.CKR_ATTRIBUTE_SENSITIVE) }
