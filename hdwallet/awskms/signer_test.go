package awskms_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet/awskms"
	"github.com/evmpay/evmpay/hdwallet/awskms/kmstest"
	"github.com/evmpay/evmpay/hdwallet/signertest"
	"github.com/evmpay/evmpay/sweep"
)

// The KMS signer is what sweep consumes for the sweep wallet and the gas
// funder; *kms.Client is what it consumes from the SDK.
var (
	_ sweep.AccountSigner = (*awskms.Signer)(nil)
	_ awskms.SignAPI      = (*kms.Client)(nil)
	_ awskms.WrapAPI      = (*kms.Client)(nil)
	_ awskms.CreateAPI    = (*kms.Client)(nil)
)

var ctx = context.Background()

func newSigner(t testing.TB, e *kmstest.Emulator) *awskms.Signer {
	t.Helper()
	id, err := awskms.CreateSigningKey(ctx, e.Client(), "evmpay test "+t.Name())
	require.NoError(t, err)
	k, err := awskms.NewSigner(ctx, e.Client(), id)
	require.NoError(t, err)
	return k
}

// TestSigner_TransactionsMinedOnSimulatedChain: a KMS key signs
// transactions a real EVM mines, from the key's address.
func TestSigner_TransactionsMinedOnSimulatedChain(t *testing.T) {
	t.Parallel()
	k := newSigner(t, kmstest.Start(t))
	require.Equal(t, crypto.PubkeyToAddress(*k.PublicKey()), k.Address())
	signertest.MinedOnSimulatedChain(t, k)
}

// TestSignHash_LowSAndRecoverable: KMS's DER signatures come back low-S
// with a recovering V.
func TestSignHash_LowSAndRecoverable(t *testing.T) {
	t.Parallel()
	signertest.LowSAndRecoverable(t, newSigner(t, kmstest.Start(t)), 48)
}

// TestNewSigner_RefusesKeysThatCannotSign: a symmetric key and a missing
// key are refused when the signer is made, naming the key.
func TestNewSigner_RefusesKeysThatCannotSign(t *testing.T) {
	t.Parallel()
	e := kmstest.Start(t)
	sym, err := awskms.CreateWrapKey(ctx, e.Client(), "not for signing")
	require.NoError(t, err)
	_, err = awskms.NewSigner(ctx, e.Client(), sym)
	require.ErrorIs(t, err, awskms.ErrNotSigningKey)
	require.Contains(t, err.Error(), sym)

	_, err = awskms.NewSigner(ctx, e.Client(), "11111111-2222-3333-4444-555555555555")
	require.ErrorIs(t, err, awskms.ErrKeyNotFound)
	require.Contains(t, err.Error(), "11111111-2222-3333-4444-555555555555")
}

// TestSigner_DisabledKey: a key disabled after the signer was made is a
// refusal naming the key, not an outage.
func TestSigner_DisabledKey(t *testing.T) {
	t.Parallel()
	e := kmstest.Start(t)
	k := newSigner(t, e)
	_, err := e.Client().DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(k.KeyID())})
	require.NoError(t, err)
	_, err = k.SignHash(ctx, crypto.Keccak256Hash([]byte("x")))
	require.ErrorIs(t, err, awskms.ErrNotSigningKey)
	require.NotErrorIs(t, err, awskms.ErrUnavailable)
	require.Contains(t, err.Error(), k.KeyID())
}

// TestSigner_KMSUnreachable: with KMS down, signing fails with
// ErrUnavailable (nothing signed); once it is back, the same signer signs.
func TestSigner_KMSUnreachable(t *testing.T) {
	t.Parallel()
	e := kmstest.Start(t)
	k := newSigner(t, e)
	e.Stop()
	short, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := k.SignHash(short, crypto.Keccak256Hash([]byte("x")))
	require.ErrorIs(t, err, awskms.ErrUnavailable)
	require.Contains(t, err.Error(), k.KeyID())
	require.ErrorIs(t, k.Check(short), awskms.ErrUnavailable)

	e.Restart()
	require.NoError(t, k.Check(ctx))
	_, err = k.SignHash(ctx, crypto.Keccak256Hash([]byte("x")))
	require.NoError(t, err)
}

// TestWrapper_RoundTripAndBinding: a data key wrapped by KMS comes back
// only with the same associated data, and only from its key.
func TestWrapper_RoundTripAndBinding(t *testing.T) {
	t.Parallel()
	e := kmstest.Start(t)
	id, err := awskms.CreateWrapKey(ctx, e.Client(), "seal")
	require.NoError(t, err)
	w := awskms.NewWrapper(e.Client(), id)
	dataKey := crypto.Keccak256([]byte("a data key"))
	wrapped, err := w.WrapKey(ctx, dataKey, []byte("PAY_MNEMONIC"))
	require.NoError(t, err)
	got, err := w.UnwrapKey(ctx, wrapped, []byte("PAY_MNEMONIC"))
	require.NoError(t, err)
	require.Equal(t, dataKey, got)
	_, err = w.UnwrapKey(ctx, wrapped, []byte("PAY_SECRET_KEY"))
	require.Error(t, err, "the encryption context is bound")

	other, err := awskms.CreateWrapKey(ctx, e.Client(), "other")
	require.NoError(t, err)
	_, err = awskms.NewWrapper(e.Client(), other).UnwrapKey(ctx, wrapped, []byte("PAY_MNEMONIC"))
	require.Error(t, err, "another key did not wrap it")

	signing := newSigner(t, e)
	_, err = awskms.NewWrapper(e.Client(), signing.KeyID()).WrapKey(ctx, dataKey, []byte("x"))
	require.ErrorIs(t, err, awskms.ErrNotWrappingKey)
}
