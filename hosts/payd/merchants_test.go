package main

import (
	"context"
	"encoding/hex"
	"log/slog"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
)

func TestMerchantRules_FromSecretsAndPrivateNetworkSetting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	m, err := hdwallet.GenerateMnemonic(12)
	require.NoError(t, err)
	funder, err := crypto.GenerateKey()
	require.NoError(t, err)
	keys := fileProvider{getenv: envOf(map[string]string{
		"PAY_MNEMONIC_FILE":           writeSecret(t, dir, "mnemonic", m.Phrase()),
		"GAS_FUNDER_PRIVATE_KEY_FILE": writeSecret(t, dir, "funder", hex.EncodeToString(crypto.FromECDSA(funder))),
	})}
	w, err := hdwallet.NewWallet(m, "")
	require.NoError(t, err)
	sweepKey, err := w.SweepKey()
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)

	r, err := merchantRules(ctx, keys, true, true, nil, log)
	require.NoError(t, err)
	require.ElementsMatch(t, []common.Address{crypto.PubkeyToAddress(sweepKey.PublicKey), crypto.PubkeyToAddress(funder.PublicKey)}, r.ServiceAddresses)
	require.NotNil(t, r.WebhookHost)
	require.Error(t, r.WebhookHost("127.0.0.1"))
	require.NoError(t, r.WebhookHost("hooks.example.com"))

	// Private networks allowed (development), and an xpub-only API process:
	// no host check, and the mnemonic is not read.
	r, err = merchantRules(ctx, keys, false, false, nil, log)
	require.NoError(t, err)
	require.Nil(t, r.WebhookHost)
	require.Equal(t, []common.Address{crypto.PubkeyToAddress(funder.PublicKey)}, r.ServiceAddresses)

	// No secrets at all: nothing but the deposit-address lookup.
	r, err = merchantRules(ctx, fileProvider{getenv: envOf(nil)}, true, true, nil, log)
	require.NoError(t, err)
	require.Empty(t, r.ServiceAddresses)
}
