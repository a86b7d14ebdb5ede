package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
)

// shop creates a merchant on st.
func shop(t *testing.T, st *postgres.Store, now time.Time) store.Merchant {
	t.Helper()
	m := store.Merchant{Name: "shop", APIKeyDigest: []byte("digest-migration-test-0000000000"), APIKeyHash: "x",
		APIKeyPrefix: "sk_test", WebhookSecretCiphertext: []byte("c"), SettlementAddress: common.Address{9},
		CreatedAt: now, UpdatedAt: now}
	require.NoError(t, st.CreateMerchant(context.Background(), &m))
	return m
}

// twoChainPayments returns a store on a database left at 0192 that
// already holds two chains (1337 and 10: two recorded identities), an
// invoice on each with a payment as the previous version wrote it (no
// chain on the payment), and an archived invoice of chain 10 with its
// payment. It returns the invoices' ids: 1337's, 10's, the archived one.
func twoChainPayments(t *testing.T) (*postgres.Store, [3]int64) {
	t.Helper()
	st := migratedTo(t, 192)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	m := shop(t, st, now)
	var ids [3]int64
	for i, c := range []struct {
		chain   uint64
		status  string
		created time.Time
	}{{1337, store.StatusPaid, now}, {10, store.StatusPaid, now}, {10, store.StatusSettled, now.Add(-400 * 24 * time.Hour)}} {
		h := st.Chain(c.chain)
		_, err := h.RecordChainIdentity(ctx, store.ChainIdentity{ChainID: c.chain, GenesisHash: common.Hash{byte(c.chain)}, RecordedAt: now})
		require.NoError(t, err)
		idx, err := h.NextDerivationIndex(ctx)
		require.NoError(t, err)
		inv := store.Invoice{MerchantID: m.ID, Status: c.status, AmountWei: store.NewAmount(100), PaidWei: store.NewAmount(100),
			ChainID: c.chain, DepositAddress: common.Address{byte(i + 1), 0xde}, DerivationIndex: idx, PaymentURI: "ethereum:x",
			LookupTokenHash: []byte{byte(i)}, ExpiresAt: now.Add(time.Hour), CreatedAt: c.created, UpdatedAt: now,
			SweepStatus: store.SweepNone}
		require.NoError(t, h.CreateInvoice(ctx, &inv))
		ids[i] = inv.ID
		// The previous version's payment row: no chain. The same
		// transaction hash for all three (one chain each, as far as the
		// old key knew: distinct log indexes).
		_, err = st.DB().Exec(`INSERT INTO payments (invoice_id, tx_hash, log_index, block_number, block_hash, from_address,
			amount_wei, late, created_at) VALUES ($1, $2, $3, 4, $4, $5, 100, false, now())`,
			inv.ID, common.Hash{0xaa}.Bytes(), i, common.Hash{0xbb}.Bytes(), common.Address{7}.Bytes())
		require.NoError(t, err)
	}
	moved, err := st.ArchiveInvoices(ctx, now.Add(-365*24*time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 1, moved, "the old SETTLED invoice is archived; its payment stays")
	return st, ids
}

// Migration 0193 on a database several chains share: every existing
// payment gets its invoice's chain (an archived invoice's too), is not a
// wrong-network payment, and the column has no default and no NULL; the
// key becomes (tx hash, log index, chain); the ledger trigger writes a new
// payment's entry on the payment's chain.
func TestMigrate0193_ExistingPayments_OnTheirInvoicesChain(t *testing.T) {
	ctx := context.Background()
	st, ids := twoChainPayments(t)
	require.NoError(t, st.Migrate(ctx))
	db := st.DB()

	var rows []struct {
		InvoiceID    int64 `db:"invoice_id"`
		ChainID      int64 `db:"chain_id"`
		WrongNetwork bool  `db:"wrong_network"`
	}
	require.NoError(t, db.Select(&rows, `SELECT invoice_id, chain_id, wrong_network FROM payments ORDER BY invoice_id`))
	require.Len(t, rows, 3)
	for i, want := range []int64{1337, 10, 10} {
		require.Equal(t, ids[i], rows[i].InvoiceID)
		require.Equal(t, want, rows[i].ChainID, "invoice %d's payment", ids[i])
		require.False(t, rows[i].WrongNetwork)
	}
	var col struct {
		Nullable string  `db:"is_nullable"`
		Default  *string `db:"column_default"`
	}
	require.NoError(t, db.Get(&col, `SELECT is_nullable, column_default FROM information_schema.columns
		WHERE table_name = 'payments' AND column_name = 'chain_id'`))
	require.Equal(t, "NO", col.Nullable)
	require.Nil(t, col.Default, "a writer must name the chain")
	var defs []string
	require.NoError(t, db.Select(&defs, `SELECT indexdef FROM pg_indexes WHERE tablename = 'payments' ORDER BY indexname`))
	joined := strings.Join(defs, "\n")
	require.Contains(t, joined, "UNIQUE INDEX payments_tx_log_chain ON public.payments USING btree (tx_hash, log_index, chain_id)")
	require.Contains(t, joined, "payments_chain_block ON public.payments USING btree (chain_id, block_number)")
	for _, d := range defs {
		require.False(t, strings.HasSuffix(d, "(tx_hash, log_index)"), "the key without the chain is gone: %s", d)
	}
	require.NotContains(t, joined, "payments_block ")
	var invalid, checks int
	require.NoError(t, db.Get(&invalid, `SELECT count(*) FROM pg_index WHERE NOT indisvalid`))
	require.Zero(t, invalid)
	require.NoError(t, db.Get(&checks, `SELECT count(*) FROM pg_constraint WHERE conname = 'payments_chain_id_set'`))
	require.Zero(t, checks, "the helper CHECK is dropped once NOT NULL holds")

	// Read back through the store: the payment's chain.
	ps, err := st.ListPaymentsByInvoice(ctx, ids[1])
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.EqualValues(t, 10, ps[0].ChainID)

	// The same transaction and log index on another chain is another
	// payment: chain 1337 pays chain 10's invoice (a wrong network), and
	// its ledger entry is chain 1337's.
	p := store.Payment{InvoiceID: ids[1], TxHash: common.Hash{0xaa}, LogIndex: 1, BlockNumber: 4, BlockHash: common.Hash{0xcc},
		From: common.Address{7}, AmountWei: store.NewAmount(3), CreatedAt: time.Now(), WrongNetwork: true}
	require.NoError(t, st.Chain(1337).InsertPayment(ctx, &p))
	dup := p
	dup.ID = 0
	require.ErrorIs(t, st.Chain(10).InsertPayment(ctx, &dup), store.ErrConflict, "chain 10 already has it")
	var chain int64
	require.NoError(t, db.Get(&chain, `SELECT chain_id FROM ledger_entries WHERE payment_id = $1`, p.ID))
	require.EqualValues(t, 1337, chain, "the entry is on the chain the payment arrived on")
}

// Interrupted (here: after every statement ran, the record removed), 0193
// runs again from the top and ends with the same schema and rows.
func TestMigrate0193_Interrupted_RerunsToTheSameSchema(t *testing.T) {
	ctx := context.Background()
	st, ids := twoChainPayments(t)
	require.NoError(t, st.Migrate(ctx))
	_, err := st.DB().Exec(`DELETE FROM schema_migrations WHERE version = 193`)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	var chains []int64
	require.NoError(t, st.DB().Select(&chains, `SELECT chain_id FROM payments ORDER BY invoice_id`))
	require.Equal(t, []int64{1337, 10, 10}, chains)
	var invalid int
	require.NoError(t, st.DB().Get(&invalid, `SELECT count(*) FROM pg_index WHERE NOT indisvalid`))
	require.Zero(t, invalid)
	ps, err := st.ListPaymentsByInvoice(ctx, ids[0])
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.EqualValues(t, 1337, ps[0].ChainID)
}

// A long transaction reading payments does not make 0193's ALTER a wall
// that queues settlement behind it: the ALTER gives up after its
// lock_timeout and tries again, a reader arriving meanwhile reads, and
// the migration completes once the long transaction ends.
func TestMigrate0193_LongTransaction_OthersKeepReadingAndMigrationWaits(t *testing.T) {
	st, _ := twoChainPayments(t)
	require.Equal(t, 3, migrateBehindALongReader(t, st, "payments"))
	var chains []int64
	require.NoError(t, st.DB().Select(&chains, `SELECT chain_id FROM payments ORDER BY invoice_id`))
	require.Equal(t, []int64{1337, 10, 10}, chains)
}
