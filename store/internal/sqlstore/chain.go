package sqlstore

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

const (
	blockColumns = `number, hash, parent_hash, timestamp, miner, gas_limit, gas_used, base_fee_wei,
	tx_count, indexed_at`
	txColumns = `hash, block_number, block_hash, tx_index, from_address, to_address, value_wei,
	nonce, gas, type, gas_price_wei, max_fee_wei, max_priority_fee_wei, input`
)

const tokenTransferColumns = `block_number, block_hash, tx_hash, tx_index, log_index, token,
	from_address, to_address, value`

// The bulk-insert column lists lead with the chain; the SELECT lists do
// not read it back (a chain-bound handle knows its chain).
var (
	blockColumnList         = append([]string{"chain_id"}, splitColumns(blockColumns)...)
	txColumnList            = append([]string{"chain_id"}, splitColumns(txColumns)...)
	tokenTransferColumnList = append([]string{"chain_id"}, splitColumns(tokenTransferColumns)...)
)

func splitColumns(cols string) []string {
	parts := strings.Split(cols, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func blockRow(chain int64, b *store.Block) []any {
	return []any{chain, b.Number, b.Hash, b.ParentHash, b.Timestamp, b.Miner, b.GasLimit, b.GasUsed,
		b.BaseFeeWei, b.TxCount, b.IndexedAt}
}

func txRow(chain int64, t *store.Transaction) []any {
	input := t.Input
	if input == nil {
		input = []byte{}
	}
	return []any{chain, t.Hash, t.BlockNumber, t.BlockHash, t.Index, t.From, t.To, t.ValueWei, t.Nonce,
		t.Gas, t.Type, t.GasPriceWei, t.MaxFeeWei, t.MaxPriorityFeeWei, input}
}

// InsertBlocks implements store.ChainStore.
func (s *Store) InsertBlocks(ctx context.Context, blocks []store.Block, txs []store.Transaction) error {
	if len(blocks) == 0 && len(txs) == 0 {
		return nil
	}
	c, err := s.chainID()
	if err != nil {
		return err
	}
	brows := make([][]any, len(blocks))
	for i := range blocks {
		brows[i] = blockRow(c, &blocks[i])
	}
	trows := make([][]any, len(txs))
	for i := range txs {
		trows[i] = txRow(c, &txs[i])
	}
	return s.withTx(ctx, func(t *Store) error {
		if err := t.bulkInsert(ctx, "blocks", blockColumnList, brows); err != nil {
			return err
		}
		return t.bulkInsert(ctx, "transactions", txColumnList, trows)
	})
}

// InsertTokenTransfers implements store.ChainStore.
func (s *Store) InsertTokenTransfers(ctx context.Context, ts []store.TokenTransfer) error {
	if len(ts) == 0 {
		return nil
	}
	c, err := s.chainID()
	if err != nil {
		return err
	}
	rows := make([][]any, len(ts))
	for i := range ts {
		t := &ts[i]
		rows[i] = []any{c, t.BlockNumber, t.BlockHash, t.TxHash, t.TxIndex, t.LogIndex, t.Token, t.From, t.To, t.Value}
	}
	return s.withTx(ctx, func(t *Store) error {
		return t.bulkInsert(ctx, "token_transfers", tokenTransferColumnList, rows)
	})
}

// ListTokenTransfersByTx implements store.ChainStore.
func (s *Store) ListTokenTransfersByTx(ctx context.Context, hash common.Hash) ([]store.TokenTransfer, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var ts []store.TokenTransfer
	err = s.sel(ctx, &ts, `SELECT `+tokenTransferColumns+` FROM token_transfers WHERE chain_id = ? AND tx_hash = ?
		ORDER BY block_number, log_index`, c, hash)
	return ts, err
}

// ListTokenTransfersByAddress implements store.ChainStore, like
// ListTxsByAddress: two index range scans merged.
func (s *Store) ListTokenTransfersByAddress(ctx context.Context, addr common.Address, beforeBlock uint64, beforeLog int, n int) ([]store.TokenTransfer, error) {
	if beforeBlock == 0 || beforeBlock > math.MaxInt64 {
		beforeBlock, beforeLog = math.MaxInt64, 0
	}
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	n = limit(n, 50, 1000)
	const page = `SELECT ` + tokenTransferColumns + ` FROM token_transfers WHERE %s = ? AND chain_id = ?
		AND (block_number < ? OR (block_number = ? AND log_index < ?))
		ORDER BY block_number DESC, log_index DESC LIMIT ?`
	q := `SELECT ` + tokenTransferColumns + ` FROM (
		SELECT * FROM (` + fmt.Sprintf(page, "to_address") + `) AS t_to
		UNION
		SELECT * FROM (` + fmt.Sprintf(page, "from_address") + `) AS t_from
	) AS t ORDER BY block_number DESC, log_index DESC LIMIT ?`
	var ts []store.TokenTransfer
	err = s.sel(ctx, &ts, q,
		addr, c, beforeBlock, beforeBlock, beforeLog, n,
		addr, c, beforeBlock, beforeBlock, beforeLog, n,
		n)
	return ts, err
}

// bulkInsert inserts rows inside the current transaction, by COPY where the
// dialect has it and by a prepared statement otherwise.
func (s *Store) bulkInsert(ctx context.Context, table string, cols []string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	if s.d.CopyIn != nil {
		return s.wrap(s.d.CopyIn(ctx, s.tx, table, cols, rows))
	}
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", table, strings.Join(cols, ", "),
		strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", "))
	stmt, err := s.tx.PrepareContext(ctx, s.qc.rebind(q))
	if err != nil {
		return s.wrap(err)
	}
	defer stmt.Close()
	for _, r := range rows {
		if _, err := stmt.ExecContext(ctx, r...); err != nil {
			return s.wrap(err)
		}
	}
	return nil
}

// GetBlock implements store.ChainStore.
func (s *Store) GetBlock(ctx context.Context, number uint64) (store.Block, error) {
	c, err := s.chainID()
	if err != nil {
		return store.Block{}, err
	}
	var b store.Block
	err = s.getPrepared(ctx, &b, `SELECT `+blockColumns+` FROM blocks WHERE chain_id = ? AND number = ?`, c, number)
	return b, err
}

// GetBlockByHash implements store.ChainStore.
func (s *Store) GetBlockByHash(ctx context.Context, hash common.Hash) (store.Block, error) {
	c, err := s.chainID()
	if err != nil {
		return store.Block{}, err
	}
	var b store.Block
	err = s.get(ctx, &b, `SELECT `+blockColumns+` FROM blocks WHERE chain_id = ? AND hash = ?`, c, hash)
	return b, err
}

// LatestBlock implements store.ChainStore.
func (s *Store) LatestBlock(ctx context.Context) (store.Block, error) {
	c, err := s.chainID()
	if err != nil {
		return store.Block{}, err
	}
	var b store.Block
	err = s.getPrepared(ctx, &b, `SELECT `+blockColumns+` FROM blocks WHERE chain_id = ? ORDER BY number DESC LIMIT 1`, c)
	return b, err
}

// ListBlockHashes implements store.ChainStore.
func (s *Store) ListBlockHashes(ctx context.Context, from, to uint64) (map[uint64]common.Hash, error) {
	return s.hashesByNumber(ctx, "blocks", from, to)
}

// hashesByNumber reads the chain's (number, hash) rows of table with
// numbers in [from, to].
func (s *Store) hashesByNumber(ctx context.Context, table string, from, to uint64) (map[uint64]common.Hash, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	if from > math.MaxInt64 {
		return map[uint64]common.Hash{}, nil
	}
	to = min(to, math.MaxInt64)
	var rows []struct {
		Number uint64      `db:"number"`
		Hash   common.Hash `db:"hash"`
	}
	if err := s.sel(ctx, &rows, `SELECT number, hash FROM `+table+` WHERE chain_id = ? AND number >= ? AND number <= ?`, c, from, to); err != nil {
		return nil, err
	}
	out := make(map[uint64]common.Hash, len(rows))
	for _, r := range rows {
		out[r.Number] = r.Hash
	}
	return out, nil
}

// DeleteBlocksFrom implements store.ChainStore.
func (s *Store) DeleteBlocksFrom(ctx context.Context, number uint64) (int64, error) {
	c, err := s.chainID()
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.withTx(ctx, func(t *Store) error {
		if _, err := t.exec(ctx, `DELETE FROM transactions WHERE chain_id = ? AND block_number >= ?`, c, number); err != nil {
			return err
		}
		if _, err := t.exec(ctx, `DELETE FROM token_transfers WHERE chain_id = ? AND block_number >= ?`, c, number); err != nil {
			return err
		}
		res, err := t.exec(ctx, `DELETE FROM blocks WHERE chain_id = ? AND number >= ?`, c, number)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// GetTx implements store.ChainStore.
func (s *Store) GetTx(ctx context.Context, hash common.Hash) (store.Transaction, error) {
	c, err := s.chainID()
	if err != nil {
		return store.Transaction{}, err
	}
	var t store.Transaction
	err = s.get(ctx, &t, `SELECT `+txColumns+` FROM transactions WHERE chain_id = ? AND hash = ?`, c, hash)
	return t, err
}

// ListTxsByBlock implements store.ChainStore.
func (s *Store) ListTxsByBlock(ctx context.Context, number uint64) ([]store.Transaction, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var ts []store.Transaction
	err = s.sel(ctx, &ts, `SELECT `+txColumns+` FROM transactions WHERE chain_id = ? AND block_number = ?
		ORDER BY tx_index`, c, number)
	return ts, err
}

// ListTxsByAddress implements store.ChainStore.
func (s *Store) ListTxsByAddress(ctx context.Context, addr common.Address, beforeBlock uint64, beforeIndex int, n int) ([]store.Transaction, error) {
	if beforeBlock == 0 || beforeBlock > math.MaxInt64 {
		beforeBlock, beforeIndex = math.MaxInt64, 0
	}
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	n = limit(n, 50, 1000)
	// Two index range scans (to, from) merged, instead of an OR that
	// defeats both indexes. The cursor is a row comparison, which both
	// databases use as a bound of the (address, block_number, tx_index)
	// index: the equivalent "block_number < ? OR (block_number = ? AND
	// tx_index < ?)" is only a filter, so a deep page read every newer
	// transaction of the address first (docs/scale.md).
	const page = `SELECT ` + txColumns + ` FROM transactions WHERE %s = ? AND chain_id = ?
		AND (block_number, tx_index) < (?, ?)
		ORDER BY block_number DESC, tx_index DESC LIMIT ?`
	q := `SELECT ` + txColumns + ` FROM (
		SELECT * FROM (` + fmt.Sprintf(page, "to_address") + `) AS t_to
		UNION
		SELECT * FROM (` + fmt.Sprintf(page, "from_address") + `) AS t_from
	) AS t ORDER BY block_number DESC, tx_index DESC LIMIT ?`
	var ts []store.Transaction
	err = s.sel(ctx, &ts, q,
		addr, c, beforeBlock, beforeIndex, n,
		addr, c, beforeBlock, beforeIndex, n,
		n)
	return ts, err
}

// InsertReorg implements store.ChainStore.
func (s *Store) InsertReorg(ctx context.Context, r *store.Reorg) error {
	c, err := s.chainID()
	if err != nil {
		return err
	}
	return s.get(ctx, &r.ID, `INSERT INTO reorgs (chain_id, fork_block, depth, old_hashes, new_hashes, detected_at)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, c, r.ForkBlock, r.Depth, r.OldHashes, r.NewHashes, r.DetectedAt)
}

// ListReorgs implements store.ChainStore.
func (s *Store) ListReorgs(ctx context.Context, afterID int64, n int) ([]store.Reorg, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var rs []store.Reorg
	err = s.sel(ctx, &rs, `SELECT id, fork_block, depth, old_hashes, new_hashes, detected_at
		FROM reorgs WHERE chain_id = ? AND id > ? ORDER BY id LIMIT ?`, c, afterID, limit(n, 100, 1000))
	return rs, err
}
