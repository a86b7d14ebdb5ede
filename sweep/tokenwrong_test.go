package sweep

import (
	"context"
	"log/slog"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/store"
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

// ofToken keeps the transactions of one wrong token's sweep.
func ofToken(txs []store.SweepTx, tok *testtoken.Token) []store.SweepTx {
	var out []store.SweepTx
	for _, tx := range txs {
		if tx.WrongToken != nil && *tx.WrongToken == tok.Address {
			out = append(out, tx)
		}
	}
	return out
}

// A fund-path token paid to a native invoice: the deposit's own sweep used
// its nonce 0, so the token's transfer goes with nonce 1, after its own
// funding's receipt.
func TestWrongTokenSweep_TetherLikeAtNativeInvoice_SweptWithTheDepositsNextNonce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tether := e.deployToken(testtoken.Tether, 6)
	inv := e.confirmedInvoices(1, eth(1))[0]
	wrong := big.NewInt(3_000_007)
	e.payWrongToken(inv, tether, wrong)
	s := e.sweeper(Config{Confirmations: 2})

	e.drive(16, e.all([]int64{inv.ID}, store.SweepSwept), s)

	require.Equal(t, 0, e.tokenBalance(tether, e.merchant.SettlementAddress).Cmp(wrong), "the merchant holds all the wrong token")
	require.Zero(t, e.tokenBalance(tether, inv.DepositAddress).Sign())
	sweeps := e.sweepTxs(inv.ID, store.SweepTxSweep)
	require.Len(t, sweeps, 2)
	own, transfer := sweeps[0], sweeps[1]
	require.Nil(t, own.WrongToken)
	require.Zero(t, own.Nonce, "the invoice's own sweep first")
	require.Equal(t, &tether.Address, transfer.WrongToken)
	require.Equal(t, tether.Address, transfer.To)
	require.EqualValues(t, 1, transfer.Nonce, "the token's transfer: the deposit's next nonce")
	require.Equal(t, store.SweepTxMined, transfer.Status)
	require.EqualValues(t, 2, e.nonce(inv.DepositAddress))
	fundings := ofToken(e.sweepTxs(inv.ID, store.SweepTxFunding), tether)
	require.Len(t, fundings, 1, "one funding for the wrong token")
	require.Less(t, *fundings[0].BlockNumber, *transfer.BlockNumber, "the transfer followed the funding's receipt")
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(own.ValueWei.Big()), "the native sweep reached the merchant")

	got := e.invoice(inv.ID)
	require.Equal(t, store.StatusSettled, got.Status)
	require.Equal(t, own.TxHash, *got.SweepTxHash, "the invoice's own sweep stays its sweep")
	require.Equal(t, amountOf(eth(1)), *got.SweptWei)
	require.Equal(t, amountOf(e.balance(inv.DepositAddress)), *got.DustWei, "dust is what stays at the deposit")
}

// A token invoice whose own sweep goes the fund path (nonce 0), paid also
// with a second fund-path token (nonce 1) and the native coin (nonce 2):
// everything reaches the merchant, each exactly once.
func TestWrongTokenSweep_SecondFundPathTokenAndNativeAtTetherInvoice_AllSwept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	own := e.deployToken(testtoken.Tether, 6)
	other := e.deployToken(testtoken.Tether, 18)
	inv := e.confirmedTokenInvoices(own, 1, usdc6)[0]
	wrong := new(big.Int).Add(eth(5), big.NewInt(1)) // 5.000000000000000001 at 18 decimals
	e.payWrongToken(inv, other, wrong)
	e.pay([]common.Address{inv.DepositAddress}, eth(2))
	e.sim.Commit()
	require.NoError(t, e.st.InsertPayment(ctx, &store.Payment{
		InvoiceID: inv.ID, TxHash: randHash(), LogIndex: store.NativeLogIndex, BlockNumber: e.head(),
		BlockHash: randHash(), From: randAddr(), AmountWei: amountOf(eth(2)), CreatedAt: e.clock.Now(), WrongAsset: true,
	}))
	s := e.sweeper(Config{Confirmations: 2})

	e.drive(24, e.all([]int64{inv.ID}, store.SweepSwept), s)

	require.Equal(t, 0, e.tokenBalance(own, e.merchant.SettlementAddress).Cmp(usdc6), "the invoice's token")
	require.Equal(t, 0, e.tokenBalance(other, e.merchant.SettlementAddress).Cmp(wrong), "the second token, in full")
	require.Zero(t, e.tokenBalance(other, inv.DepositAddress).Sign())
	native := e.oneOf(inv.ID, store.SweepTxNative)
	require.Equal(t, store.SweepTxMined, native.Status)
	require.EqualValues(t, 2, native.Nonce)
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(native.ValueWei.Big()), "the native coin reached the merchant")
	require.EqualValues(t, 3, e.nonce(inv.DepositAddress), "three transactions from the deposit, none twice")
	for _, tx := range e.sweepTxs(inv.ID, store.SweepTxSweep) {
		require.Equal(t, store.SweepTxMined, tx.Status)
	}
	require.Len(t, ofToken(e.sweepTxs(inv.ID, store.SweepTxFunding), other), 1, "the second token's own funding")
	got := e.invoice(inv.ID)
	require.Equal(t, store.StatusSettled, got.Status)
	require.Equal(t, amountOf(usdc6), *got.SweptWei, "swept_wei is the invoice's own token")
	require.Equal(t, amountOf(e.balance(inv.DepositAddress)), *got.DustWei, "dust is what stays at the deposit")
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
	// At a native invoice, the wrong token's funding and transfer come
	// after the deposit's own sweep (its nonce 0) is mined.
	afterOwnSweep := func(e *env, inv store.Invoice) bool { return e.nonce(inv.DepositAddress) == 1 }
	steps := []step{
		{"stable-at-native/permit", testtoken.Stable, func(e *env, inv store.Invoice, w *testtoken.Token) func(*types.Transaction) bool {
			return func(tx *types.Transaction) bool { return permitCallOf(tx) != nil }
		}},
		{"stable-at-native/transferFrom", testtoken.Stable, func(e *env, inv store.Invoice, w *testtoken.Token) func(*types.Transaction) bool {
			return func(tx *types.Transaction) bool { return to(e, inv, w)(tx) && permitCallOf(tx) == nil }
		}},
		{"tether-at-native/funding", testtoken.Tether, func(e *env, inv store.Invoice, _ *testtoken.Token) func(*types.Transaction) bool {
			return func(tx *types.Transaction) bool {
				return tx.To() != nil && *tx.To() == inv.DepositAddress && afterOwnSweep(e, inv)
			}
		}},
		{"tether-at-native/transfer", testtoken.Tether, func(e *env, inv store.Invoice, w *testtoken.Token) func(*types.Transaction) bool {
			return func(tx *types.Transaction) bool { return sentBy(inv.DepositAddress)(tx) && to(e, inv, w)(tx) }
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
				atNative := st.wrong.Permit || strings.Contains(st.name, "-at-native/")
				if atNative {
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
				} else if atNative {
					require.Len(t, ofToken(e.sweepTxs(inv.ID, store.SweepTxFunding), wrong), 1, "one funding, never sent twice")
					transfer := ofToken(e.sweepTxs(inv.ID, store.SweepTxSweep), wrong)
					require.Len(t, transfer, 1, "one transfer")
					require.Equal(t, store.SweepTxMined, transfer[0].Status)
					require.EqualValues(t, 2, e.nonce(inv.DepositAddress), "the native sweep, then the token's transfer")
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

// A token that answers DOMAIN_SEPARATOR() and nonces(address) but reverts
// every permit is detected for what it is by simulating a permit: its
// sweeps — its own invoice's, and a wrong-asset payment of it — fund the
// deposit's gas, and the log says why.
func TestTokenPath_PermitLookalike_DetectedByASimulatedPermit_FundPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.deployToken(testtoken.PermitLookalike, 6)
	own := e.confirmedTokenInvoices(tok, 1, usdc6)[0]
	native := e.confirmedInvoices(1, eth(1))[0]
	wrong := big.NewInt(4_000_003)
	e.payWrongToken(native, tok, wrong)
	var logs syncLog
	s := e.sweeper(Config{Confirmations: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	e.drive(20, e.all([]int64{own.ID, native.ID}, store.SweepSwept), s)

	require.Equal(t, 0, e.tokenBalance(tok, e.merchant.SettlementAddress).Cmp(new(big.Int).Add(usdc6, wrong)),
		"the merchant holds the invoice's amount and the wrong-asset payment")
	for _, inv := range []store.Invoice{own, native} {
		require.Empty(t, e.sweepTxsTo(inv.ID, store.SweepTxPermit, tok), "no permit was ever signed into a transaction")
		require.Equal(t, store.StatusSettled, e.invoice(inv.ID).Status)
	}
	require.Contains(t, logs.String(), "a permit reverts in simulation")
	require.Contains(t, logs.String(), "permit not supported", "the token's own revert reason")
}
