package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/webhook"
)

// merchantRules are the invoice API's checks on merchants' webhook URLs
// and settlement addresses (invoice.MerchantRules), from what this process
// can know: private webhook hosts are refused when the webhook dialer
// refuses them; the sweep wallet (derived from the mnemonic) and the gas
// funder (from its key) are refused as settlement addresses when their
// secrets are configured here (the mnemonic is not read when useMnemonic is
// false: an API process given PAY_XPUB holds no private key); chain, when
// not nil, refuses contracts. Deposit addresses are always refused (the
// store knows them).
func merchantRules(ctx context.Context, keys KeyProvider, useMnemonic, blockPrivateWebhooks bool, chain invoice.CodeReader, log *slog.Logger) (invoice.MerchantRules, error) {
	r := invoice.MerchantRules{Chain: chain}
	if blockPrivateWebhooks {
		r.WebhookHost = webhook.CheckPublicHost
	}
	err := errSecretMissing
	if useMnemonic {
		var sweepWallet common.Address
		if sweepWallet, err = sweepWalletAddress(ctx, keys); err == nil {
			r.ServiceAddresses = append(r.ServiceAddresses, sweepWallet)
		}
	}
	switch {
	case errors.Is(err, errSecretMissing):
		log.Warn("the sweep wallet's address is unknown to this process (no mnemonic): it is not refused as a settlement address at merchant create/update; the sweeper checks again before sending")
	case err != nil:
		return r, err
	}
	funder, err := loadGasFunder(ctx, keys)
	switch {
	case err == nil:
		r.ServiceAddresses = append(r.ServiceAddresses, crypto.PubkeyToAddress(funder.PublicKey))
	case !errors.Is(err, errSecretMissing):
		return r, err
	}
	// The sweep wallet and gas funder held in an HSM or KMS.
	r.ServiceAddresses = append(r.ServiceAddresses, accountKeyAddresses(ctx, keys)...)
	return r, nil
}

// sweepWalletAddress derives the sweep wallet's address from the mnemonic
// and drops the keys.
func sweepWalletAddress(ctx context.Context, keys KeyProvider) (common.Address, error) {
	w, err := loadWallet(ctx, keys)
	if err != nil {
		return common.Address{}, err
	}
	defer w.Wipe()
	k, err := w.SweepKey()
	if err != nil {
		return common.Address{}, err
	}
	return crypto.PubkeyToAddress(k.PublicKey), nil
}
