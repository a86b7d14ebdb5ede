package evmpaytest_test

import (
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/webhook"
)

// A worker the test runs itself that dies makes the next wait fail at
// once with its error (issue #34: Sync polled on for two minutes while the
// indexer had stopped with a good error).
func TestGo_AWorkerThatDies_FailsTheWaitAtOnce(t *testing.T) {
	t.Parallel()
	rec := &recorder{TB: t}
	env := evmpaytest.New(rec, evmpaytest.Config{NoServices: true})
	died := errors.New("indexer: node is on another chain")
	env.Go("indexer", func(ctx context.Context) error { return died })
	start := time.Now()
	msg := rec.fails(func() {
		for {
			env.Sync() // nothing indexes: only the worker's error ends it
		}
	})
	require.Contains(t, msg, "the indexer worker stopped: indexer: node is on another chain")
	require.Less(t, time.Since(start), time.Minute, "long before the wait's own two-minute timeout")
	rec.mu.Lock()
	rec.failures = nil // the cleanup reports it once more: expected
	rec.mu.Unlock()
}

// Refunds through the Go API, waited for like invoices; the events they
// wrote and the webhooks that reached the merchant, asserted.
func TestKit_RefundWaitEventsAndCapturedWebhooks(t *testing.T) {
	t.Parallel()
	env := evmpaytest.New(t, evmpaytest.Config{Confirmations: 2, CaptureWebhooks: true})
	inv, err := env.Invoices.CreateInvoice(context.Background(), env.Owner, "k1", invoice.InvoiceParams{AmountFormatted: "0.3"})
	require.NoError(t, err)
	env.Chain.Pay(inv.PaymentURI)
	env.WaitInvoice(inv.ID, store.StatusConfirmed)
	env.RequireEvents(inv.ID, store.EventInvoicePaid, store.EventInvoiceConfirmed)
	// Swept first, the refund leaves from the merchant's payout wallet,
	// which the merchant funds (before the sweep, from the deposit).
	var wallet invoice.PayoutWallet
	require.Eventually(t, func() bool {
		wallet, err = env.Invoices.PayoutWallet(context.Background(), env.Merchant.ID)
		return err == nil
	}, time.Minute, 10*time.Millisecond, "the sweep role records the payout wallet")
	env.Chain.Transfer(env.Chain.Accounts()[1], nil, common.Address(wallet.Address), big.NewInt(2e17))
	dest := common.HexToAddress("0x00000000000000000000000000000000000c0ffe")
	ref, err := env.Invoices.CreateRefund(context.Background(), env.Owner, inv.ID, "r1",
		invoice.RefundParams{AmountFormatted: "0.1", Destination: &dest})
	require.NoError(t, err)
	got := env.WaitOutbound(ref.ID, store.OutboundConfirmed)
	require.NotNil(t, got.TxHash)
	require.Equal(t, "100000000000000000", env.Chain.Balance(nil, dest).String())
	env.RequireEvents(inv.ID, store.EventRefundCreated, store.EventRefundBroadcast, store.EventRefundConfirmed)
	p := env.Webhooks.Wait(store.EventRefundConfirmed, evmpaytest.About(ref.ID))
	require.Equal(t, webhook.EventID(env.Events(inv.ID, "refund.confirmed")[0].ID), p.ID, "the event, signed and verified")
	env.Webhooks.Wait(store.EventInvoiceConfirmed, evmpaytest.About(inv.ID))
	require.Zero(t, env.Webhooks.Bad())
}

// Fiat pricing in the kit: the Env's invoices may be priced in a
// currency with the Pricer given.
func TestKit_Pricer(t *testing.T) {
	t.Parallel()
	rates := map[pricing.Pair]store.Decimal{{Base: "ETH", Quote: "USD"}: store.MustParseDecimal("2500")}
	p, err := pricing.New([]pricing.Source{pricing.NewFixed("a", rates, nil), pricing.NewFixed("b", rates, nil)},
		pricing.Config{Assets: []string{"ETH"}, Currencies: []string{"USD"}})
	require.NoError(t, err)
	env := evmpaytest.New(t, evmpaytest.Config{Confirmations: 2, Pricer: p})
	inv, err := env.Invoices.CreateInvoice(context.Background(), env.Owner, "fiat", invoice.InvoiceParams{Price: &invoice.Price{Amount: "50.00", Currency: "USD"}})
	require.NoError(t, err)
	require.Equal(t, "20000000000000000", inv.Amount.String(), "50 USD at 2,500")
	env.Chain.Pay(inv.PaymentURI)
	env.WaitInvoice(inv.ID, store.StatusSettled)
}

// Reorg takes a payment back: the invoice returns to PENDING with its
// invoice.reverted event; a payment kept comes back in the new blocks.
func TestChain_Reorg_DropsAPaymentKeepsAnother(t *testing.T) {
	t.Parallel()
	env := evmpaytest.New(t, evmpaytest.Config{Confirmations: 6})
	ctx := context.Background()
	dropped, err := env.Invoices.CreateInvoice(ctx, env.Owner, "a", invoice.InvoiceParams{AmountFormatted: "0.2"})
	require.NoError(t, err)
	kept, err := env.Invoices.CreateInvoice(ctx, env.Owner, "b", invoice.InvoiceParams{AmountFormatted: "0.1"})
	require.NoError(t, err)
	env.Chain.Mine(3) // a reorg reaching block 1 is another chain (ErrChainChanged), not a reorg
	before := env.Chain.Head()
	gone := env.Chain.Pay(dropped.PaymentURI)
	stays := env.Chain.PayFrom(env.Chain.Accounts()[1], kept.PaymentURI)
	env.WaitInvoice(dropped.ID, store.StatusPaid)
	env.WaitInvoice(kept.ID, store.StatusPaid)

	head := env.Chain.Reorg(int(env.Chain.Head()-before), gone.TxHash)
	require.Greater(t, head, before)
	pending := env.WaitInvoice(dropped.ID, store.StatusPending)
	require.True(t, pending.PaidWei.IsZero(), "its payment is gone")
	env.RequireEvents(dropped.ID, store.EventInvoicePaid, store.EventInvoiceReverted)
	env.WaitInvoice(kept.ID, store.StatusConfirmed)
	_, err = env.Chain.Client().TransactionReceipt(ctx, stays.TxHash)
	require.NoError(t, err, "the payment not dropped was mined again")
}

// The chain runs outside a test too: a demo program starts it, pays on
// it and closes it.
func TestStartChain_OutsideATest(t *testing.T) {
	c, err := evmpaytest.StartChain(evmpaytest.ChainConfig{Accounts: 2})
	require.NoError(t, err)
	defer c.Close()
	to := common.HexToAddress("0x00000000000000000000000000000000000000d0")
	r := c.Pay("ethereum:" + to.Hex() + "@1337?value=7")
	require.Equal(t, uint64(1), r.Status)
	require.Equal(t, "7", c.Balance(nil, to).String())
	require.Panics(t, func() { c.Pay("ethereum:" + to.Hex() + "@1?value=7") }, "another chain's request: a failure panics outside a test")
}

// Config.Finality reaches every part: under tag finality the invoice is
// CONFIRMED only once the simulated chain's finalized block (every 32nd)
// covers the payment, and settles after the sweep is final too.
func TestKit_TagFinality(t *testing.T) {
	t.Parallel()
	env := evmpaytest.New(t, evmpaytest.Config{Finality: store.FinalityTag})
	inv := env.CreateInvoice(`{"amount_wei":"1000"}`)
	paidIn := env.Chain.Pay(inv.PaymentURI).BlockNumber.Uint64()
	env.WaitInvoice(inv.ID, store.StatusConfirmed)
	fin, ok, err := env.Store.FinalizedBlock(context.Background())
	require.NoError(t, err)
	require.True(t, ok && fin >= paidIn, "CONFIRMED with the payment in block %d, the finalized block %d (recorded: %v)", paidIn, fin, ok)
	require.Zero(t, fin%32, "the simulated chain finalizes every 32nd block")
	got := env.WaitInvoice(inv.ID, store.StatusSettled)
	require.Equal(t, store.SweepSwept, got.SweepStatus)
}

// Manual: nothing runs by itself; Step processes what the chain holds,
// synchronously — a payment is PAID the moment Step returns, CONFIRMED
// after the confirmations are mined and Step runs again — and the waits
// drive Step themselves.
func TestKit_Manual_StepProcessesTheChainNow(t *testing.T) {
	t.Parallel()
	env := evmpaytest.New(t, evmpaytest.Config{Manual: true, Confirmations: 3})
	inv := env.CreateInvoice(`{"amount_wei":"5000"}`)
	env.Chain.Pay(inv.PaymentURI)
	get := func() store.Invoice {
		got, err := env.Store.GetInvoice(context.Background(), inv.ID)
		require.NoError(t, err)
		return got
	}
	require.Equal(t, store.StatusPending, get().Status, "nothing runs by itself")
	env.Step()
	require.Equal(t, store.StatusPaid, get().Status, "PAID when Step returns")
	env.Chain.Mine(3)
	env.Step()
	require.Equal(t, store.StatusConfirmed, get().Status, "CONFIRMED when Step returns")
	got := env.WaitInvoice(inv.ID, store.StatusSettled)
	require.Equal(t, store.SweepSwept, got.SweepStatus)
	env.RequireEvents(inv.ID, "invoice.paid", "invoice.confirmed", "invoice.settled")
}
