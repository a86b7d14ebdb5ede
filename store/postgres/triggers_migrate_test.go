package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
)

// at0193 returns a store on a database left at 0193 (row-level ledger and
// roll-up triggers) with a merchant, one invoice, a payment and the
// invoice paid, written by those triggers.
func at0193(t *testing.T) (*postgres.Store, store.Invoice) {
	t.Helper()
	st := migratedTo(t, 193)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	m := shop(t, st, now)
	h := st.Chain(1337)
	idx, err := h.NextDerivationIndex(ctx)
	require.NoError(t, err)
	inv := store.Invoice{MerchantID: m.ID, Status: store.StatusPending, AmountWei: store.NewAmount(100),
		ChainID: 1337, DepositAddress: common.Address{1, 0xde}, DerivationIndex: idx, PaymentURI: "ethereum:x",
		LookupTokenHash: []byte{1}, ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now,
		SweepStatus: store.SweepNone}
	require.NoError(t, h.CreateInvoice(ctx, &inv))
	pay(t, h, inv, 1, 40)
	return st, inv
}

// pay records a payment of amount to inv (log index log) and adds it to
// the invoice's paid_wei, in one transaction as settlement does.
func pay(t *testing.T, h store.Store, inv store.Invoice, log int, amount uint64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, h.InTx(ctx, func(tx store.Tx) error {
		got, err := tx.GetInvoiceForUpdate(ctx, inv.ID)
		if err != nil {
			return err
		}
		p := store.Payment{InvoiceID: inv.ID, TxHash: common.Hash{0xaa, byte(log)}, LogIndex: log, BlockNumber: 4,
			BlockHash: common.Hash{0xbb}, From: common.Address{7}, AmountWei: store.NewAmount(amount),
			CreatedAt: time.Now().UTC(), ChainID: 1337}
		if err := tx.InsertPayments(ctx, []store.Payment{p}); err != nil {
			return err
		}
		got.PaidWei, _ = got.PaidWei.Add(store.NewAmount(amount))
		return tx.UpdateInvoiceStates(ctx, []*store.Invoice{&got})
	}))
}

// Migration 0194 swaps the ledger's and the daily roll-up's row triggers
// for statement triggers: afterwards exactly the new ones exist, and a
// payment made before and one made after each have one ledger entry and
// count once in the roll-up.
func TestMigrate0194_StatementTriggers_ReplaceTheRowTriggers(t *testing.T) {
	ctx := context.Background()
	st, inv := at0193(t)
	require.NoError(t, st.Migrate(ctx))
	var triggers []string
	require.NoError(t, st.DB().Select(&triggers, `SELECT tgname FROM pg_trigger
		WHERE tgrelid IN ('payments'::regclass, 'invoices'::regclass) AND NOT tgisinternal ORDER BY tgname`))
	require.Equal(t, []string{"invoice_daily_inserted", "invoice_daily_paid", "ledger_payment_reversed", "ledger_payments_credited"}, triggers)

	pay(t, st.Chain(1337), inv, 2, 60)
	var entries []string
	require.NoError(t, st.DB().Select(&entries, `SELECT amount::text FROM ledger_entries WHERE invoice_id = $1 ORDER BY id`, inv.ID))
	require.Equal(t, []string{"40", "60"}, entries, "one entry per payment, before and after")
	var invoices int64
	var paid string
	require.NoError(t, st.DB().QueryRow(`SELECT invoices, paid::text FROM invoice_daily WHERE merchant_id = $1`, inv.MerchantID).
		Scan(&invoices, &paid))
	require.EqualValues(t, 1, invoices)
	require.Equal(t, "100", paid)
}

// A long transaction reading payments: 0194's swap waits for it without
// queueing readers behind it, then completes.
func TestMigrate0194_LongTransaction_OthersKeepReadingAndMigrationWaits(t *testing.T) {
	st, _ := at0193(t)
	require.Equal(t, 1, migrateBehindALongReader(t, st, "payments"))
	var n int
	require.NoError(t, st.DB().Get(&n, `SELECT count(*) FROM pg_trigger WHERE tgname = 'ledger_payments_credited'`))
	require.Equal(t, 1, n)
}
