package pkcs11key_test

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet/pkcs11key"
	"github.com/evmpay/evmpay/hdwallet/pkcs11key/softhsmtest"
	"github.com/evmpay/evmpay/hdwallet/signertest"
	"github.com/evmpay/evmpay/sweep"
)

// The token's signer is what sweep consumes for the sweep wallet and the
// gas funder.
var _ sweep.AccountSigner = (*pkcs11key.Signer)(nil)

var ctx = context.Background()

func openToken(t *testing.T) *pkcs11key.Token {
	t.Helper()
	tok, err := pkcs11key.Open(softhsmtest.New(t).Config())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tok.Close() })
	return tok
}

// TestGenerateKey_TransactionsMinedOnSimulatedChain: a key generated in
// the token signs transactions a real EVM mines, from the key's address.
func TestGenerateKey_TransactionsMinedOnSimulatedChain(t *testing.T) {
	t.Parallel()
	k, err := openToken(t).GenerateKey(ctx, "gas-funder")
	require.NoError(t, err)
	require.Equal(t, crypto.PubkeyToAddress(*k.PublicKey()), k.Address())
	signertest.MinedOnSimulatedChain(t, k)
}

// TestSignHash_LowSAndRecoverable: the token's raw ECDSA signatures come
// back low-S with a recovering V.
func TestSignHash_LowSAndRecoverable(t *testing.T) {
	t.Parallel()
	k, err := openToken(t).GenerateKey(ctx, "sweep-wallet")
	require.NoError(t, err)
	signertest.LowSAndRecoverable(t, k, 64)
}

// TestImportKey_KeepsTheAddress: a key imported once signs as the same
// account it was outside the token.
func TestImportKey_KeepsTheAddress(t *testing.T) {
	t.Parallel()
	tok := openToken(t)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	k, err := tok.ImportKey(ctx, "funder", key)
	require.NoError(t, err)
	require.Equal(t, crypto.PubkeyToAddress(key.PublicKey), k.Address())

	h := crypto.Keccak256Hash([]byte("imported"))
	sig, err := k.SignHash(ctx, h)
	require.NoError(t, err)
	pub, err := crypto.SigToPub(h[:], sig)
	require.NoError(t, err)
	require.Equal(t, key.PublicKey, *pub)

	_, err = tok.ImportKey(ctx, "funder", key)
	require.ErrorIs(t, err, pkcs11key.ErrKeyExists)
	_, err = tok.GenerateKey(ctx, "funder")
	require.ErrorIs(t, err, pkcs11key.ErrKeyExists)
}

// TestSigner_ReopenedTokenFindsTheKey: keys live in the token, not the
// session: another Open (a restart) signs as the same address.
func TestSigner_ReopenedTokenFindsTheKey(t *testing.T) {
	t.Parallel()
	ht := softhsmtest.New(t)
	tok, err := pkcs11key.Open(ht.Config())
	require.NoError(t, err)
	k, err := tok.GenerateKey(ctx, "sweep")
	require.NoError(t, err)
	require.NoError(t, tok.Close())

	again, err := pkcs11key.Open(ht.Config())
	require.NoError(t, err)
	defer again.Close()
	k2, err := again.Signer(ctx, "sweep")
	require.NoError(t, err)
	require.Equal(t, k.Address(), k2.Address())
	require.Equal(t, "pkcs11:"+ht.Label+"/sweep("+k.Address().Hex()+")", fmt.Sprint(k2))
}

// TestOpen_WrongPIN: a refused login is ErrWrongPIN, naming the token and
// never the PIN.
func TestOpen_WrongPIN(t *testing.T) {
	t.Parallel()
	ht := softhsmtest.New(t)
	cfg := ht.Config()
	cfg.PIN = "wrong-pin-0000"
	_, err := pkcs11key.Open(cfg)
	require.ErrorIs(t, err, pkcs11key.ErrWrongPIN)
	require.Contains(t, err.Error(), ht.Label)
	require.Contains(t, err.Error(), "CKR_PIN_INCORRECT")
	require.NotContains(t, err.Error(), cfg.PIN)
	require.NotContains(t, err.Error(), ht.PIN)
}

// TestOpen_Unavailable: a module that does not load and a token that is
// not there are ErrUnavailable, and say which.
func TestOpen_Unavailable(t *testing.T) {
	t.Parallel()
	ht := softhsmtest.New(t)
	cfg := ht.Config()
	cfg.Module = "/nonexistent/libpkcs11.so"
	_, err := pkcs11key.Open(cfg)
	require.ErrorIs(t, err, pkcs11key.ErrUnavailable)
	require.Contains(t, err.Error(), "/nonexistent/libpkcs11.so")

	cfg = ht.Config()
	cfg.Token = "no-such-token"
	_, err = pkcs11key.Open(cfg)
	require.ErrorIs(t, err, pkcs11key.ErrUnavailable)
	require.Contains(t, err.Error(), `"no-such-token"`)
}

// TestSigner_MissingKey names the label.
func TestSigner_MissingKey(t *testing.T) {
	t.Parallel()
	tok := openToken(t)
	_, err := tok.Signer(ctx, "nobody")
	require.ErrorIs(t, err, pkcs11key.ErrKeyNotFound)
	require.Contains(t, err.Error(), `"nobody"`)
}

// TestWrapper_RoundTripAndBinding: a data key wrapped in the token comes
// back only with the same associated data.
func TestWrapper_RoundTripAndBinding(t *testing.T) {
	t.Parallel()
	tok := openToken(t)
	w, err := tok.GenerateWrapKey(ctx, "seal")
	require.NoError(t, err)
	dataKey := crypto.Keccak256([]byte("a data key"))
	wrapped, err := w.WrapKey(ctx, dataKey, []byte("PAY_MNEMONIC"))
	require.NoError(t, err)
	require.NotContains(t, string(wrapped), string(dataKey))
	got, err := w.UnwrapKey(ctx, wrapped, []byte("PAY_MNEMONIC"))
	require.NoError(t, err)
	require.Equal(t, dataKey, got)

	_, err = w.UnwrapKey(ctx, wrapped, []byte("PAY_SECRET_KEY"))
	require.Error(t, err, "the associated data is bound")
	wrapped[len(wrapped)-1] ^= 1
	_, err = w.UnwrapKey(ctx, wrapped, []byte("PAY_MNEMONIC"))
	require.Error(t, err, "altered ciphertext")

	// A signing key is no wrapping key, and the other way round.
	_, err = tok.GenerateKey(ctx, "signing")
	require.NoError(t, err)
	_, err = tok.Wrapper(ctx, "signing")
	require.True(t, errors.Is(err, pkcs11key.ErrKeyNotFound) || errors.Is(err, pkcs11key.ErrNotWrappingKey), "%v", err)
	_, err = tok.Signer(ctx, "seal")
	require.ErrorIs(t, err, pkcs11key.ErrKeyNotFound)
}

// TestSigner_ConcurrentUse: one token serves concurrent signers.
func TestSigner_ConcurrentUse(t *testing.T) {
	t.Parallel()
	tok := openToken(t)
	var keys []*pkcs11key.Signer
	for _, l := range []string{"a", "b"} {
		k, err := tok.GenerateKey(ctx, l)
		require.NoError(t, err)
		keys = append(keys, k)
	}
	errs := make(chan error, 40)
	for i := range 40 {
		go func() {
			k := keys[i%2]
			h := crypto.Keccak256Hash([]byte(fmt.Sprint(i)))
			sig, err := k.SignHash(ctx, h)
			if err == nil {
				var pub *ecdsa.PublicKey
				if pub, err = crypto.SigToPub(h[:], sig); err == nil && crypto.PubkeyToAddress(*pub) != k.Address() {
					err = errors.New("wrong key")
				}
			}
			errs <- err
		}()
	}
	for range 40 {
		require.NoError(t, <-errs)
	}
	require.False(t, strings.Contains(fmt.Sprintf("%v %+v %#v", keys[0], keys[0], keys[0]), "PIN"))
}
