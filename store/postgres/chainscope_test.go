package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// migratedTo returns a store on a new database of its own, migrated up
// to and including version: a database the previous version left, for a
// migration's test to add rows to and then Migrate.
func migratedTo(t *testing.T, version int) *postgres.Store {
	t.Helper()
	st := emptyDatabase(t, 4)
	require.NoError(t, st.MigrateTo(context.Background(), version))
	return st
}

// emptyDatabase returns a store of at most conns connections on a new,
// empty database of its own.
func emptyDatabase(t *testing.T, conns int) *postgres.Store {
	t.Helper()
	u, drop, err := pgtest.NewDatabase(pgtest.AdminURL(t))
	require.NoError(t, err)
	t.Cleanup(drop)
	st, err := postgres.Open(context.Background(), u, postgres.Config{MaxOpenConns: conns})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// oneChainDatabase returns a store on an empty database migrated to 0180
// (before the index rows carried their chain), holding one chain's rows as
// the previous version wrote them: chain 262144's identity, two blocks
// with a transaction and a token transfer each, the indexer's and
// settlement's cursors, a checkpoint, a finalized block, a reorg.
func oneChainDatabase(t *testing.T) *postgres.Store {
	t.Helper()
	st := migratedTo(t, 180)
	h := func(b string) string { return `\x` + strings.Repeat("0", 64-len(b)) + b } // a 32-byte hash
	a := func(b string) string { return `\x` + strings.Repeat("0", 40-len(b)) + b } // an address
	for _, q := range []string{
		`INSERT INTO chain_identity (id, chain_id, genesis_hash, recorded_at, genesis_number) VALUES (1, 262144, '` + h("01") + `', now(), 0)`,
		`INSERT INTO blocks (number, hash, parent_hash, timestamp, miner, gas_limit, gas_used, tx_count, indexed_at)
			VALUES (1, '` + h("0b01") + `', '` + h("00") + `', 1700000000, '` + a("00") + `', 1, 1, 1, now()), (2, '` + h("0b02") + `', '` + h("0b01") + `', 1700000001, '` + a("00") + `', 1, 1, 1, now())`,
		`INSERT INTO transactions (hash, block_number, block_hash, tx_index, from_address, to_address, value_wei, nonce, gas, type, input)
			VALUES ('` + h("0a01") + `', 1, '` + h("0b01") + `', 0, '` + a("01") + `', '` + a("02") + `', 5, 0, 21000, 2, ''), ('` + h("0a02") + `', 2, '` + h("0b02") + `', 0, '` + a("01") + `', '` + a("02") + `', 6, 1, 21000, 2, '')`,
		`INSERT INTO token_transfers (block_number, block_hash, tx_hash, tx_index, log_index, token, from_address, to_address, value)
			VALUES (2, '` + h("0b02") + `', '` + h("0a02") + `', 0, 0, '` + a("03") + `', '` + a("01") + `', '` + a("02") + `', 7)`,
		`INSERT INTO cursors (name, block_number, block_hash, updated_at) VALUES ('indexer', 2, '` + h("0b02") + `', now()), ('settlement', 1, '` + h("0b01") + `', now())`,
		`INSERT INTO settlement_blocks (number, hash) VALUES (1, '` + h("0b01") + `')`,
		`INSERT INTO chain_checkpoints (block_number, block_hash, permanent, recorded_at) VALUES (1, '` + h("0b01") + `', true, now())`,
		`INSERT INTO chain_finalized (id, block_number) VALUES (1, 1)`,
		`INSERT INTO reorgs (fork_block, depth, old_hashes, new_hashes, detected_at) VALUES (2, 1, '[]', '[]', now())`,
		`INSERT INTO wallet_nonces (address, next_nonce) VALUES ('` + a("01") + `', 3)`,
		`INSERT INTO service_wallets (address, role, created_at, ledger_from_block) VALUES ('` + a("05") + `', 'sweep', now(), 7)`,
		`INSERT INTO ledger_entries (kind, amount, at, recorded_at) VALUES ('opening_balance', 5, now(), now())`,
	} {
		_, err := st.DB().Exec(q)
		require.NoError(t, err, q)
	}
	return st
}

// Migrations 0190 and 0191 give every existing index row (and what the
// sweep and the refund engine wrote) the recorded chain, keys
// the tables by chain, and leaves no default behind: a second chain's rows
// of the same numbers and hashes then fit beside the first's.
func TestMigrate0190_OneChainDatabase_RowsBelongToTheRecordedChain(t *testing.T) {
	ctx := context.Background()
	st := oneChainDatabase(t)
	require.NoError(t, st.Migrate(ctx))

	db := st.DB()
	for _, table := range []string{"blocks", "transactions", "token_transfers", "cursors", "settlement_blocks",
		"chain_checkpoints", "chain_finalized", "chain_identity", "reorgs", "wallet_nonces", "ledger_entries"} {
		var chains []int64
		require.NoError(t, db.Select(&chains, `SELECT DISTINCT chain_id FROM `+table), table)
		require.Equal(t, []int64{262144}, chains, table)
		var def *string
		require.NoError(t, db.Get(&def, `SELECT column_default FROM information_schema.columns
			WHERE table_name = $1 AND column_name = 'chain_id'`, table))
		require.Nil(t, def, "%s.chain_id keeps no default: a writer must name the chain", table)
	}
	requireKey(t, db, "blocks", "chain_id, number")
	requireKey(t, db, "transactions", "chain_id, hash")
	requireKey(t, db, "token_transfers", "chain_id, tx_hash, log_index")
	requireKey(t, db, "cursors", "chain_id, name")
	requireKey(t, db, "chain_identity", "chain_id")
	requireKey(t, db, "wallet_nonces", "chain_id, address")

	// Read back through the chain's handle, as the previous version wrote it.
	c := st.Chain(262144)
	head, err := c.LatestBlock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, head.Number)
	cur, err := c.GetCursor(ctx, store.CursorSettlement)
	require.NoError(t, err)
	require.EqualValues(t, 1, cur.BlockNumber)
	id, err := c.GetChainIdentity(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 262144, id.ChainID)
	fin, ok, err := c.FinalizedBlock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 1, fin)
	tr, err := c.ListTokenTransfersByTx(ctx, common.HexToHash("0a02"))
	require.NoError(t, err)
	require.Len(t, tr, 1)
	w, err := c.GetServiceWallet(ctx, common.HexToAddress("05"))
	require.NoError(t, err)
	require.NotNil(t, w.LedgerFromBlock, "the wallet's opening block is the recorded chain's (0192)")
	require.EqualValues(t, 7, *w.LedgerFromBlock)
	w, err = st.Chain(1).GetServiceWallet(ctx, common.HexToAddress("05"))
	require.NoError(t, err)
	require.Nil(t, w.LedgerFromBlock, "and no other chain's")

	// A second chain: the same block number and hash, its own identity.
	other := st.Chain(1)
	require.NoError(t, other.InsertBlocks(ctx, []store.Block{{Number: 2, Hash: head.Hash, ParentHash: head.ParentHash,
		GasLimit: 1, IndexedAt: time.Now()}}, nil))
	_, err = other.RecordChainIdentity(ctx, store.ChainIdentity{ChainID: 1, GenesisHash: common.Hash{9}, RecordedAt: time.Now()})
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO blocks (number, hash, parent_hash, timestamp, miner, gas_limit, gas_used, tx_count, indexed_at)
		VALUES (3, '\x` + strings.Repeat("0b", 32) + `', '\x` + strings.Repeat("0c", 32) + `', 1, '\x` + strings.Repeat("00", 20) + `', 1, 1, 0, now())`)
	require.Error(t, err, "a row that names no chain is refused")
}

// requireKey checks table's primary key columns, in order.
func requireKey(t *testing.T, db *sqlx.DB, table, cols string) {
	t.Helper()
	var got string
	require.NoError(t, db.Get(&got, `SELECT string_agg(a.attname, ', ' ORDER BY k.i)
		FROM pg_index x JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, i) ON true
		JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
		WHERE x.indrelid = $1::regclass AND x.indisprimary`, table))
	require.Equal(t, cols, got, table)
}

// Interrupted after part of its statements ran (here: all of them, with
// the record removed), 0190 runs again from the top and ends the same.
func TestMigrate0190_Interrupted_RerunsToTheSameSchema(t *testing.T) {
	ctx := context.Background()
	st := oneChainDatabase(t)
	require.NoError(t, st.Migrate(ctx))
	_, err := st.DB().Exec(`DELETE FROM schema_migrations WHERE version = 190`)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	requireKey(t, st.DB(), "blocks", "chain_id, number")
	requireKey(t, st.DB(), "transactions", "chain_id, hash")
	var invalid int
	require.NoError(t, st.DB().Get(&invalid, `SELECT count(*) FROM pg_index WHERE NOT indisvalid`))
	require.Zero(t, invalid)
	head, err := st.Chain(262144).LatestBlock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, head.Number)
}

// A long transaction holding blocks (a report reading it) does not make the
// migration's ALTER a wall that queues everyone else: the ALTER gives up
// after its lock_timeout and tries again, so a reader arriving meanwhile
// reads, and the migration completes once the long transaction ends.
func TestMigrate0190_LongTransaction_OthersKeepReadingAndMigrationWaits(t *testing.T) {
	st := oneChainDatabase(t)
	migrateBehindALongReader(t, st, "blocks")
	requireKey(t, st.DB(), "blocks", "chain_id, number")
}

// migrateBehindALongReader runs st's migrations while a long transaction
// reads table (a report: it holds ACCESS SHARE until it ends). The
// migration must ask for the table's lock and wait; another reader
// arriving meanwhile must read (between the ALTER's tries, without
// waiting for the long transaction); the migration must complete once the
// long transaction ends. It returns the rows that reader counted.
func migrateBehindALongReader(t *testing.T, st *postgres.Store, table string) int {
	t.Helper()
	ctx := context.Background()
	db := st.DB()
	long, err := db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	var n int
	require.NoError(t, long.Get(&n, `SELECT count(*) FROM `+table))

	done := make(chan error, 1)
	go func() { done <- st.Migrate(ctx) }()
	// The migrator is waiting on the table when pg_locks shows an
	// ungranted lock request on it.
	require.Eventually(t, func() bool {
		var waiting int
		_ = db.Get(&waiting, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = $1::regclass`, table)
		return waiting > 0
	}, 30*time.Second, 10*time.Millisecond, "the migration asks for %s' lock", table)

	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, db.GetContext(rctx, &n, `SELECT count(*) FROM `+table), "a reader got through while the migration waited")
	select {
	case err := <-done:
		t.Fatalf("the migration ended while a transaction held %s: %v", table, err)
	default:
	}
	require.NoError(t, long.Rollback())
	require.NoError(t, <-done)
	return n
}

// A migration's lock_timeout stays with its migration: the connection it
// ran on goes back to the pool as it came. Left set, the service's own
// statements on that connection (a settlement pass waiting for a row lock
// a sweep holds) would fail after half a second instead of waiting.
func TestMigrate_LeavesNoLockTimeoutOnThePool(t *testing.T) {
	// One connection: the one every migration ran on is the one read.
	st := emptyDatabase(t, 1)
	require.NoError(t, st.Migrate(context.Background()))
	var timeout string
	require.NoError(t, st.DB().Get(&timeout, `SHOW lock_timeout`))
	require.Equal(t, "0", timeout)
}
