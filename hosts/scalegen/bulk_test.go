package main

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// indexDefs are table's index definitions and the constraints they back.
func indexDefs(t *testing.T, db *sql.DB, table string) map[string]string {
	t.Helper()
	rows, err := db.Query(`SELECT i.indexname, i.indexdef || COALESCE(' / ' || c.contype::text, '')
		FROM pg_indexes i LEFT JOIN pg_constraint c ON c.conname = i.indexname AND c.conrelid = $1::text::regclass
		WHERE i.tablename = $1::text`, table)
	require.NoError(t, err)
	defer rows.Close()
	defs := map[string]string{}
	for rows.Next() {
		var name, def string
		require.NoError(t, rows.Scan(&name, &def))
		defs[name] = def
	}
	require.NoError(t, rows.Err())
	return defs
}

func txRow(r *rand.Rand, i int) []any {
	return []any{chainID, hash("tx", i), 1 + i/10, hash("block", 1+i/10), i % 10, hash("from", r.IntN(50))[:20],
		hash("to", r.IntN(50))[:20], "1000", i, 21000, 2, "1", "1", []byte{}}
}

var txCols = []string{"chain_id", "hash", "block_number", "block_hash", "tx_index", "from_address", "to_address", "value_wei",
	"nonce", "gas", "type", "max_fee_wei", "max_priority_fee_wei", "input"}

func TestWithoutIndexes_LoadsRowsAndBuildsTheSameIndexesAgain(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t).DB().DB
	before := indexDefs(t, db, "transactions")
	require.Contains(t, before, "transactions_pkey")

	var during map[string]string
	err := withoutIndexes(ctx, db, "transactions", func() error {
		during = indexDefs(t, db, "transactions")
		return copyParallel(ctx, db, "transactions", txCols, 250_123, 2, 7, txRow)
	})
	require.NoError(t, err)
	require.Empty(t, during, "the load ran with the indexes dropped")
	require.Equal(t, before, indexDefs(t, db, "transactions"))

	var n, distinct int
	require.NoError(t, db.QueryRow(`SELECT count(*), count(DISTINCT hash) FROM transactions`).Scan(&n, &distinct))
	require.Equal(t, 250_123, n)
	require.Equal(t, n, distinct, "every row once, whichever worker made its chunk")
	// The primary key is a constraint again: a duplicate is refused.
	_, err = db.Exec(`INSERT INTO transactions (chain_id, hash, block_number, block_hash, tx_index, from_address, value_wei,
		nonce, gas, type, input) SELECT chain_id, hash, block_number, block_hash, tx_index, from_address, value_wei, nonce,
		gas, type, input FROM transactions LIMIT 1`)
	require.ErrorContains(t, err, "transactions_pkey")
}

func TestWithoutIndexes_InterruptedLoad_NextRunBuildsThem(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t).DB().DB
	before := indexDefs(t, db, "invoices")

	boom := errors.New("interrupted")
	err := withoutIndexes(ctx, db, "invoices", func() error { return boom })
	require.ErrorIs(t, err, boom)
	// No foreign key points at invoices: every index went, the primary
	// key and the unique constraints included.
	require.Empty(t, indexDefs(t, db, "invoices"))

	require.NoError(t, restoreIndexes(ctx, db))
	require.Equal(t, before, indexDefs(t, db, "invoices"))
	var saved bool
	require.NoError(t, db.QueryRow(`SELECT to_regclass('scalegen_indexes') IS NOT NULL`).Scan(&saved))
	require.False(t, saved, "nothing left to build")
}

func TestWithoutIndexes_KeepsIndexesForeignKeysNeed(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t).DB().DB
	// webhook_deliveries.event_id references events (id).
	err := withoutIndexes(ctx, db, "events", func() error {
		require.Contains(t, indexDefs(t, db, "events"), "events_pkey")
		return nil
	})
	require.NoError(t, err)
}
