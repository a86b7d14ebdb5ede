package sweep

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// TestRotation_OldKeysDrainedToTheNew: the sweep wallet and the gas funder
// are rotated while a funding of the old wallet is in flight. The new
// wallet takes over the new work; the old funder is drained to the new
// funder at once; the old wallet only once its funding is mined; the
// sweep in flight completes; both retired keys end drained.
func TestRotation_OldKeysDrainedToTheNew(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	old := e.sweeper(Config{Confirmations: 2})
	require.NoError(t, old.RunOnce(ctx))
	require.Equal(t, store.SweepFunding, e.invoice(inv.ID).SweepStatus, "the old wallet's funding is in flight")

	newWallet, err := crypto.GenerateKey()
	require.NoError(t, err)
	newFunder, err := crypto.GenerateKey()
	require.NoError(t, err)
	oldWallet, oldFunder := e.sweepWallet(), e.funder()
	walletBefore, funderBefore := e.balance(oldWallet), e.balance(oldFunder)
	keys := Keys{
		Deposits: e.wallet, Wallet: NewKeySigner(newWallet), Funder: NewKeySigner(newFunder),
		Retired: []Retired{
			{Key: NewKeySigner(e.sweepKey), To: crypto.PubkeyToAddress(newWallet.PublicKey)},
			{Key: NewKeySigner(e.funderKey), To: crypto.PubkeyToAddress(newFunder.PublicKey)},
		},
	}
	s, err := New(e.st, e.client, keys, Config{Confirmations: 2, Now: e.clock.Now})
	require.NoError(t, err)

	require.NoError(t, s.RunOnce(ctx))
	walletTxs, err := e.st.ListUnminedSweepTxs(ctx, oldWallet)
	require.NoError(t, err)
	require.Len(t, walletTxs, 1)
	require.Equal(t, store.SweepTxFunding, walletTxs[0].Kind, "the old wallet waits for its funding before it drains")
	funderTxs, err := e.st.ListUnminedSweepTxs(ctx, oldFunder)
	require.NoError(t, err)
	require.Len(t, funderTxs, 1, "the old funder, idle, drains at once")
	require.Equal(t, crypto.PubkeyToAddress(newFunder.PublicKey), funderTxs[0].To)

	drained := func() bool {
		st, err := s.RetiredStatus(ctx)
		require.NoError(t, err)
		return e.invoice(inv.ID).SweepStatus == store.SweepSwept && st[0].Drained && st[1].Drained
	}
	e.drive(20, drained, s)

	got := e.invoice(inv.ID)
	require.Equal(t, store.StatusSettled, got.Status)
	// What left the old keys reached the new ones, less the gas.
	newWalletBal, newFunderBal := e.balance(crypto.PubkeyToAddress(newWallet.PublicKey)), e.balance(crypto.PubkeyToAddress(newFunder.PublicKey))
	require.Positive(t, newWalletBal.Sign())
	require.Positive(t, newFunderBal.Sign())
	// (The new funder has since topped the new wallet up: 0.2 at most.)
	lost := new(big.Int).Sub(funderBefore, newFunderBal)
	require.True(t, lost.Sign() >= 0 && lost.Cmp(eth(1)) < 0, "funder: %s left %s, the new one got %s", oldFunder.Hex(), funderBefore, newFunderBal)
	require.True(t, newWalletBal.Cmp(new(big.Int).Sub(walletBefore, eth(1))) > 0, "the old wallet's balance, less its funding and gas, moved")
	st, err := s.RetiredStatus(ctx)
	require.NoError(t, err)
	for _, r := range st {
		require.True(t, r.Drained)
		require.Zero(t, r.InFlight)
	}
	// No new work was signed by a retired key after the rotation.
	all, err := e.st.ListSweepTxsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	for _, tx := range all {
		if tx.Kind == store.SweepTxFunding && tx.ID != walletTxs[0].ID {
			require.Equal(t, crypto.PubkeyToAddress(newWallet.PublicKey), tx.From)
		}
	}
}

// TestRotation_RetiredKeyStillInUse is refused per key, not silently.
func TestRotation_RetiredKeyStillInUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.keys()
	keys.Retired = []Retired{{Key: NewKeySigner(e.sweepKey), To: randAddr()}}
	s, err := New(e.st, e.client, keys, Config{Now: e.clock.Now})
	require.NoError(t, err)
	_, err = s.loadChainID(ctx)
	require.NoError(t, err)
	p, err := s.newPass(ctx)
	require.NoError(t, err)
	err = s.drainRetired(ctx, p)
	require.ErrorContains(t, err, "still the sweep wallet or the gas funder")
	require.ErrorContains(t, err, e.sweepWallet().Hex())
}

// TestRotation_StuckFundingOfTheRetiredWallet_ReplacedByItsOwnKey: the
// sweep wallet is rotated while its funding sits in the node's pool,
// underpriced, never mined. The replacement (same account, same nonce) is
// signed by the retired key — the new wallet could not sign for that
// account — and the sweep completes; the retired wallet then drains.
func TestRotation_StuckFundingOfTheRetiredWallet_ReplacedByItsOwnKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	old := e.sweeper(Config{Confirmations: 1, ReplaceAfterBlocks: 2})
	low := lowTip(e, old)
	low.Store(true)
	require.NoError(t, old.RunOnce(ctx))
	stuck := e.sweepTxs(inv.ID, store.SweepTxFunding)[0]
	require.Equal(t, e.sweepWallet(), stuck.From)

	newWallet, err := crypto.GenerateKey()
	require.NoError(t, err)
	keys := Keys{Deposits: e.wallet, Wallet: NewKeySigner(newWallet), Funder: NewKeySigner(e.funderKey),
		Retired: []Retired{{Key: NewKeySigner(e.sweepKey), To: crypto.PubkeyToAddress(newWallet.PublicKey)}}}
	s, err := New(e.st, e.client, keys, Config{Confirmations: 1, ReplaceAfterBlocks: 2, Now: e.clock.Now})
	require.NoError(t, err)

	e.drive(20, e.all([]int64{inv.ID}, store.SweepSwept), s)

	fs := e.sweepTxs(inv.ID, store.SweepTxFunding)
	require.GreaterOrEqual(t, len(fs), 2, "the stuck funding was replaced")
	require.Equal(t, store.SweepTxReplaced, fs[0].Status)
	require.Equal(t, stuck.Nonce, fs[1].Nonce, "same nonce")
	require.Equal(t, e.sweepWallet(), fs[1].From, "from the retired wallet's account, signed by its key")
	require.True(t, e.mined(fs[1]))
	require.Equal(t, store.StatusSettled, e.invoice(inv.ID).Status)
}
