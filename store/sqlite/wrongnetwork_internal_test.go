package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/internal/sqlstore"
)

// Migration 0193 on SQLite: a database left at 0192 that two chains share
// (1337 and 10), with payments written without their chain — one of an
// invoice of each chain, one of an archived invoice, and one deleted by a
// reorg (its id must never come back: ledger entries name payments by
// id) — reopens with every payment on its invoice's chain, keyed by (tx
// hash, log index, chain), the ledger triggers writing on the payment's
// chain.
func TestMigrate0193_ExistingPayments_OnTheirInvoicesChain(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evmpay.db")
	db, err := sqlx.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_time_integer_format=unix_micro")
	require.NoError(t, err)
	// One connection: the raw statements below and the store's would
	// otherwise race for SQLite's write lock (SQLITE_BUSY, no busy
	// timeout on this handle).
	db.SetMaxOpenConns(1)
	old := sqlstore.New(db, dialect)
	ms, err := sqlstore.LoadMigrations(migrations, "migrations")
	require.NoError(t, err)
	n := 0
	for n < len(ms) && ms[n].Version <= 192 {
		n++
	}
	_, err = old.Migrate(ctx, ms[:n], "")
	require.NoError(t, err)

	now := time.Now().UTC().Truncate(time.Microsecond)
	m := store.Merchant{Name: "shop", APIKeyDigest: []byte("digest-wrongnet-migration-000000"), APIKeyHash: "x",
		APIKeyPrefix: "sk_test", WebhookSecretCiphertext: []byte("c"), SettlementAddress: common.Address{9},
		CreatedAt: now, UpdatedAt: now}
	require.NoError(t, old.CreateMerchant(ctx, &m))
	var ids []int64
	for i, c := range []struct {
		chain   uint64
		status  string
		created time.Time
	}{{1337, store.StatusPaid, now}, {10, store.StatusPaid, now}, {10, store.StatusSettled, now.Add(-400 * 24 * time.Hour)}} {
		h := sqlstore.OnChain(old, c.chain)
		_, err := db.Exec(`INSERT INTO chain_identity (chain_id, genesis_hash, recorded_at, genesis_number)
			VALUES (?, ?, ?, 0) ON CONFLICT DO NOTHING`, c.chain, common.Hash{byte(c.chain)}.Bytes(), now.UnixMicro())
		require.NoError(t, err)
		idx, err := h.NextDerivationIndex(ctx)
		require.NoError(t, err)
		inv := store.Invoice{MerchantID: m.ID, Status: c.status, AmountWei: store.NewAmount(100), PaidWei: store.NewAmount(100),
			ChainID: c.chain, DepositAddress: common.Address{byte(i + 1), 0xde}, DerivationIndex: idx, PaymentURI: "ethereum:x",
			LookupTokenHash: []byte{byte(i)}, ExpiresAt: now.Add(time.Hour), CreatedAt: c.created, UpdatedAt: now,
			SweepStatus: store.SweepNone}
		require.NoError(t, h.CreateInvoice(ctx, &inv))
		ids = append(ids, inv.ID)
	}
	insert := func(invoice int64, log int) {
		_, err := db.Exec(`INSERT INTO payments (invoice_id, tx_hash, log_index, block_number, block_hash, from_address,
			amount_wei, late, created_at) VALUES (?, ?, ?, 4, ?, ?, '100', 0, ?)`,
			invoice, common.Hash{0xaa}.Bytes(), log, common.Hash{0xbb}.Bytes(), common.Address{7}.Bytes(), now.UnixMicro())
		require.NoError(t, err)
	}
	for i, id := range ids {
		insert(id, i)
	}
	insert(ids[0], 9)
	var removed int64
	require.NoError(t, db.Get(&removed, `SELECT MAX(id) FROM payments`))
	_, err = db.Exec(`DELETE FROM payments WHERE id = ?`, removed) // a reorg
	require.NoError(t, err)
	moved, err := old.ArchiveInvoices(ctx, now.Add(-365*24*time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	require.NoError(t, db.Close())

	st, err := Open(ctx, path, Config{})
	require.NoError(t, err)
	defer st.Close()
	var chains []int64
	require.NoError(t, st.DB().Select(&chains, `SELECT chain_id FROM payments ORDER BY invoice_id`))
	require.Equal(t, []int64{1337, 10, 10}, chains, "each payment on its invoice's chain, the archived one's too")
	var wrong int
	require.NoError(t, st.DB().Get(&wrong, `SELECT count(*) FROM payments WHERE wrong_network`))
	require.Zero(t, wrong)

	// The same transaction and log index on another chain: another
	// payment; on the same chain: a conflict. Chain 1337 pays chain 10's
	// invoice (a wrong network): its ledger entry is chain 1337's, and
	// the deleted payment's id is not reused.
	p := store.Payment{InvoiceID: ids[1], TxHash: common.Hash{0xaa}, LogIndex: 1, BlockNumber: 4, BlockHash: common.Hash{0xcc},
		From: common.Address{7}, AmountWei: store.NewAmount(3), CreatedAt: now, WrongNetwork: true}
	require.NoError(t, st.Chain(1337).InsertPayment(ctx, &p))
	require.Greater(t, p.ID, removed, "the AUTOINCREMENT sequence survived the rebuild")
	dup := p
	dup.ID = 0
	require.ErrorIs(t, st.Chain(10).InsertPayment(ctx, &dup), store.ErrConflict)
	var chain int64
	require.NoError(t, st.DB().Get(&chain, `SELECT chain_id FROM ledger_entries WHERE payment_id = ? AND reverses IS NULL`, p.ID))
	require.EqualValues(t, 1337, chain)
	gone, err := st.Chain(1337).DeletePaymentsFromBlock(ctx, 4)
	require.NoError(t, err)
	require.Len(t, gone, 2, "chain 1337's payments: the migrated one and the wrong-network one")
	var reversals int
	require.NoError(t, st.DB().Get(&reversals, `SELECT count(*) FROM ledger_entries WHERE reverses IS NOT NULL AND chain_id = 1337`))
	require.Equal(t, 3, reversals, "the reorg before the migration's and these two, on chain 1337")
}
