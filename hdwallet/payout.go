package hdwallet

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"strconv"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// PayoutAccountPath is the account of the merchants' payout wallets:
// merchant m's payout wallet is PayoutAccountPath + "/m" (PayoutPath). It
// is account 2 of the same mnemonic, beside the deposit addresses
// (account 0) and the sweep wallet (account 1), so a payout wallet never
// coincides with either and is restorable from the same backup.
const PayoutAccountPath = "m/44'/60'/2'/0"

// PayoutPath is the derivation path of merchant merchantID's payout
// wallet, merchantID in [1, 2^31).
func PayoutPath(merchantID int64) (string, error) {
	if merchantID < 1 || merchantID > int64(MaxIndex) {
		return "", fmt.Errorf("%w: merchant id %d (a payout wallet's index is the merchant id, in [1, 2^31))", ErrIndexOutOfRange, merchantID)
	}
	return PayoutAccountPath + "/" + strconv.FormatInt(merchantID, 10), nil
}

// PayoutKey returns the private key of merchant merchantID's payout wallet
// (PayoutPath).
func (w *Wallet) PayoutKey(merchantID int64) (*ecdsa.PrivateKey, error) {
	path, err := PayoutPath(merchantID)
	if err != nil {
		return nil, err
	}
	k, err := w.DerivePath(path)
	if err != nil {
		return nil, err
	}
	defer k.Wipe()
	return k.ECDSAPrivateKey()
}

// PayoutAddress returns merchant merchantID's payout wallet address.
func (w *Wallet) PayoutAddress(merchantID int64) (common.Address, error) {
	key, err := w.PayoutKey(merchantID)
	if err != nil {
		return common.Address{}, err
	}
	defer key.D.SetInt64(0)
	return crypto.PubkeyToAddress(key.PublicKey), nil
}

// SignPayoutTx signs tx with merchant merchantID's payout wallet key.
func (w *Wallet) SignPayoutTx(ctx context.Context, merchantID int64, tx *types.Transaction, signer types.Signer) (*types.Transaction, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key, err := w.PayoutKey(merchantID)
	if err != nil {
		return nil, err
	}
	defer key.D.SetInt64(0)
	signed, err := types.SignTx(tx, signer, key)
	if err != nil {
		return nil, fmt.Errorf("hdwallet: signing for payout wallet %d: %w", merchantID, err)
	}
	return signed, nil
}
