package hdwallet_test

import (
	"context"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
)

// A payout wallet is account 2 of the mnemonic, index the merchant id:
// never a deposit address (account 0) nor the sweep wallet (account 1).
func TestPayoutWallet_OwnAccountNeverADepositOrTheSweepWallet(t *testing.T) {
	m, err := hdwallet.ParseMnemonic("test test test test test test test test test test test junk")
	require.NoError(t, err)
	w, err := hdwallet.NewWallet(m, "")
	require.NoError(t, err)
	path, err := hdwallet.PayoutPath(7)
	require.NoError(t, err)
	require.Equal(t, "m/44'/60'/2'/0/7", path)
	for _, bad := range []int64{0, -1, 1 << 31} {
		_, err := hdwallet.PayoutPath(bad)
		require.ErrorIs(t, err, hdwallet.ErrIndexOutOfRange)
	}

	k, err := w.DerivePath(path)
	require.NoError(t, err)
	want, err := k.ECDSAPrivateKey()
	require.NoError(t, err)
	addr, err := w.PayoutAddress(7)
	require.NoError(t, err)
	require.Equal(t, crypto.PubkeyToAddress(want.PublicKey), addr)

	sweep, err := w.SweepKey()
	require.NoError(t, err)
	require.NotEqual(t, crypto.PubkeyToAddress(sweep.PublicKey), addr)
	for _, id := range []int64{1, 7} {
		for _, idx := range []uint32{0, 1, 7} {
			dep, err := w.Address(idx)
			require.NoError(t, err)
			pa, err := w.PayoutAddress(id)
			require.NoError(t, err)
			require.NotEqual(t, dep, pa)
		}
	}
	other, err := w.PayoutAddress(8)
	require.NoError(t, err)
	require.NotEqual(t, addr, other, "one wallet per merchant")

	signer := types.LatestSignerForChainID(big.NewInt(1337))
	tx, err := w.SignPayoutTx(context.Background(), 7, types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(1337), Gas: 21000,
		GasFeeCap: big.NewInt(1), GasTipCap: big.NewInt(1), To: &addr}), signer)
	require.NoError(t, err)
	from, err := types.Sender(signer, tx)
	require.NoError(t, err)
	require.Equal(t, addr, from)
}
