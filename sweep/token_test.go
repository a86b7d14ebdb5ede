package sweep

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/store"
)

// amounts with every base unit significant, at 6 and 18 decimals.
var (
	usdc6      = big.NewInt(12_345_678)                               // 12.345678
	token18, _ = new(big.Int).SetString("1234567890123456789012", 10) // 1234.567890123456789012
)

func TestTokenSweep_Permit_MerchantHoldsExactAmountAndDepositNeverGetsNativeCoin(t *testing.T) {
	t.Parallel()
	for _, decimals := range []uint8{6, 18} {
		t.Run(fmt.Sprint(decimals), func(t *testing.T) {
			t.Parallel()
			amount := usdc6
			if decimals == 18 {
				amount = token18
			}
			e := newEnv(t)
			tok := e.deployToken(testtoken.Stable, decimals)
			inv := e.confirmedTokenInvoices(tok, 1, amount)[0]
			var logs syncLog
			s := e.sweeper(Config{Confirmations: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			confirmedAt := e.head()

			e.drive(10, e.all([]int64{inv.ID}, store.SweepSwept), s)

			require.Equal(t, 0, e.tokenBalance(tok, e.merchant.SettlementAddress).Cmp(amount), "the merchant holds exactly the invoice amount")
			require.Zero(t, e.tokenBalance(tok, inv.DepositAddress).Sign())
			require.Zero(t, e.balance(inv.DepositAddress).Sign(), "no native coin ever went to the deposit address")
			require.Zero(t, e.nonce(inv.DepositAddress), "the deposit address never sent a transaction")
			require.Empty(t, e.sweepTxs(inv.ID, store.SweepTxFunding))
			permit, pull := e.oneOf(inv.ID, store.SweepTxPermit), e.oneOf(inv.ID, store.SweepTxPull)
			require.Equal(t, e.sweepWallet(), permit.From)
			require.Equal(t, permit.Nonce+1, pull.Nonce)
			require.Equal(t, confirmedAt+1, *permit.BlockNumber, "permit and transferFrom in the first block")
			require.Equal(t, confirmedAt+1, *pull.BlockNumber)

			got := e.invoice(inv.ID)
			require.Equal(t, store.StatusSettled, got.Status)
			require.Equal(t, amountOf(amount), *got.SweptWei, "swept in base units")
			require.True(t, got.DustWei.IsZero(), "no dust")
			require.Equal(t, pull.TxHash, *got.SweepTxHash)
			require.Equal(t, []string{store.EventInvoiceSettled}, e.events(inv.ID))
			require.Contains(t, logs.String(), "swept="+amount.String()+" ", "the operator's log says what reached the merchant, in the token")

			ws, err := s.WalletStatus(ctx)
			require.NoError(t, err)
			spend := new(big.Int).Add(permit.FeeWei.Big(), pull.FeeWei.Big())
			require.Equal(t, amountOf(spend), ws.GasSpend24hWei, "the permit path's gas counts toward the wallet's 24 h spend")
		})
	}
}

func TestTokenSweep_Fund_USDTShaped_FundingReceiptBeforeTransferAndExactAmount(t *testing.T) {
	t.Parallel()
	for _, decimals := range []uint8{6, 18} {
		t.Run(fmt.Sprint(decimals), func(t *testing.T) {
			t.Parallel()
			amount := usdc6
			if decimals == 18 {
				amount = token18
			}
			e := newEnv(t)
			tok := e.deployToken(testtoken.Tether, decimals)
			invs := e.confirmedTokenInvoices(tok, 2, amount)
			watch := &receiptWatch{Chain: e.client, st: e.st, deposits: map[common.Address]int64{}}
			for _, inv := range invs {
				watch.deposits[inv.DepositAddress] = inv.ID
			}
			s := e.sweeperOn(watch, Config{Confirmations: 2})
			confirmedAt := e.head()
			est, err := e.client.EstimateGas(ctx, ethereum.CallMsg{From: invs[0].DepositAddress, To: &tok.Address,
				Data: packCall("transfer", e.merchant.SettlementAddress, amount)})
			require.NoError(t, err)

			e.drive(12, e.all(ids(invs), store.SweepSwept), s)

			require.EqualValues(t, 2, watch.depositTxs.Load())
			require.Zero(t, watch.early.Load(), "a token transfer was broadcast before its funding's receipt")
			require.Equal(t, 0, e.tokenBalance(tok, e.merchant.SettlementAddress).Cmp(new(big.Int).Mul(amount, big.NewInt(2))))
			var spend big.Int
			for _, inv := range invs {
				funding, sweep := e.oneOf(inv.ID, store.SweepTxFunding), e.oneOf(inv.ID, store.SweepTxSweep)
				require.Equal(t, confirmedAt+1, *funding.BlockNumber)
				require.Equal(t, confirmedAt+2, *sweep.BlockNumber)
				require.Equal(t, tok.Address, sweep.To)
				require.True(t, sweep.ValueWei.IsZero())
				require.Equal(t, 0, funding.ValueWei.Big().Cmp(gasCost(sweep.GasLimit, sweep.MaxFeeWei.Big())),
					"the funding is exactly the transfer's gas limit × fee cap")
				require.Less(t, *sweep.GasUsed, sweep.GasLimit)
				require.Equal(t, est+est/5, sweep.GasLimit, "gas limit = estimate + 20%")
				require.Equal(t, types.ReceiptStatusSuccessful, e.receipt(sweep.TxHash).Status)

				got := e.invoice(inv.ID)
				require.Equal(t, store.StatusSettled, got.Status)
				require.Equal(t, amountOf(amount), *got.SweptWei)
				dust := new(big.Int).Sub(funding.ValueWei.Big(), sweep.FeeWei.Big())
				require.Equal(t, amountOf(dust), *got.DustWei, "leftover native dust recorded per invoice")
				require.Equal(t, 0, e.balance(inv.DepositAddress).Cmp(dust))
				spend.Add(&spend, funding.ValueWei.Big())
				spend.Add(&spend, funding.FeeWei.Big())
			}
			ws, err := s.WalletStatus(ctx)
			require.NoError(t, err)
			require.Equal(t, amountOf(&spend), ws.GasSpend24hWei, "fundings and their fees count toward the wallet's 24 h spend")
		})
	}
}

func TestTokenSweep_PermitFrontRunByAnother_SweepStillSucceeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.deployToken(testtoken.Stable, 6)
	inv := e.confirmedTokenInvoices(tok, 1, usdc6)[0]
	fr := &frontRunner{Chain: e.client, key: e.payerKey}
	s := e.sweeperOn(fr, Config{Confirmations: 1})

	e.drive(6, e.all([]int64{inv.ID}, store.SweepSwept), s)

	require.NotNil(t, fr.rival.Load(), "someone else submitted the permit")
	require.Equal(t, types.ReceiptStatusSuccessful, e.receipt(*fr.rival.Load()).Status, "theirs went first")
	permit := e.oneOf(inv.ID, store.SweepTxPermit)
	require.Equal(t, types.ReceiptStatusFailed, e.receipt(permit.TxHash).Status, "the wallet's permit reverted (nonce used)")
	got := e.invoice(inv.ID)
	require.Equal(t, store.StatusSettled, got.Status)
	require.Empty(t, got.SweepError)
	require.Equal(t, 0, e.tokenBalance(tok, e.merchant.SettlementAddress).Cmp(usdc6))
}

func TestTokenSweep_TransferFromReverts_FailedWithTokenTransferFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.deployToken(testtoken.Stable, 6)
	inv := e.confirmedTokenInvoices(tok, 1, usdc6)[0]
	// The deposit key moves the tokens away in the block the sweep's
	// transactions land in, ahead of them: transferFrom reverts.
	e.pay([]common.Address{inv.DepositAddress}, eth(1))
	e.sim.Commit()
	s := e.sweeper(Config{Confirmations: 1})
	require.NoError(t, s.RunOnce(ctx))
	require.Len(t, e.sweepTxs(inv.ID, store.SweepTxPull), 1)
	thief := randAddr()
	key, err := e.wallet.PrivateKey(inv.DerivationIndex)
	require.NoError(t, err)
	opts := e.payerOpts()
	opts.From, opts.Signer = inv.DepositAddress, func(_ common.Address, tx *types.Transaction) (*types.Transaction, error) {
		return types.SignTx(tx, types.LatestSignerForChainID(big.NewInt(1337)), key)
	}
	opts.GasTipCap = big.NewInt(100 * params1Gwei)
	opts.GasLimit = 500_000
	_, err = tok.Transfer(opts, thief, usdc6)
	require.NoError(t, err)

	e.drive(6, e.all([]int64{inv.ID}, store.SweepFailed), s)

	got := e.invoice(inv.ID)
	require.Equal(t, ReasonTokenTransferFailed, got.SweepError)
	require.Equal(t, store.StatusConfirmed, got.Status)
	require.Equal(t, types.ReceiptStatusFailed, e.receipt(e.oneOf(inv.ID, store.SweepTxPull).TxHash).Status)
	require.Zero(t, e.tokenBalance(tok, e.merchant.SettlementAddress).Sign())
	require.Equal(t, []string{store.EventInvoiceSweepFailed}, e.events(inv.ID))
}

// TestTokenSweep_CrashAtEveryStep_NothingLostNothingSentTwice kills the
// process at each broadcast of each path — before the node gets the
// transaction (stored, never sent) and after (sent, never marked) — and
// lets a new process finish.
func TestTokenSweep_CrashAtEveryStep_NothingLostNothingSentTwice(t *testing.T) {
	t.Parallel()
	type step struct {
		path   string
		kind   testtoken.Kind
		match  func(e *env, inv store.Invoice) func(*types.Transaction) bool
		before bool
	}
	permitTx := func(e *env, _ store.Invoice) func(*types.Transaction) bool {
		return func(tx *types.Transaction) bool { return permitCallOf(tx) != nil }
	}
	pullTx := func(e *env, _ store.Invoice) func(*types.Transaction) bool {
		return func(tx *types.Transaction) bool {
			return len(tx.Data()) >= 4 && string(tx.Data()[:4]) == string(erc20.Methods["transferFrom"].ID)
		}
	}
	fundingTx := func(e *env, _ store.Invoice) func(*types.Transaction) bool { return sentBy(e.sweepWallet()) }
	transferTx := func(_ *env, inv store.Invoice) func(*types.Transaction) bool { return sentBy(inv.DepositAddress) }
	var steps []step
	for _, before := range []bool{true, false} {
		steps = append(steps,
			step{"permit/permit", testtoken.Stable, permitTx, before},
			step{"permit/transferFrom", testtoken.Stable, pullTx, before},
			step{"fund/funding", testtoken.Tether, fundingTx, before},
			step{"fund/transfer", testtoken.Tether, transferTx, before},
		)
	}
	for _, st := range steps {
		name := st.path + "/after-broadcast"
		if st.before {
			name = st.path + "/before-broadcast"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			tok := e.deployToken(st.kind, 6)
			inv := e.confirmedTokenInvoices(tok, 1, usdc6)[0]
			crashCtx, crash := context.WithCancel(ctx)
			defer crash()
			cc := &crashingChain{Chain: e.client, cancel: crash, before: st.before, match: st.match(e, inv)}
			s1 := e.sweeperOn(cc, Config{Confirmations: 2})
			for i := 0; i < 6 && !cc.crashed.Load(); i++ {
				err := s1.RunOnce(crashCtx)
				if cc.crashed.Load() {
					require.ErrorIs(t, err, context.Canceled)
					break
				}
				require.NoError(t, err)
				e.sim.Commit()
			}
			require.True(t, cc.crashed.Load(), "the crash point was reached")
			e.sim.Commit() // the node mines whatever it got

			// A new process, after the dead one's lease.
			e.clock.Advance(2 * time.Minute)
			s2 := e.sweeper(Config{Confirmations: 2})
			e.drive(10, e.all([]int64{inv.ID}, store.SweepSwept), s2)

			require.Equal(t, 0, e.tokenBalance(tok, e.merchant.SettlementAddress).Cmp(usdc6), "nothing lost")
			got := e.invoice(inv.ID)
			require.Equal(t, store.StatusSettled, got.Status)
			require.Equal(t, amountOf(usdc6), *got.SweptWei)
			if st.kind.Permit {
				require.Equal(t, store.SweepTxMined, e.oneOf(inv.ID, store.SweepTxPermit).Status, "one permit, never signed twice")
				require.Equal(t, store.SweepTxMined, e.oneOf(inv.ID, store.SweepTxPull).Status, "one transferFrom")
				require.Zero(t, e.balance(inv.DepositAddress).Sign())
			} else {
				require.Equal(t, store.SweepTxMined, e.oneOf(inv.ID, store.SweepTxFunding).Status, "one funding, never sent twice")
				require.Equal(t, store.SweepTxMined, e.oneOf(inv.ID, store.SweepTxSweep).Status, "one transfer")
				require.EqualValues(t, 1, e.nonce(inv.DepositAddress))
			}
		})
	}
}

func TestTokenSweep_WrongAssetNativeCoinAtTokenInvoice_SweptToTheMerchantToo(t *testing.T) {
	t.Parallel()
	for _, kind := range []testtoken.Kind{testtoken.Stable, testtoken.Tether} {
		t.Run(kind.Name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			tok := e.deployToken(kind, 6)
			inv := e.confirmedTokenInvoices(tok, 1, usdc6)[0]
			// The payer also sent the native coin by mistake; settlement
			// recorded it as a wrong-asset payment.
			e.pay([]common.Address{inv.DepositAddress}, eth(2))
			e.sim.Commit()
			require.NoError(t, e.st.InsertPayment(ctx, &store.Payment{
				InvoiceID: inv.ID, TxHash: randHash(), LogIndex: store.NativeLogIndex, BlockNumber: e.head(),
				BlockHash: randHash(), From: randAddr(), AmountWei: amountOf(eth(2)), CreatedAt: e.clock.Now(), WrongAsset: true,
			}))
			s := e.sweeper(Config{Confirmations: 2})

			e.drive(14, e.all([]int64{inv.ID}, store.SweepSwept), s)

			require.Equal(t, 0, e.tokenBalance(tok, e.merchant.SettlementAddress).Cmp(usdc6))
			native := e.oneOf(inv.ID, store.SweepTxNative)
			require.Equal(t, store.SweepTxMined, native.Status)
			require.Equal(t, e.merchant.SettlementAddress, native.To)
			require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(native.ValueWei.Big()), "the native coin reached the merchant")
			require.Positive(t, native.ValueWei.Big().Cmp(new(big.Int).Sub(eth(2), eth(1))), "all of it but its own gas")
			got := e.invoice(inv.ID)
			require.Equal(t, store.StatusSettled, got.Status)
			require.Equal(t, amountOf(usdc6), *got.SweptWei)
			require.Equal(t, amountOf(e.balance(inv.DepositAddress)), *got.DustWei, "dust is what stays at the deposit")
		})
	}
}

func TestTokenSweep_NoWrongAssetPayment_NoNativeSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.deployToken(testtoken.Tether, 6)
	inv := e.confirmedTokenInvoices(tok, 1, usdc6)[0]
	s := e.sweeper(Config{Confirmations: 1})
	e.drive(8, e.all([]int64{inv.ID}, store.SweepSwept), s)
	require.Empty(t, e.sweepTxs(inv.ID, store.SweepTxNative), "the funding's dust stays, recorded")
	require.Positive(t, e.invoice(inv.ID).DustWei.Big().Sign())
}

func TestTokenSweep_EmptySweepWallet_FailedWithInsufficientGas(t *testing.T) {
	t.Parallel()
	for _, kind := range []testtoken.Kind{testtoken.Stable, testtoken.Tether} {
		t.Run(kind.Name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, sweepWalletBalance(big0()))
			tok := e.deployToken(kind, 6)
			inv := e.confirmedTokenInvoices(tok, 1, usdc6)[0]
			s := e.sweeper(Config{Confirmations: 1})
			s.keys.Funder = nil // no top-up
			e.drive(3, e.all([]int64{inv.ID}, store.SweepFailed), s)
			got := e.invoice(inv.ID)
			require.Equal(t, ReasonInsufficientGas, got.SweepError)
			require.Equal(t, []string{store.EventInvoiceSweepFailed}, e.events(inv.ID))
			require.Zero(t, e.tokenBalance(tok, e.merchant.SettlementAddress).Sign())
		})
	}
}

// syncLog is a log destination the sweeper's goroutines may share.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
