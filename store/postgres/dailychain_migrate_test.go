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

// at0194 returns a store on a database left at 0194 (the daily roll-up
// keyed without a chain) holding one merchant's invoices on two chains:
// today, chain 1337's native coin (paid 40) and USDC (paid 5) and chain
// 9000's native coin (paid 7); 400 days ago, a SETTLED invoice of chain
// 9000 (paid 3), archived. Both native coins sum into one roll-up row.
func at0194(t *testing.T) (*postgres.Store, store.Merchant, time.Time) {
	t.Helper()
	st := migratedTo(t, 194)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	m := shop(t, st, now)
	usdc := common.HexToAddress("0x00000000000000000000000000000000000000c0")
	for i, c := range []struct {
		chain   uint64
		token   *common.Address
		paid    uint64
		created time.Time
		status  string
	}{
		{1337, nil, 40, now, store.StatusPaid},
		{1337, &usdc, 5, now, store.StatusPaid},
		{9000, nil, 7, now, store.StatusPaid},
		{9000, nil, 3, now.AddDate(0, 0, -400), store.StatusSettled},
	} {
		h := st.Chain(c.chain)
		idx, err := h.NextDerivationIndex(ctx)
		require.NoError(t, err)
		inv := store.Invoice{MerchantID: m.ID, Status: store.StatusPending, AmountWei: store.NewAmount(100),
			ChainID: c.chain, TokenAddress: c.token, DepositAddress: common.Address{byte(i + 1), 0xde}, DerivationIndex: idx,
			PaymentURI: "ethereum:x", LookupTokenHash: []byte{byte(i)}, ExpiresAt: now.Add(time.Hour),
			CreatedAt: c.created, UpdatedAt: now, SweepStatus: store.SweepNone}
		require.NoError(t, h.CreateInvoice(ctx, &inv))
		inv.PaidWei, inv.Status = store.NewAmount(c.paid), c.status
		require.NoError(t, h.UpdateInvoice(ctx, &inv))
	}
	n, err := st.ArchiveInvoices(ctx, now.AddDate(0, 0, -1), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var native string
	require.NoError(t, st.DB().Get(&native, `SELECT paid::text FROM invoice_daily WHERE merchant_id = $1 AND token = '\x' AND day = $2::date`,
		m.ID, now.Format(time.DateOnly)))
	require.Equal(t, "47", native, "before 0195: the two chains' native coins in one row")
	return st, m, now
}

// dailyChainRows are InvoiceVolumes of merchant m over the 401 days up to
// now, as comparable rows.
func dailyChainRows(t *testing.T, st store.Store, m store.Merchant, now time.Time) []chainDaily {
	t.Helper()
	vs, err := st.InvoiceVolumes(context.Background(), m.ID, now.AddDate(0, 0, -400), now.AddDate(0, 0, 1))
	require.NoError(t, err)
	var out []chainDaily
	for _, v := range vs {
		r := chainDaily{v.Day.Format(time.DateOnly), v.ChainID, v.Token != nil, v.Invoices, v.Paid.String()}
		out = append(out, r)
	}
	return out
}

type chainDaily struct {
	day      string
	chain    uint64
	token    bool
	invoices int64
	paid     string
}

// Migration 0195 splits the rows summed so far by chain, to the wei,
// archived invoices included; run again from the top it changes nothing;
// afterwards a payment lands in its own chain's row.
func TestMigrate0195_RollUpPerChain_ExistingRowsSplitToTheWei(t *testing.T) {
	ctx := context.Background()
	st, m, now := at0194(t)
	require.NoError(t, st.Migrate(ctx))
	today, old := now.Format(time.DateOnly), now.AddDate(0, 0, -400).Format(time.DateOnly)
	want := []chainDaily{
		{old, 9000, false, 1, "3"},
		{today, 1337, false, 1, "40"},
		{today, 1337, true, 1, "5"},
		{today, 9000, false, 1, "7"},
	}
	require.Equal(t, want, dailyChainRows(t, st, m, now))
	var key string
	require.NoError(t, st.DB().Get(&key, `SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'invoice_daily_pkey'`))
	require.Equal(t, "PRIMARY KEY (merchant_id, day, chain_id, token)", key)

	// Interrupted after its last statement (the record removed): run
	// again from the top, it folds nothing twice.
	_, err := st.DB().Exec(`DELETE FROM schema_migrations WHERE version = 195`)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	require.Equal(t, want, dailyChainRows(t, st, m, now))
	var invalid int
	require.NoError(t, st.DB().Get(&invalid, `SELECT count(*) FROM pg_index WHERE NOT indisvalid`))
	require.Zero(t, invalid)

	// A later payment counts under its own chain.
	h := st.Chain(9000)
	var id int64
	require.NoError(t, st.DB().Get(&id, `SELECT id FROM invoices WHERE chain_id = 9000`))
	inv, err := h.GetInvoice(ctx, id)
	require.NoError(t, err)
	inv.PaidWei = store.NewAmount(10)
	require.NoError(t, h.UpdateInvoice(ctx, &inv))
	want[3].paid = "10"
	require.Equal(t, want, dailyChainRows(t, st, m, now))
}

// A long transaction reading the roll-up (the dashboard's overview): 0195
// waits for it to drop the old key, without queueing readers behind it.
func TestMigrate0195_LongTransaction_OthersKeepReadingAndMigrationWaits(t *testing.T) {
	st, m, now := at0194(t)
	require.Equal(t, 3, migrateBehindALongReader(t, st, "invoice_daily"))
	require.Len(t, dailyChainRows(t, st, m, now), 4)
}
