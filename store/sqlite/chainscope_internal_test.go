package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/internal/sqlstore"
)

// Migration 0190 on SQLite: a database the previous version wrote (up to
// 0180, one chain's rows) reopens with every index row on the recorded
// chain, keyed by chain, the ledger trigger still writing entries.
func TestMigrate0190_OneChainDatabase_RowsBelongToTheRecordedChain(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evmpay.db")
	db, err := sqlx.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_time_integer_format=unix_micro")
	require.NoError(t, err)
	old := sqlstore.New(db, dialect)
	ms, err := sqlstore.LoadMigrations(migrations, "migrations")
	require.NoError(t, err)
	n := 0
	for n < len(ms) && ms[n].Version <= 180 {
		n++
	}
	_, err = old.Migrate(ctx, ms[:n], "")
	require.NoError(t, err)
	h := func(b string) string { return "x'" + strings.Repeat("0", 64-len(b)) + b + "'" }
	a := func(b string) string { return "x'" + strings.Repeat("0", 40-len(b)) + b + "'" }
	for _, q := range []string{
		`INSERT INTO chain_identity (id, chain_id, genesis_hash, recorded_at, genesis_number) VALUES (1, 262144, ` + h("01") + `, 1, 0)`,
		`INSERT INTO blocks (number, hash, parent_hash, timestamp, miner, gas_limit, gas_used, tx_count, indexed_at)
			VALUES (1, ` + h("b1") + `, ` + h("00") + `, 1700000000, ` + a("00") + `, 1, 1, 1, 1)`,
		`INSERT INTO transactions (hash, block_number, block_hash, tx_index, from_address, to_address, value_wei, nonce, gas, type, input)
			VALUES (` + h("a1") + `, 1, ` + h("b1") + `, 0, ` + a("01") + `, ` + a("02") + `, '5', 0, 21000, 2, x'')`,
		`INSERT INTO token_transfers (block_number, block_hash, tx_hash, tx_index, log_index, token, from_address, to_address, value)
			VALUES (1, ` + h("b1") + `, ` + h("a1") + `, 0, 0, ` + a("03") + `, ` + a("01") + `, ` + a("02") + `, '7')`,
		`INSERT INTO cursors (name, block_number, block_hash, updated_at) VALUES ('indexer', 1, ` + h("b1") + `, 1)`,
		`INSERT INTO settlement_blocks (number, hash) VALUES (1, ` + h("b1") + `)`,
		`INSERT INTO chain_checkpoints (block_number, block_hash, permanent, recorded_at) VALUES (1, ` + h("b1") + `, 1, 1)`,
		`INSERT INTO chain_finalized (id, block_number) VALUES (1, 1)`,
		`INSERT INTO reorgs (fork_block, depth, old_hashes, new_hashes, detected_at) VALUES (2, 1, '[]', '[]', 1)`,
		`INSERT INTO wallet_nonces (address, next_nonce) VALUES (` + a("01") + `, 3)`,
		`INSERT INTO service_wallets (address, role, created_at, ledger_from_block) VALUES (` + a("05") + `, 'sweep', 1, 7)`,
		`INSERT INTO ledger_entries (kind, amount, at, recorded_at) VALUES ('opening_balance', '5', 1, 1)`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	require.NoError(t, db.Close())

	st, err := Open(ctx, path, Config{})
	require.NoError(t, err)
	defer st.Close()
	for _, table := range []string{"blocks", "transactions", "token_transfers", "cursors", "settlement_blocks",
		"chain_checkpoints", "chain_finalized", "chain_identity", "reorgs", "wallet_nonces", "ledger_entries"} {
		var chains []int64
		require.NoError(t, st.DB().Select(&chains, `SELECT DISTINCT chain_id FROM `+table), table)
		require.Equal(t, []int64{262144}, chains, table)
	}
	c := st.Chain(262144)
	head, err := c.LatestBlock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, head.Number)
	cur, err := c.GetCursor(ctx, store.CursorIndexer)
	require.NoError(t, err)
	require.EqualValues(t, 1, cur.BlockNumber)
	fin, ok, err := c.FinalizedBlock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 1, fin)
	rs, err := c.ListReorgs(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	// The wallet's nonce sequence is the recorded chain's.
	nonce, err := c.ReserveNonce(ctx, common.BytesToAddress([]byte{1}), 0)
	require.NoError(t, err)
	require.EqualValues(t, 3, nonce)
	w, err := c.GetServiceWallet(ctx, common.BytesToAddress([]byte{5}))
	require.NoError(t, err)
	require.NotNil(t, w.LedgerFromBlock, "the wallet's opening block is the recorded chain's (0192)")
	require.EqualValues(t, 7, *w.LedgerFromBlock)
	// The same block on another chain fits beside it.
	require.NoError(t, st.Chain(1).InsertBlocks(ctx, []store.Block{head}, nil))
	// The trigger recreated by the migration still writes a payment's
	// ledger entry, dated by the block of the invoice's chain.
	var triggers int
	require.NoError(t, st.DB().Get(&triggers, `SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name = 'ledger_payment_credited'`))
	require.Equal(t, 1, triggers)
}

// A database with index rows but no record of their chain is not guessed
// at: the migration stops and says what to do.
func TestMigrate0190_RowsWithoutARecordedChain_RefusesAndSaysWhy(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evmpay.db")
	db, err := sqlx.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	ms, err := sqlstore.LoadMigrations(migrations, "migrations")
	require.NoError(t, err)
	n := 0
	for n < len(ms) && ms[n].Version <= 180 {
		n++
	}
	_, err = sqlstore.New(db, dialect).Migrate(ctx, ms[:n], "")
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO cursors (name, block_number, block_hash, updated_at) VALUES ('indexer', 1, x'00', 1)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	_, err = Open(ctx, path, Config{})
	require.ErrorContains(t, err, "table cursors holds rows but the database records no chain")
	require.ErrorContains(t, err, "records the chain's identity")
}
