package settlement

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// These tests fill the database the way the indexer does (blocks and
// transactions through store.ChainStore) and run settlement rounds with
// Sync. The simulated-chain tests in chain_test.go run the same paths with
// the real indexer.

func TestSettle_ExactPayment_PaidThenConfirmedAfter12Blocks(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		s := f.settler()
		f.mine()
		b := f.mine(pay(inv.DepositAddress, eth(1000)))
		f.sync(s)

		got := f.get(inv.ID)
		require.Equal(t, store.StatusPaid, got.Status)
		require.Equal(t, eth(1000), got.PaidWei)
		require.False(t, got.Underpaid || got.Overpaid || got.PaidLate)
		require.NotNil(t, got.PaidAt)
		require.Equal(t, store.SweepNone, got.SweepStatus)
		ps := f.payments(inv.ID)
		require.Len(t, ps, 1)
		require.Equal(t, b.Number, ps[0].BlockNumber)
		require.Equal(t, b.Hash, ps[0].BlockHash)
		require.Equal(t, store.NativeLogIndex, ps[0].LogIndex)
		require.Equal(t, eth(1000), ps[0].AmountWei)
		require.False(t, ps[0].Late)
		typ, snap := f.lastEvent(inv.ID)
		require.Equal(t, store.EventInvoicePaid, typ)
		require.Equal(t, store.StatusPaid, snap.Status, "the event carries the invoice as changed")

		f.mineN(12)
		f.sync(s)
		got = f.get(inv.ID)
		require.Equal(t, store.StatusConfirmed, got.Status)
		require.Equal(t, store.SweepQueued, got.SweepStatus)
		require.NotNil(t, got.ConfirmedAt)
		require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed}, f.events(inv.ID))
		require.Equal(t, f.head.Number, f.cursor().BlockNumber)
		require.Equal(t, f.head.Hash, f.cursor().BlockHash)
	})
}

func TestSettle_ConfirmationBoundary_11NotEnough12Is(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		s := f.settler()
		b := f.mine(pay(inv.DepositAddress, eth(1000)))
		f.sync(s)
		require.Equal(t, store.StatusPaid, f.get(inv.ID).Status, "inclusion is 0 confirmations")
		for i := 1; i <= 11; i++ {
			f.mine()
			f.sync(s)
			require.Equal(t, store.StatusPaid, f.get(inv.ID).Status, "%d confirmations", f.head.Number-b.Number)
		}
		require.EqualValues(t, 11, f.head.Number-b.Number)
		f.mine()
		f.sync(s)
		require.EqualValues(t, 12, f.head.Number-b.Number)
		require.Equal(t, store.StatusConfirmed, f.get(inv.ID).Status, "12 confirmations")
	})
}

func TestSettle_ConfirmationsConfigurable(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	inv := f.invoice(eth(1000))
	s := f.settler(func(c *Config) { c.Confirmations = 2 })
	f.mine(pay(inv.DepositAddress, eth(1000)))
	f.mine()
	f.sync(s)
	require.Equal(t, store.StatusPaid, f.get(inv.ID).Status)
	f.mine()
	f.sync(s)
	require.Equal(t, store.StatusConfirmed, f.get(inv.ID).Status)
}

func TestSettle_TwoPartialPayments_UnderpaidThenPaid(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		s := f.settler()
		f.mine(pay(inv.DepositAddress, eth(400)))
		f.sync(s)
		got := f.get(inv.ID)
		require.Equal(t, store.StatusPending, got.Status)
		require.True(t, got.Underpaid)
		require.Equal(t, eth(400), got.PaidWei)
		require.Equal(t, []string{store.EventInvoiceUnderpaid}, f.events(inv.ID))

		f.mine(pay(inv.DepositAddress, eth(600)))
		f.sync(s)
		got = f.get(inv.ID)
		require.Equal(t, store.StatusPaid, got.Status)
		require.False(t, got.Underpaid)
		require.False(t, got.Overpaid)
		require.Equal(t, eth(1000), got.PaidWei)
		require.Len(t, f.payments(inv.ID), 2)
		require.Equal(t, []string{store.EventInvoiceUnderpaid, store.EventInvoicePaid}, f.events(inv.ID))

		// Confirmation waits for the later payment.
		f.mineN(11)
		f.sync(s)
		require.Equal(t, store.StatusPaid, f.get(inv.ID).Status)
		f.mine()
		f.sync(s)
		require.Equal(t, store.StatusConfirmed, f.get(inv.ID).Status)
	})
}

func TestSettle_TwoPaymentsInOneBlock_OneEvent(t *testing.T) {
	f := newFixture(t, pgStore(t))
	inv := f.invoice(eth(1000))
	s := f.settler()
	f.mine(pay(inv.DepositAddress, eth(300)), pay(inv.DepositAddress, eth(700)))
	f.sync(s)
	require.Equal(t, store.StatusPaid, f.get(inv.ID).Status)
	require.Len(t, f.payments(inv.ID), 2)
	require.Equal(t, []string{store.EventInvoicePaid}, f.events(inv.ID))
}

func TestSettle_Overpayment_PaidAndOverpaid(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		s := f.settler()
		f.mine(pay(inv.DepositAddress, eth(1500)))
		f.sync(s)
		got := f.get(inv.ID)
		require.Equal(t, store.StatusPaid, got.Status)
		require.True(t, got.Overpaid)
		require.Equal(t, eth(1500), got.PaidWei)
		require.Equal(t, []string{store.EventInvoicePaid}, f.events(inv.ID))

		// More money while PAID: overpaid event, confirmation waits for it.
		f.mineN(5)
		f.mine(pay(inv.DepositAddress, eth(1)))
		f.sync(s)
		require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceOverpaid}, f.events(inv.ID))
		f.mineN(8)
		f.sync(s)
		require.Equal(t, store.StatusPaid, f.get(inv.ID).Status, "the first payment alone is deep enough, not the second")
		f.mineN(4)
		f.sync(s)
		require.Equal(t, store.StatusConfirmed, f.get(inv.ID).Status)
	})
}

func TestSettle_Expiry_UnpaidPendingExpires(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		unpaid := f.invoice(eth(1000))
		partial := f.invoice(eth(1000))
		s := f.settler()
		f.mine(pay(partial.DepositAddress, eth(1)))
		f.sync(s)
		f.clock.Advance(15*time.Minute - time.Microsecond)
		f.sync(s)
		require.Equal(t, store.StatusPending, f.get(unpaid.ID).Status)

		f.clock.Advance(time.Microsecond)
		f.sync(s)
		require.Equal(t, store.StatusExpired, f.get(unpaid.ID).Status)
		require.Equal(t, []string{store.EventInvoiceExpired}, f.events(unpaid.ID))
		got := f.get(partial.ID)
		require.Equal(t, store.StatusExpired, got.Status)
		require.True(t, got.Underpaid, "what it holds stays visible")
		require.Equal(t, []string{store.EventInvoiceUnderpaid, store.EventInvoiceExpired}, f.events(partial.ID))

		f.sync(s)
		require.Len(t, f.events(unpaid.ID), 1, "expired once")
	})
}

func TestSettle_ExpiryWaitsUntilSettlementCaughtUp(t *testing.T) {
	f := newFixture(t, pgStore(t))
	inv := f.invoice(eth(1000))
	failAt := uint64(2)
	s := f.settler(func(c *Config) {
		c.afterStep = func(step string) error {
			if step == "block.cursor" && f.head.Number >= failAt {
				if c, err := f.st.GetCursor(ctx, store.CursorSettlement); err == nil && c.BlockNumber+1 == failAt {
					return errInjected
				}
			}
			return nil
		}
	})
	f.mine()
	f.mine()
	f.mine(pay(inv.DepositAddress, eth(1000))) // block 2, indexed before expiry
	f.clock.Advance(time.Hour)
	require.Error(t, s.Sync(ctx), "settlement stalls at block 2")
	require.Equal(t, store.StatusPending, f.get(inv.ID).Status, "not expired while settlement lags")

	f.sync(f.settler())
	got := f.get(inv.ID)
	require.Equal(t, store.StatusPaid, got.Status, "paid in time, seen late")
	require.False(t, got.PaidLate)
}

func TestSettle_PaymentAfterExpiry_RecordedPaidLate(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		s := f.settler()
		f.mine()
		f.clock.Advance(16 * time.Minute)
		f.sync(s)
		require.Equal(t, store.StatusExpired, f.get(inv.ID).Status)

		f.mine(pay(inv.DepositAddress, eth(1000)))
		f.sync(s)
		got := f.get(inv.ID)
		require.Equal(t, store.StatusPaid, got.Status, "a late payment follows the normal path")
		require.True(t, got.PaidLate)
		ps := f.payments(inv.ID)
		require.Len(t, ps, 1)
		require.True(t, ps[0].Late)
		require.Equal(t, []string{store.EventInvoiceExpired, store.EventInvoicePaid}, f.events(inv.ID))

		f.mineN(12)
		f.sync(s)
		got = f.get(inv.ID)
		require.Equal(t, store.StatusConfirmed, got.Status)
		require.Equal(t, store.SweepQueued, got.SweepStatus)
		require.True(t, got.PaidLate)
	})
}

func TestSettle_PaymentBeyondLateWindow_RecordedAndFlagged(t *testing.T) {
	f := newFixture(t, pgStore(t))
	inv := f.invoice(eth(1000))
	s := f.settler(func(c *Config) { c.LateWindow = time.Hour })
	f.mine()
	f.clock.Advance(15*time.Minute + time.Hour + time.Second)
	f.sync(s)
	f.mine(pay(inv.DepositAddress, eth(1000)))
	f.sync(s)
	got := f.get(inv.ID)
	require.Equal(t, store.StatusExpired, got.Status)
	require.True(t, got.PaidLate)
	require.True(t, got.NeedsAttention)
	require.Equal(t, eth(1000), got.PaidWei)
	require.Len(t, f.payments(inv.ID), 1, "recorded, not lost")
	require.Equal(t, []string{store.EventInvoiceExpired, store.EventInvoiceLatePayment}, f.events(inv.ID))
	f.mineN(12)
	f.sync(s)
	require.Equal(t, store.StatusExpired, f.get(inv.ID).Status, "never confirmed nor swept")
}

func TestSettle_PaymentAfterConfirmation_RecordedAndFlagged(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		s := f.settler()
		f.mine(pay(inv.DepositAddress, eth(1000)))
		f.mineN(12)
		f.sync(s)
		require.Equal(t, store.StatusConfirmed, f.get(inv.ID).Status)

		f.mine(pay(inv.DepositAddress, eth(5)))
		f.sync(s)
		got := f.get(inv.ID)
		require.Equal(t, store.StatusConfirmed, got.Status)
		require.Equal(t, store.SweepQueued, got.SweepStatus, "the sweep is left alone")
		require.True(t, got.Overpaid)
		require.True(t, got.NeedsAttention)
		require.Equal(t, eth(1005), got.PaidWei)
		require.Len(t, f.payments(inv.ID), 2)
		require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed, store.EventInvoiceOverpaid},
			f.events(inv.ID))
	})
}

func TestSettle_ZeroValueAndUnrelatedTransactionsIgnored(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		other := f.invoice(eth(1000))
		s := f.settler()
		creation := pay(inv.DepositAddress, eth(1))
		creation.To = nil
		f.mine(
			pay(inv.DepositAddress, store.Amount{}), // zero value to the deposit address
			pay(randAddr(), eth(1000)),              // unrelated recipient
			creation,                                // contract creation
		)
		fromDeposit := pay(randAddr(), eth(1000))
		fromDeposit.From = other.DepositAddress // money leaving a deposit address is not a payment
		f.mine(fromDeposit)
		f.sync(s)
		for _, id := range []int64{inv.ID, other.ID} {
			got := f.get(id)
			require.Equal(t, store.StatusPending, got.Status)
			require.True(t, got.PaidWei.IsZero())
			require.Empty(t, f.payments(id))
			require.Empty(t, f.events(id))
		}
		require.Equal(t, f.head.Number, f.cursor().BlockNumber)
	})
}

func TestSettle_StartsAtEarliestIndexedBlock(t *testing.T) {
	f := newFixture(t, pgStore(t))
	inv := f.invoice(eth(1000))
	f.head = store.Block{Number: 99, Hash: randHash()}
	f.hasHead = true
	first := f.mine(pay(inv.DepositAddress, eth(1000)))
	require.EqualValues(t, 100, first.Number)
	f.sync(f.settler())
	require.Equal(t, store.StatusPaid, f.get(inv.ID).Status)
	require.EqualValues(t, 100, f.cursor().BlockNumber)
}

func TestSettle_NothingIndexed_NoOp(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	f.sync(f.settler())
	_, err := f.st.GetCursor(ctx, store.CursorSettlement)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestSettle_SweepGasFundingToDepositAddress_NotAPayment(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		s := f.settler()
		f.mine(pay(inv.DepositAddress, eth(1000)))
		f.mineN(12)
		f.sync(s)
		require.Equal(t, store.StatusConfirmed, f.get(inv.ID).Status)

		// The sweep stores its funding before broadcasting it; the indexer
		// then sees it as a transfer to the deposit address.
		funding := pay(inv.DepositAddress, store.NewAmount(21000*2e9))
		funding.From = randAddr()
		rec := store.SweepTx{InvoiceID: &inv.ID, Kind: store.SweepTxFunding, From: funding.From,
			To: inv.DepositAddress, ValueWei: funding.ValueWei, GasLimit: 21000, MaxFeeWei: store.NewAmount(2e9),
			MaxPriorityFeeWei: store.NewAmount(1), TxHash: funding.Hash, RawTx: randBytes(100),
			Status: store.SweepTxSent, CreatedAt: f.clock.Now(), UpdatedAt: f.clock.Now()}
		require.NoError(t, f.st.CreateSweepTx(ctx, &rec))
		f.mine(funding)
		f.sync(s)
		got := f.get(inv.ID)
		require.False(t, got.Overpaid)
		require.False(t, got.NeedsAttention)
		require.Len(t, f.payments(inv.ID), 1)
		require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed}, f.events(inv.ID))
	})
}

// The confirmation pass reads only the payments of the blocks that reached
// depth since the last complete pass, as Run does it round after round;
// an invoice outside that argument (made PAID by another writer, with an
// old payment) waits for the next full pass: every fullConfirmEvery-th, or
// the first after the lock is taken (Sync).
func TestSettle_ConfirmPass_IncrementalBetweenFullPasses(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		s := f.settler()
		round := func() {
			t.Helper()
			require.NoError(t, s.sync(ctx, nil))
		}
		a, b := f.invoice(eth(1000)), f.invoice(eth(1000))
		f.mineN(13)
		round() // a full pass: every later one reads a block range
		f.mine(pay(a.DepositAddress, eth(1000)))
		round()
		f.mine(pay(b.DepositAddress, eth(1000)))
		for i := 0; i < 11; i++ {
			f.mine()
			round()
		}
		require.Equal(t, store.StatusConfirmed, f.get(a.ID).Status, "a's block reached depth")
		require.Equal(t, store.StatusPaid, f.get(b.ID).Status, "11 confirmations")
		f.mine()
		round()
		require.Equal(t, store.StatusConfirmed, f.get(b.ID).Status)

		// Another writer makes an invoice PAID with a payment deep in the
		// past: not in any block range the passes read.
		paidBehind := func(inv store.Invoice, block uint64) {
			t.Helper()
			require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
				p := store.Payment{InvoiceID: inv.ID, TxHash: randHash(), LogIndex: store.NativeLogIndex,
					BlockNumber: block, BlockHash: randHash(), From: randAddr(), AmountWei: eth(1000), CreatedAt: t0}
				if err := tx.InsertPayments(ctx, []store.Payment{p}); err != nil {
					return err
				}
				inv.Status, inv.PaidWei = store.StatusPaid, eth(1000)
				return tx.UpdateInvoiceStates(ctx, []*store.Invoice{&inv})
			}))
		}
		c := f.invoice(eth(1000))
		paidBehind(c, 1)
		passes := int(s.passes.Load() % fullConfirmEvery)
		for i := passes + 1; i < fullConfirmEvery; i++ {
			f.mine()
			round()
			require.Equal(t, store.StatusPaid, f.get(c.ID).Status, "incremental pass %d", i)
		}
		f.mine()
		round()
		require.Equal(t, store.StatusConfirmed, f.get(c.ID).Status, "the periodic full pass")

		// And Sync, which takes the lock, starts with a full pass.
		d := f.invoice(eth(1000))
		paidBehind(d, 2)
		f.mine()
		round()
		require.Equal(t, store.StatusPaid, f.get(d.ID).Status)
		f.sync(s)
		require.Equal(t, store.StatusConfirmed, f.get(d.ID).Status)
	})
}

// stepLog records the steps a Settler passes (Config.afterStep).
type stepLog struct {
	mu    sync.Mutex
	steps []string
}

func (l *stepLog) afterStep(step string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, step)
	return nil
}

func (l *stepLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.steps
	l.steps = nil
	return out
}

// The head block's transaction carries the confirmation pass: an invoice
// that reaches depth with a new block is confirmed in that block's
// transaction, with no transaction of its own; a full batch leaves the
// rest to a pass of its own, in the same round.
func TestSettle_ConfirmPass_InTheHeadBlocksTransaction(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		var log stepLog
		s := f.settler(func(c *Config) { c.afterStep = log.afterStep; c.BatchSize = 2 })
		a, b, c, d := f.invoice(eth(1000)), f.invoice(eth(1000)), f.invoice(eth(1000)), f.invoice(eth(1000))
		f.mine(pay(a.DepositAddress, eth(1000)))
		f.sync(s)
		f.mineN(11)
		f.sync(s)
		log.take()
		require.Equal(t, store.StatusPaid, f.get(a.ID).Status, "11 confirmations")

		fresh := f.invoice(eth(1000))
		f.mine(pay(fresh.DepositAddress, eth(1000))) // a's 12th confirmation
		f.sync(s)
		require.Equal(t, store.StatusConfirmed, f.get(a.ID).Status)
		require.Equal(t, store.StatusPaid, f.get(fresh.ID).Status)
		steps := log.take()
		require.Contains(t, steps, "block.commit")
		require.NotContains(t, steps, "confirm.commit", "no transaction of its own: %v", steps)

		// Three confirmable at once, batches of two: two in the block's
		// transaction, the third in a pass of its own.
		f.mine(pay(b.DepositAddress, eth(1000)), pay(c.DepositAddress, eth(1000)), pay(d.DepositAddress, eth(1000)))
		f.sync(s)
		f.mineN(11)
		f.sync(s)
		log.take()
		f.mine()
		f.sync(s)
		for _, inv := range []store.Invoice{b, c, d} {
			require.Equal(t, store.StatusConfirmed, f.get(inv.ID).Status)
		}
		require.Equal(t, 1, countOf(log.take(), "confirm.commit"))
		for _, inv := range []store.Invoice{a, b, c, d, fresh} {
			require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed}, f.events(inv.ID))
		}
	})
}

// A PAID invoice paid again in the very block that gives its first
// payment its 12th confirmation is a candidate of the pass that block's
// transaction runs, and is not confirmed: the new payment is not final.
func TestSettle_ConfirmPass_PaidAgainInTheConfirmingBlock_Waits(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		inv := f.invoice(eth(1000))
		s := f.settler()
		f.mine(pay(inv.DepositAddress, eth(1000)))
		f.sync(s)
		f.mineN(11)
		f.sync(s)
		f.mine(pay(inv.DepositAddress, eth(1)))
		f.sync(s)
		got := f.get(inv.ID)
		require.Equal(t, store.StatusPaid, got.Status)
		require.True(t, got.Overpaid)
		require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceOverpaid}, f.events(inv.ID))
		f.mineN(11)
		f.sync(s)
		require.Equal(t, store.StatusPaid, f.get(inv.ID).Status, "11 confirmations of the second payment")
		f.mine()
		f.sync(s)
		require.Equal(t, store.StatusConfirmed, f.get(inv.ID).Status)
		require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceOverpaid, store.EventInvoiceConfirmed},
			f.events(inv.ID))
	})
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// Under instant finality (a CometBFT chain: final at inclusion) a payment
// is confirmed in the pass that records it; with confirmations set too,
// the configuration is refused.
func TestSettle_InstantFinality_ConfirmedOnceIncluded(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	inv := f.invoice(eth(1000))
	s := f.settler(func(c *Config) { c.Finality = store.FinalityInstant })
	f.mine(pay(inv.DepositAddress, eth(1000)))
	f.sync(s)
	got := f.get(inv.ID)
	require.Equal(t, store.StatusConfirmed, got.Status, "no block on top needed")
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed}, f.events(inv.ID))

	_, err := New(f.st, Config{Finality: store.FinalityInstant, Confirmations: 3})
	require.ErrorContains(t, err, "takes no confirmations")
	_, err = New(f.st, Config{Finality: "finalized"})
	require.ErrorContains(t, err, `finality "finalized"`)
}

// Under tag finality a payment is confirmed once its block is at or below
// the finalized block the indexer recorded: not while none is recorded
// (however many blocks are on top), not while its block is above it.
func TestSettle_TagFinality_ConfirmedOnceAtOrBelowTheFinalizedBlock(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		f := newFixture(t, st)
		s := f.settler(func(c *Config) { c.Finality = store.FinalityTag })
		first := f.invoice(eth(1000))
		f.mineN(3)
		b1 := f.mine(pay(first.DepositAddress, eth(1000)))
		f.mineN(20) // under depth (12) this would be confirmed
		f.sync(s)
		require.Equal(t, store.StatusPaid, f.get(first.ID).Status, "no finalized block recorded")

		require.NoError(t, st.SetFinalizedBlock(ctx, b1.Number-1))
		f.sync(s)
		require.Equal(t, store.StatusPaid, f.get(first.ID).Status, "its block is above the finalized block")

		require.NoError(t, st.SetFinalizedBlock(ctx, b1.Number))
		f.sync(s)
		require.Equal(t, store.StatusConfirmed, f.get(first.ID).Status, "its block is the finalized block")
		require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed}, f.events(first.ID))

		// A later payment (the pass after a complete one reads only the
		// newer blocks' payments) waits for the finalized block too.
		second := f.invoice(eth(500))
		b2 := f.mine(pay(second.DepositAddress, eth(500)))
		f.mineN(2)
		f.sync(s)
		require.Equal(t, store.StatusPaid, f.get(second.ID).Status)
		require.NoError(t, st.SetFinalizedBlock(ctx, b2.Number+1))
		f.sync(s)
		require.Equal(t, store.StatusConfirmed, f.get(second.ID).Status, "its block is below the finalized block")

		_, err := New(st, Config{Finality: store.FinalityTag, Confirmations: 12})
		require.ErrorContains(t, err, "takes no confirmations")
	})
}
