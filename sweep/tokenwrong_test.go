package sweep

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/testtoken"
)

// payWrongToken mints amount of tok to the invoice's deposit address and
// records it as settlement does: a wrong-asset payment with the token.
func (e *env) payWrongToken(inv store.Invoice, tok *testtoken.Token, amount *big.Int) {
	e.t.Helper()
	_, err := tok.Mint(e.payerOpts(), inv.DepositAddress, amount)
	require.NoError(e.t, err)
	e.sim.Commit()
	require.Equal(e.t, 0, e.tokenBalance(tok, inv.DepositAddress).Cmp(amount))
	token := tok.Address
	require.NoError(e.t, e.st.InsertPayment(ctx, &store.Payment{
		InvoiceID: inv.ID, TxHash: randHash(), LogIndex: 0, BlockNumber: e.head(), BlockHash: randHash(),
		From: randAddr(), AmountWei: amountOf(amount), CreatedAt: e.clock.Now(), WrongAsset: true, Token: &token,
	}))
}

// sweepTxsTo returns the invoice's stored transactions of kind sent to to.
func (e *env) sweepTxsTo(invoiceID int64, kind string, tok *testtoken.Token) []store.SweepTx {
	e.t.Helper()
	var out []store.SweepTx
	for _, tx := range e.sweepTxs(invoiceID, kind) {
		if tx.To == tok.Address {
			out = append(out, tx)
		}
	}
	return out
}

func TestWrongTokenSweep_StableTokenAtNativeInvoice_SweptToTheMerchantWithTheNativeCoin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.deployToken(testtoken.Stable, 6)
	inv := e.confirmedInvoices(1, eth(1))[0]
	e.payWrongToken(inv, tok, usdc6)
	s := e.sweeper(Config{Confirmations: 2})

	e.drive(12, e.all([]int64{inv.ID}, store.SweepSwept), s)

	require.Equal(t, 0, e.tokenBalance(tok, e.merchant.SettlementAddress).Cmp(usdc6), "the merchant holds all the wrong token")
	require.Zero(t, e.tokenBalance(tok, inv.DepositAddress).Sign())
	sweep := e.oneOf(inv.ID, store.SweepTxSweep)
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(sweep.ValueWei.Big()), "the native sweep reached the merchant too")
	require.Len(t, e.sweepTxsTo(inv.ID, store.SweepTxPermit, tok), 1)
	pull := e.sweepTxsTo(inv.ID, store.SweepTxPull, tok)
	require.Len(t, pull, 1)
	require.Equal(t, store.SweepTxMined, pull[0].Status)
	got := e.invoice(inv.ID)
	require.Equal(t, store.StatusSettled, got.Status)
	require.Equal(t, sweep.TxHash, *got.SweepTxHash, "the invoice's own sweep is the native one")
}

func TestWrongTokenSweep_TetherLikeAtStableTokenInvoice_SweptToTheMerchant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stable := e.deployToken(testtoken.Stable, 6)
	tether := e.deployToken(testtoken.Tether, 6)
	inv := e.confirmedTokenInvoices(stable, 1, usdc6)[0]
	wrong := big.NewInt(7_000_001)
	e.payWrongToken(inv, tether, wrong)
	s := e.sweeper(Config{Confirmations: 2})

	e.drive(16, e.all([]int64{inv.ID}, store.SweepSwept), s)

	require.Equal(t, 0, e.tokenBalance(stable, e.merchant.SettlementAddress).Cmp(usdc6), "the invoice's token")
	require.Equal(t, 0, e.tokenBalance(tether, e.merchant.SettlementAddress).Cmp(wrong), "the wrong token, in full")
	require.Zero(t, e.tokenBalance(tether, inv.DepositAddress).Sign())
	require.Equal(t, store.SweepTxMined, e.oneOf(inv.ID, store.SweepTxFunding).Status, "one funding for the wrong token")
	transfer := e.oneOf(inv.ID, store.SweepTxSweep)
	require.Equal(t, tether.Address, transfer.To)
	require.EqualValues(t, 1, e.nonce(inv.DepositAddress))
	got := e.invoice(inv.ID)
	require.Equal(t, store.StatusSettled, got.Status)
	require.Equal(t, amountOf(usdc6), *got.SweptWei, "swept_wei is the invoice's own token")
}

func TestWrongTokenSweep_CrashAtEveryStep_NothingSentTwice(t *testing.T) {
	t.Parallel()
	type step struct {
		name  string
		wrong testtoken.Kind
		match func(e *env, inv store.Invoice, wrong *testtoken.Token) func(*types.Transaction) bool
	}
	to := func(e *env, inv store.Invoice, wrong *testtoken.Token) func(*types.Transaction) bool {
		return func(tx *types.Transaction) bool { return tx.To() != nil && *tx.To() == wrong.Address }
	}
	steps := []step{
		{"stable-at-native/permit", testtoken.Stable, func(e *env, inv store.Invoice, w *testtoken.Token) func(*types.Transaction) bool {
			return func(tx *types.Transaction) bool { return permitCallOf(tx) != nil }
		}},
		{"stable-at-native/transferFrom", testtoken.Stable, func(e *env, inv store.Invoice, w *testtoken.Token) func(*types.Transaction) bool {
			return func(tx *types.Transaction) bool { return to(e, inv, w)(tx) && permitCallOf(tx) == nil }
		}},
		{"tether-at-stable/funding", testtoken.Tether, func(e *env, inv store.Invoice, _ *testtoken.Token) func(*types.Transaction) bool {
			return func(tx *types.Transaction) bool { return tx.To() != nil && *tx.To() == inv.DepositAddress }
		}},
		{"tether-at-stable/transfer", testtoken.Tether, func(_ *env, inv store.Invoice, _ *testtoken.Token) func(*types.Transaction) bool {
			return sentBy(inv.DepositAddress)
		}},
	}
	for _, st := range steps {
		for _, before := range []bool{true, false} {
			name := st.name + "/after-broadcast"
			if before {
				name = st.name + "/before-broadcast"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t)
				wrong := e.deployToken(st.wrong, 6)
				var inv store.Invoice
				var own *testtoken.Token
				if st.wrong.Permit {
					inv = e.confirmedInvoices(1, eth(1))[0]
				} else {
					own = e.deployToken(testtoken.Stable, 6)
					inv = e.confirmedTokenInvoices(own, 1, usdc6)[0]
				}
				e.payWrongToken(inv, wrong, usdc6)
				crashCtx, crash := context.WithCancel(ctx)
				defer crash()
				cc := &crashingChain{Chain: e.client, cancel: crash, before: before, match: st.match(e, inv, wrong)}
				s1 := e.sweeperOn(cc, Config{Confirmations: 2})
				for i := 0; i < 12 && !cc.crashed.Load(); i++ {
					err := s1.RunOnce(crashCtx)
					if cc.crashed.Load() {
						require.ErrorIs(t, err, context.Canceled)
						break
					}
					require.NoError(t, err)
					e.sim.Commit()
				}
				require.True(t, cc.crashed.Load(), "the crash point was reached")
				e.sim.Commit()

				e.clock.Advance(2 * time.Minute)
				s2 := e.sweeper(Config{Confirmations: 2})
				e.drive(16, e.all([]int64{inv.ID}, store.SweepSwept), s2)

				require.Equal(t, 0, e.tokenBalance(wrong, e.merchant.SettlementAddress).Cmp(usdc6), "nothing lost")
				require.Equal(t, store.StatusSettled, e.invoice(inv.ID).Status)
				if st.wrong.Permit {
					require.Len(t, e.sweepTxsTo(inv.ID, store.SweepTxPermit, wrong), 1, "one permit, never signed twice")
					pull := e.sweepTxsTo(inv.ID, store.SweepTxPull, wrong)
					require.Len(t, pull, 1, "one transferFrom")
					require.Equal(t, store.SweepTxMined, pull[0].Status)
					require.EqualValues(t, 1, e.nonce(inv.DepositAddress), "the deposit sent only its native sweep")
				} else {
					require.Equal(t, 0, e.tokenBalance(own, e.merchant.SettlementAddress).Cmp(usdc6))
					require.Equal(t, store.SweepTxMined, e.oneOf(inv.ID, store.SweepTxFunding).Status, "one funding, never sent twice")
					require.Equal(t, store.SweepTxMined, e.oneOf(inv.ID, store.SweepTxSweep).Status, "one transfer")
					require.EqualValues(t, 1, e.nonce(inv.DepositAddress))
				}
			})
		}
	}
}
