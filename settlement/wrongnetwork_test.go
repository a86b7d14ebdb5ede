package settlement

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/sweep"
)

// Wrong-network payments over real EVMs: two simulated chains, 1337 and
// 1338, each indexed by its own indexer into one PostgreSQL database and
// settled by its own Settler. A deposit address is the same on every
// chain, so chain 1337 can pay the address of an invoice of chain 1338.

// twoChains is chain 1337 and chain 1338 on one database, each with its
// indexer running, and a fixture (invoices, clock) per chain sharing the
// merchant and the clock.
type twoChains struct {
	a, b *chainEnv // 1337, 1338
}

func newTwoChains(t *testing.T) *twoChains {
	t.Parallel()
	db := pgtest.New(t)
	env := func(c *simChain, f *fixture) *chainEnv {
		runIndexer(t, c, f.st)
		return &chainEnv{fixture: f, c: c}
	}
	fa := newFixture(t, db.Chain(1337))
	fb := &fixture{t: t, st: db.Chain(1338), clock: fa.clock, merchant: fa.merchant}
	return &twoChains{a: env(newSimChainID(t, 1337), fa), b: env(newSimChainID(t, 1338), fb)}
}

// onB is an invoice of chain 1338.
func onB(inv *store.Invoice) { inv.ChainID = 1338 }

// reconcile compares chain e's ledger with its balances at its head, as
// the operator's reconciliation does (the ledger's follower is placed at
// the head: every movement up to it is in the ledger).
func (e *chainEnv) reconcile() sweep.Reconciliation {
	e.t.Helper()
	head := e.c.head()
	require.NoError(e.t, e.st.SetCursor(ctx, store.Cursor{Name: sweep.LedgerCursor, BlockNumber: head.NumberU64(),
		BlockHash: head.Hash(), UpdatedAt: e.clock.Now()}))
	r, err := sweep.NewReconciler(e.st, e.c.client, sweep.ReconcileConfig{})
	require.NoError(e.t, err)
	rec, err := r.Reconcile(ctx, 0)
	require.NoError(e.t, err)
	return rec
}

func balanceOf(rec sweep.Reconciliation, addr common.Address) (sweep.WalletBalance, bool) {
	for _, w := range rec.Wallets {
		if common.Address(w.Address) == addr && w.Token == nil {
			return w, true
		}
	}
	return sweep.WalletBalance{}, false
}

// Chain 1337 pays the deposit address of chain 1338's invoice: chain
// 1337's settlement records it there as a wrong-network payment — never
// credited, the invoice flagged, invoice.wrong_network emitted once with
// the payment and its chain — and chain 1337's ledger holds the deposit,
// so its reconciliation sees the money at the address and balances to the
// wei. The same address paid on chain 1338 still credits the invoice, and
// its confirmations wait for chain 1338's blocks only: the wrong-network
// payment, higher on chain 1337, holds nothing back.
func TestChain_WrongNetwork_RecordedFlaggedAndInTheLedgerOfItsChain(t *testing.T) {
	e := newTwoChains(t)
	inv := e.b.invoice(eth(1000), onB)
	sa, sb := e.a.settler(), e.b.settler()

	e.a.c.commit(20) // chain 1337's blocks are higher than chain 1338's
	wrongTx := e.a.c.pay(inv.DepositAddress, eth(700))
	e.a.c.commit(1)
	wrongIn := e.a.c.head()
	e.a.mustSettle(sa)

	got := e.a.get(inv.ID)
	require.Equal(t, store.StatusPending, got.Status, "not credited")
	require.True(t, got.PaidWei.IsZero())
	require.False(t, got.Underpaid)
	require.True(t, got.NeedsAttention, "flagged for the merchant")
	ps := e.a.payments(inv.ID)
	require.Len(t, ps, 1, "recorded, not lost")
	require.Equal(t, wrongTx, ps[0].TxHash)
	require.EqualValues(t, 1337, ps[0].ChainID, "on the chain it arrived on")
	require.True(t, ps[0].WrongNetwork)
	require.False(t, ps[0].WrongAsset)
	require.Equal(t, wrongIn.Hash(), ps[0].BlockHash)
	require.Equal(t, eth(700).String(), ps[0].AmountWei.String())
	require.Equal(t, []string{store.EventInvoiceWrongNetwork}, e.a.events(inv.ID))
	evs, err := e.a.st.ListEventsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	var data struct {
		Status   string `json:"status"`
		Payments []struct {
			TxHash       common.Hash `json:"tx_hash"`
			ChainID      uint64      `json:"chain_id"`
			WrongNetwork bool        `json:"wrong_network"`
			Amount       string      `json:"amount"`
		} `json:"wrong_network_payments"`
	}
	require.NoError(t, json.Unmarshal(evs[0].Data, &data))
	require.Equal(t, store.StatusPending, data.Status, "the invoice snapshot")
	require.Len(t, data.Payments, 1)
	require.Equal(t, wrongTx, data.Payments[0].TxHash)
	require.EqualValues(t, 1337, data.Payments[0].ChainID)
	require.True(t, data.Payments[0].WrongNetwork)
	require.Equal(t, eth(700).String(), data.Payments[0].Amount)

	e.a.c.commit(2)
	e.a.mustSettle(sa)
	require.Equal(t, []string{store.EventInvoiceWrongNetwork}, e.a.events(inv.ID), "emitted once")

	// Chain 1337's ledger: the deposit, on chain 1337, to the deposit
	// address; the reconciliation finds the money there to the wei.
	es, err := e.a.st.ScanLedgerEntries(ctx, store.LedgerScan{MaxBlock: wrongIn.NumberU64(), Limit: 100})
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, store.LedgerPayment, es[0].Kind)
	require.EqualValues(t, 1337, es[0].ChainID)
	require.Equal(t, ps[0].ID, *es[0].PaymentID)
	require.Equal(t, inv.DepositAddress, *es[0].To)
	require.Equal(t, eth(700).String(), es[0].Amount.String())
	rec := e.a.reconcile()
	require.True(t, rec.OK, "chain 1337's ledger reconciles: %+v", rec.Wallets)
	w, ok := balanceOf(rec, inv.DepositAddress)
	require.True(t, ok, "the deposit address is among chain 1337's wallets")
	require.Equal(t, "deposit", w.Role)
	require.Equal(t, eth(700).String(), w.Ledger)
	require.Equal(t, eth(700).String(), w.Chain)

	// Chain 1338 pays it: credited there, as always.
	rightTx := e.b.c.pay(inv.DepositAddress, eth(1000))
	e.b.c.commit(1)
	paidIn := e.b.c.head()
	e.b.mustSettle(sb)
	got = e.b.get(inv.ID)
	require.Equal(t, store.StatusPaid, got.Status)
	require.Equal(t, eth(1000).String(), got.PaidWei.String(), "the wrong-network 0.7 is not added")
	require.False(t, got.Overpaid)
	ps = e.b.payments(inv.ID)
	require.Len(t, ps, 2)
	for _, p := range ps {
		if p.TxHash == rightTx {
			require.EqualValues(t, 1338, p.ChainID)
			require.False(t, p.WrongNetwork)
		}
	}
	require.Less(t, paidIn.NumberU64(), wrongIn.NumberU64(), "the counted payment is below the wrong-network one")
	es, err = e.b.st.ScanLedgerEntries(ctx, store.LedgerScan{MaxBlock: 1000, Limit: 100})
	require.NoError(t, err)
	require.Len(t, es, 1, "chain 1338's ledger: its own payment only")
	require.EqualValues(t, 1338, es[0].ChainID)
	require.Equal(t, eth(1000).String(), es[0].Amount.String())
	rec = e.b.reconcile()
	require.True(t, rec.OK, "chain 1338's ledger reconciles: %+v", rec.Wallets)
	w, ok = balanceOf(rec, inv.DepositAddress)
	require.True(t, ok)
	require.Equal(t, eth(1000).String(), w.Chain)

	// Twelve blocks on chain 1338 confirm it; the wrong-network payment
	// in chain 1337's block 21 does not hold it back.
	e.b.c.commit(12)
	e.b.mustSettle(sb)
	got = e.b.get(inv.ID)
	require.Equal(t, store.StatusConfirmed, got.Status)
	require.Equal(t, store.SweepQueued, got.SweepStatus)
	require.Equal(t, []string{store.EventInvoiceWrongNetwork, store.EventInvoicePaid, store.EventInvoiceConfirmed}, e.b.events(inv.ID))
}

// A reorg of chain 1337 removes chain 1337's wrong-network payment only:
// chain 1338's payment of the invoice, in a block of the same number,
// stays, and the invoice — CONFIRMED, its sweep queued on chain 1338 —
// keeps its state (invoice.reverted says what happened). Chain 1337's
// ledger gets the reversal and still reconciles.
func TestChain_WrongNetwork_ReorgOfThatChainRemovesOnlyItsPayment(t *testing.T) {
	e := newTwoChains(t)
	inv := e.b.invoice(eth(1000), onB)
	sa, sb := e.a.settler(), e.b.settler()

	e.b.c.commit(2)
	e.b.c.pay(inv.DepositAddress, eth(1000))
	e.b.c.commit(1)
	k := e.b.c.head().NumberU64()
	e.b.c.commit(12)
	e.b.mustSettle(sb)
	require.Equal(t, store.StatusConfirmed, e.b.get(inv.ID).Status)

	e.a.c.commit(2)
	parent := e.a.c.head()
	n := e.a.c.nonce()
	e.a.c.send(n, &inv.DepositAddress, eth(300), 1)
	e.a.c.commit(1)
	require.Equal(t, k, e.a.c.head().NumberU64(), "the same block number on both chains")
	e.a.mustSettle(sa)
	require.Len(t, e.a.payments(inv.ID), 2)
	require.True(t, e.a.get(inv.ID).NeedsAttention)

	// Chain 1337 reorganises: the payment is replaced (same nonce, higher
	// fee) by one elsewhere.
	require.NoError(t, e.a.c.b.Fork(parent.Hash()))
	elsewhere := randAddr()
	require.Eventually(t, func() bool {
		_, err := e.a.c.trySend(n, &elsewhere, eth(1), 3)
		return err == nil
	}, eventually, 5*time.Millisecond)
	e.a.c.commit(3)
	e.a.mustSettle(sa)

	ps := e.a.payments(inv.ID)
	require.Len(t, ps, 1, "chain 1337's payment is gone")
	require.EqualValues(t, 1338, ps[0].ChainID, "chain 1338's payment stays")
	require.Equal(t, k, ps[0].BlockNumber)
	got := e.a.get(inv.ID)
	require.Equal(t, store.StatusConfirmed, got.Status, "its own chain's payments decide its state")
	require.Equal(t, store.SweepQueued, got.SweepStatus, "its sweep stays queued")
	require.Equal(t, eth(1000).String(), got.PaidWei.String())
	require.True(t, got.NeedsAttention, "the flag stays for an operator")
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed, store.EventInvoiceWrongNetwork,
		store.EventInvoiceReverted}, e.a.events(inv.ID))

	es, err := e.a.st.ScanLedgerEntries(ctx, store.LedgerScan{MaxBlock: 1000, Limit: 100})
	require.NoError(t, err)
	require.Len(t, es, 2, "chain 1337: the deposit and its reversal")
	require.NotNil(t, es[1].Reverses)
	rec := e.a.reconcile()
	require.True(t, rec.OK, "chain 1337's ledger reconciles after the reorg: %+v", rec.Wallets)
	w, ok := balanceOf(rec, inv.DepositAddress)
	require.True(t, ok)
	require.Equal(t, "0", w.Ledger)
	require.Equal(t, "0", w.Chain)
	es, err = e.b.st.ScanLedgerEntries(ctx, store.LedgerScan{MaxBlock: 1000, Limit: 100})
	require.NoError(t, err)
	require.Len(t, es, 1, "chain 1338's ledger untouched")
	require.Nil(t, es[0].Reverses)
}
