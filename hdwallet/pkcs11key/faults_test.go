package pkcs11key_test

import (
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet/pkcs11key"
)

// TestGenerateKey_PrivateValueNeverLeaves: the generated private key is
// sensitive and non-extractable: the token refuses to read CKA_VALUE.
func TestGenerateKey_PrivateValueNeverLeaves(t *testing.T) {
	t.Parallel()
	tok := openToken(t)
	_, err := tok.GenerateKey(ctx, "k")
	require.NoError(t, err)
	sensitive, extractable, valueErr, err := pkcs11key.PrivateKeyAttrs(tok, "k")
	require.NoError(t, err)
	require.True(t, sensitive, "CKA_SENSITIVE")
	require.False(t, extractable, "CKA_EXTRACTABLE")
	require.True(t, pkcs11key.IsSensitive(valueErr), "reading CKA_VALUE: %v", valueErr)
}

// TestSigner_KeyWithoutSignPermission: a key whose CKA_SIGN is false is
// refused when the signer is taken — an error naming the key and the
// token, never the PIN — and a signer taken before the permission was
// removed gets the token's refusal, named the same way.
func TestSigner_KeyWithoutSignPermission(t *testing.T) {
	t.Parallel()
	tok := openToken(t)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	before, err := tok.ImportKey(ctx, "no-sign", key)
	require.NoError(t, err)
	require.NoError(t, pkcs11key.ForbidSigning(tok, "no-sign"))

	_, err = tok.Signer(ctx, "no-sign")
	require.ErrorIs(t, err, pkcs11key.ErrNotSigningKey)
	require.Contains(t, err.Error(), `key "no-sign"`)
	require.Contains(t, err.Error(), tok.Label())

	_, err = before.SignHash(ctx, crypto.Keccak256Hash([]byte("x")))
	require.ErrorIs(t, err, pkcs11key.ErrNotSigningKey)
	require.Contains(t, err.Error(), `key "no-sign"`)
}

// TestSigner_ReopensABrokenSession: when every session of the token is
// closed under the signer, the next signature reopens a session, logs in
// again and succeeds.
func TestSigner_ReopensABrokenSession(t *testing.T) {
	t.Parallel()
	tok := openToken(t)
	k, err := tok.GenerateKey(ctx, "k")
	require.NoError(t, err)
	_, err = k.SignHash(ctx, crypto.Keccak256Hash([]byte("before")))
	require.NoError(t, err)

	require.NoError(t, pkcs11key.CloseAllSessions(tok))

	sig, err := k.SignHash(ctx, crypto.Keccak256Hash([]byte("after")))
	require.NoError(t, err)
	require.Len(t, sig, 65)
	require.NoError(t, k.Check(ctx))
}
