package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/sqlite"
	"github.com/evmpay/evmpay/store/sqlite/sqlitetest"
	"github.com/evmpay/evmpay/store/storetest"
)

func open(t *testing.T) *sqlite.Store {
	t.Helper()
	// Not t.TempDir: database/sql may still be opening a connection when
	// Close returns (its opener goroutine is not waited for), and that
	// connection can create the -wal or -shm file again while the
	// directory is being removed. Removal retries until it has settled.
	dir, err := os.MkdirTemp("", "evmpay-sqlite-")
	require.NoError(t, err)
	// A copy of a migrated database (the migrations have tests of their
	// own): migrating each of the suite's databases anew took minutes.
	path := filepath.Join(dir, "evmpay.db")
	require.NoError(t, sqlitetest.Write(path))
	st, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, st.Close())
		var err error
		for range 50 {
			if err = os.RemoveAll(dir); err == nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("remove %s: %v", dir, err)
	})
	return st
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
}

func TestOpen_Twice_MigratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evmpay.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Config{})
	require.NoError(t, err)
	var first []int
	require.NoError(t, st.DB().Select(&first, `SELECT version FROM schema_migrations ORDER BY version`))
	require.NoError(t, st.Close())
	files, err := filepath.Glob("migrations/*.sql")
	require.NoError(t, err)
	require.Len(t, first, len(files), "every migration file applied once")

	st, err = sqlite.Open(ctx, path, sqlite.Config{})
	require.NoError(t, err)
	defer st.Close()
	var again []int
	require.NoError(t, st.DB().Select(&again, `SELECT version FROM schema_migrations ORDER BY version`))
	require.Equal(t, first, again, "reopening applies nothing twice")
}

func openB(b *testing.B) *sqlite.Store {
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "evmpay.db"), sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func BenchmarkInsertInvoices(b *testing.B) { storetest.BenchmarkInsertInvoices(b, openB(b)) }

func BenchmarkInsertBlock(b *testing.B) { storetest.BenchmarkInsertBlock(b, openB(b)) }

// The archive keeps every column of invoices, in order, so that a later
// migration cannot silently drop data on archiving.
func TestSchema_InvoicesArchiveHasTheSameColumns(t *testing.T) {
	st := open(t)
	cols := func(table string) []string {
		var cs []string
		require.NoError(t, st.DB().Select(&cs, `SELECT name || ' ' || type FROM pragma_table_info(?) ORDER BY cid`, table))
		return cs
	}
	require.NotEmpty(t, cols("invoices"))
	require.Equal(t, cols("invoices"), cols("invoices_archive"))
}

// A path is a path, whatever its characters: SQLite's file: URI stops the
// path at '?' or '#' and decodes %XX, so unescaped, every directory below
// "a#1/" opened the same file "a" (found when two subtests of one name,
// "x" and "x#01", shared their data).
func TestOpen_PathWithURICharacters_OpensThatFile(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	for i, dir := range []string{"a#1", "a#2", "b?c", "d%41", "e f", "g&h=i", "j;k"} {
		path := filepath.Join(base, dir, "evmpay.db")
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
		db, err := sqlite.Open(ctx, path, sqlite.Config{})
		require.NoError(t, err, dir)
		st := db.Chain(1)
		_, err = st.LatestBlock(ctx)
		require.ErrorIs(t, err, store.ErrNotFound, "%s: a new database has no blocks", dir)
		require.NoError(t, st.InsertBlocks(ctx, []store.Block{{Number: uint64(i), Hash: common.Hash{byte(i + 1)},
			GasLimit: 1, Timestamp: 1, IndexedAt: time.Unix(1, 0)}}, nil))
		require.NoError(t, st.Close())
		_, err = os.Stat(path)
		require.NoError(t, err, "%s: the database is the file at the path given", dir)
	}
	entries, err := os.ReadDir(base)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"a#1", "a#2", "b?c", "d%41", "e f", "g&h=i", "j;k"}, names, "no file created beside them")
}
