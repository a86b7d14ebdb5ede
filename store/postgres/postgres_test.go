package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return pgtest.New(t) })
}

func BenchmarkInsertInvoices(b *testing.B) { storetest.BenchmarkInsertInvoices(b, pgtest.New(b)) }

func BenchmarkInsertBlock(b *testing.B) { storetest.BenchmarkInsertBlock(b, pgtest.New(b)) }

func BenchmarkInsertBlockThreeChains(b *testing.B) {
	storetest.BenchmarkInsertBlockThreeChains(b, pgtest.New(b))
}

// The archive keeps every column of invoices, in order, so that a later
// migration cannot silently drop data on archiving.
func TestSchema_InvoicesArchiveHasTheSameColumns(t *testing.T) {
	st := pgtest.New(t)
	cols := func(table string) []string {
		var cs []string
		require.NoError(t, st.DB().Select(&cs, `SELECT column_name || ' ' || data_type FROM information_schema.columns
			WHERE table_name = $1 ORDER BY ordinal_position`, table))
		return cs
	}
	require.NotEmpty(t, cols("invoices"))
	require.Equal(t, cols("invoices"), cols("invoices_archive"))
}

// Migration 0080 builds its index CONCURRENTLY, which PostgreSQL refuses
// inside a transaction: the migrator runs such a file (marked
// "-- evmpay:no-transaction") statement by statement outside one, records
// it, and does not run it again.
func TestMigrate_NoTransactionMigration_BuildsIndexConcurrentlyOnce(t *testing.T) {
	st := pgtest.New(t)
	var valid bool
	require.NoError(t, st.DB().Get(&valid, `SELECT i.indisvalid FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'invoices_merchant_status'`))
	require.True(t, valid, "the index was built and is valid")
	var n int
	require.NoError(t, st.DB().Get(&n, `SELECT COUNT(*) FROM schema_migrations WHERE version = 80`))
	require.Equal(t, 1, n, "recorded")

	require.NoError(t, st.Migrate(context.Background()), "a second Migrate is a no-op")
	require.NoError(t, st.DB().Get(&n, `SELECT COUNT(*) FROM schema_migrations WHERE version = 80`))
	require.Equal(t, 1, n)
}

// A no-transaction migration that failed half-way (here: its index left
// INVALID, as by a cancelled CREATE INDEX CONCURRENTLY, and its record
// missing) runs again from the top and ends valid.
func TestMigrate_NoTransactionMigrationInterrupted_RerunsToAValidIndex(t *testing.T) {
	st := pgtest.New(t)
	db := st.DB()
	_, err := db.Exec(`DELETE FROM schema_migrations WHERE version = 80`)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE pg_index SET indisvalid = FALSE WHERE indexrelid = 'invoices_merchant_status'::regclass`)
	require.NoError(t, err)

	require.NoError(t, st.Migrate(context.Background()))
	var valid bool
	require.NoError(t, db.Get(&valid, `SELECT i.indisvalid FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'invoices_merchant_status'`))
	require.True(t, valid)
}
