package sqlitetest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/sqlite"
	"github.com/evmpay/evmpay/store/sqlite/sqlitetest"
)

// A copy is the database sqlite.Open makes: the same migrations applied,
// the same tables, and empty; and each test's copy is its own.
func TestNew_SameSchemaAsAFreshOpen_OwnFile(t *testing.T) {
	ctx := context.Background()
	fresh, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "fresh.db"), sqlite.Config{})
	require.NoError(t, err)
	defer fresh.Close()
	schema := func(st *sqlite.Store) (versions []int, tables []string) {
		require.NoError(t, st.DB().Select(&versions, `SELECT version FROM schema_migrations ORDER BY version`))
		require.NoError(t, st.DB().Select(&tables, `SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY name`))
		return versions, tables
	}
	wantV, wantT := schema(fresh)
	require.NotEmpty(t, wantV)

	a, b := sqlitetest.New(t), sqlitetest.New(t)
	gotV, gotT := schema(a)
	require.Equal(t, wantV, gotV)
	require.Equal(t, wantT, gotT)

	require.NoError(t, a.InsertBlocks(ctx, []store.Block{{Number: 0, Hash: common.Hash{1}, GasLimit: 1,
		Timestamp: 1, IndexedAt: time.Unix(1, 0)}}, nil))
	_, err = a.LatestBlock(ctx)
	require.NoError(t, err)
	_, err = b.LatestBlock(ctx)
	require.ErrorIs(t, err, store.ErrNotFound, "another test's database is not touched")
}
