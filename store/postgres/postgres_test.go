package postgres_test

import (
	"testing"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/store/storetest"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return pgtest.New(t) })
}

func BenchmarkInsertInvoices(b *testing.B) { storetest.BenchmarkInsertInvoices(b, pgtest.New(b)) }

func BenchmarkInsertBlock(b *testing.B) { storetest.BenchmarkInsertBlock(b, pgtest.New(b)) }

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
