package sqlstore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

// CompareAndSetCursor implements store.SettlementStore.
func (s *Store) CompareAndSetCursor(ctx context.Context, name string, old *store.Cursor, next store.Cursor) error {
	c, err := s.chainID()
	if err != nil {
		return err
	}
	next.Name = name
	if old == nil {
		res, err := s.exec(ctx, `INSERT INTO cursors (chain_id, name, block_number, block_hash, updated_at)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (chain_id, name) DO NOTHING`, c, name, next.BlockNumber, next.BlockHash, next.UpdatedAt)
		if err != nil {
			return err
		}
		return casResult(res, name)
	}
	res, err := s.execPrepared(ctx, `UPDATE cursors SET block_number = ?, block_hash = ?, updated_at = ?
		WHERE chain_id = ? AND name = ? AND block_number = ? AND block_hash = ?`,
		next.BlockNumber, next.BlockHash, next.UpdatedAt, c, name, old.BlockNumber, old.BlockHash)
	if err != nil {
		return err
	}
	return casResult(res, name)
}

func casResult(res interface{ RowsAffected() (int64, error) }, name string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: cursor %q moved since it was read", store.ErrConflict, name)
	}
	return nil
}

// ListInvoiceTxsInBlock implements store.SettlementStore. The invoice id
// is a correlated subquery (a unique-index probe per transaction of the
// block) rather than a join, so that no plan ever scans the invoices; a
// transaction without value (most of a real chain's: contract calls) pays
// nothing and is not probed ('0' is how both stores write a zero amount).
// Recipients outside to are not probed either: the condition on them sits
// in the probe, so the plan is the same whether to is given or not (the
// block's range, never a walk of transactions_to).
// The sweep's own transactions to a deposit address (the gas it sends
// there before sweeping) are not payments: every one is in sweep_txs before
// it is broadcast, so none is ever indexed without being recognised.
// The invoice may be of any chain (a deposit address is the same on
// every chain, and unique): a payment on this chain to an invoice of
// another is a wrong-network payment, which settlement records.
func (s *Store) ListInvoiceTxsInBlock(ctx context.Context, number uint64, to []common.Address) ([]store.InvoiceTx, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var ts []store.InvoiceTx
	err = s.selRecipients(ctx, &ts, `SELECT `+txColumns+`, invoice_id, chain_id FROM (
			SELECT t.*, (SELECT i.id FROM invoices i WHERE %s i.deposit_address = t.to_address) AS invoice_id
			FROM transactions t WHERE t.chain_id = ? AND t.block_number = ? AND t.to_address IS NOT NULL AND t.value_wei <> '0'
			  AND NOT EXISTS (SELECT 1 FROM sweep_txs s WHERE s.tx_hash = t.hash)
		) AS x WHERE invoice_id IS NOT NULL ORDER BY tx_index`, "t.to_address", to, c, number)
	return ts, err
}

// ListInvoiceTokenTransfersInBlock implements store.SettlementStore, the
// token counterpart of ListInvoiceTxsInBlock.
func (s *Store) ListInvoiceTokenTransfersInBlock(ctx context.Context, number uint64, to []common.Address) ([]store.InvoiceTokenTransfer, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var ts []store.InvoiceTokenTransfer
	err = s.selRecipients(ctx, &ts, `SELECT `+tokenTransferColumns+`, invoice_id, chain_id FROM (
			SELECT t.*, (SELECT i.id FROM invoices i WHERE %s i.deposit_address = t.to_address) AS invoice_id
			FROM token_transfers t WHERE t.chain_id = ? AND t.block_number = ?
			  AND NOT EXISTS (SELECT 1 FROM sweep_txs s WHERE s.tx_hash = t.tx_hash)
		) AS x WHERE invoice_id IS NOT NULL ORDER BY log_index`, "t.to_address", to, c, number)
	return ts, err
}

// selRecipients runs q, whose %s is where a condition on the recipient
// column col goes (with its AND), restricted to the recipients to (nil:
// unrestricted; empty: nothing to find). On PostgreSQL the condition is
// one bytea[] parameter, so the text never varies and is prepared; SQLite
// expands the list. The condition's parameter comes first, then args.
// On PostgreSQL it is written IN (SELECT unnest(…)), which the plan
// evaluates as a hashed subplan: one hash lookup per transaction of the
// block. As = ANY(…) of a parameter it compared each of the block's
// thousand recipients with every candidate (2.4 → 1.1 ms a block at 50
// candidates, BENCHMARKS.md).
func (s *Store) selRecipients(ctx context.Context, dest any, q, col string, to []common.Address, args ...any) error {
	switch {
	case to == nil:
		return s.selPrepared(ctx, dest, fmt.Sprintf(q, ""), args...)
	case len(to) == 0:
		return nil
	case s.d.Array != nil:
		addrs := make([][]byte, len(to))
		for i := range to {
			addrs[i] = to[i].Bytes()
		}
		return s.selPrepared(ctx, dest, fmt.Sprintf(q, col+" IN (SELECT unnest(?::bytea[])) AND"), append([]any{byteaArray(addrs)}, args...)...)
	}
	return s.selIn(ctx, dest, fmt.Sprintf(q, col+" IN (?) AND"), append([]any{to}, args...)...)
}

// ListBlockRecipients implements store.SettlementStore. On PostgreSQL the
// recipients come back as one bytea of 20 bytes each (string_agg): a
// block's thousand recipients read as rows cost settlement more CPU in the
// driver than the index probes the list saves. An address may repeat.
func (s *Store) ListBlockRecipients(ctx context.Context, number uint64) ([]common.Address, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	const recipients = `SELECT to_address AS a FROM transactions
			WHERE chain_id = ? AND block_number = ? AND to_address IS NOT NULL AND value_wei <> '0'
		UNION ALL SELECT to_address FROM token_transfers WHERE chain_id = ? AND block_number = ?`
	if s.d.Name != "postgres" {
		var to []common.Address
		err := s.selPrepared(ctx, &to, recipients, c, number, c, number)
		return to, err
	}
	var packed []byte
	if err := s.getPrepared(ctx, &packed, `SELECT COALESCE(string_agg(a, ''::bytea), ''::bytea) FROM (`+recipients+`) r`,
		c, number, c, number); err != nil {
		return nil, err
	}
	if len(packed)%common.AddressLength != 0 {
		return nil, fmt.Errorf("block %d recipients: %d bytes is not a whole number of addresses", number, len(packed))
	}
	to := make([]common.Address, len(packed)/common.AddressLength)
	for i := range to {
		copy(to[i][:], packed[i*common.AddressLength:])
	}
	return to, nil
}

// ListDepositAddresses implements store.SettlementStore: one statement,
// so one snapshot on PostgreSQL (a transaction's on SQLite). The left join
// yields the counter's row even when the page is empty.
func (s *Store) ListDepositAddresses(ctx context.Context, from uint32, n int) (store.DepositAddresses, error) {
	var rows []struct {
		Counter int64           `db:"counter"`
		Highest int64           `db:"highest"`
		Address *common.Address `db:"deposit_address"`
	}
	end := int64(from) + int64(limit(n, 100_000, 1_000_000))
	err := s.selPrepared(ctx, &rows, `SELECT c.value AS counter, m.highest, i.deposit_address
		FROM counters c
		CROSS JOIN (SELECT COALESCE(MAX(derivation_index), -1) AS highest FROM invoices) m
		LEFT JOIN invoices i ON i.derivation_index >= ? AND i.derivation_index < ? AND i.derivation_index < c.value
		WHERE c.name = 'derivation_index'`, int64(from), end)
	if err != nil {
		return store.DepositAddresses{}, err
	}
	if len(rows) == 0 {
		return store.DepositAddresses{}, fmt.Errorf("%w: the derivation_index counter", store.ErrNotFound)
	}
	page := store.DepositAddresses{Counter: uint32(rows[0].Counter), Highest: rows[0].Highest,
		Next: uint32(max(int64(from), min(end, rows[0].Counter)))}
	for _, r := range rows {
		if r.Address != nil {
			page.Addresses = append(page.Addresses, *r.Address)
		}
	}
	return page, nil
}

// EarliestBlock implements store.SettlementStore.
func (s *Store) EarliestBlock(ctx context.Context) (store.Block, error) {
	c, err := s.chainID()
	if err != nil {
		return store.Block{}, err
	}
	var b store.Block
	err = s.get(ctx, &b, `SELECT `+blockColumns+` FROM blocks WHERE chain_id = ? ORDER BY number LIMIT 1`, c)
	return b, err
}

// GetInvoicesForUpdate implements store.SettlementStore.
func (s *Store) GetInvoicesForUpdate(ctx context.Context, ids []int64) ([]store.Invoice, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var invs []store.Invoice
	err := s.selIDs(ctx, &invs, selectInvoice+` WHERE id IN (?) ORDER BY id`+s.d.ForUpdate, ids)
	return invs, err
}

// ListPaymentsByInvoices implements store.SettlementStore.
func (s *Store) ListPaymentsByInvoices(ctx context.Context, ids []int64) ([]store.Payment, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var ps []store.Payment
	err := s.selIDs(ctx, &ps, `SELECT `+paymentColumns+` FROM payments WHERE invoice_id IN (?)
		ORDER BY invoice_id, block_number, id`, ids)
	return ps, err
}

// lastCountedBlock is the highest block of an invoice's counted payments
// (0 when none), two parameters: wrong_asset's and wrong_network's false
// (a counted payment is on the invoice's chain: its block is of that
// chain). It names no block
// range, so the only index that serves it is payments_invoice_block
// (migration 0100), one descent per invoice. Written as NOT EXISTS (a
// payment above the block), the planner was free to make it an anti join
// over every payment above the block, or a walk of payments_block, and did
// both once the table had a history: 28–50 ms a round at 100,000 payments
// instead of 1 ms.
func lastCountedBlock(invoiceID string) string {
	return `COALESCE((SELECT max(q.block_number) FROM payments q
		WHERE q.invoice_id = ` + invoiceID + ` AND q.wrong_asset = ? AND q.wrong_network = ?), 0)`
}

// ListConfirmable implements store.SettlementStore. It walks the partial
// index invoices_paid and finds each candidate's lastCountedBlock.
func (s *Store) ListConfirmable(ctx context.Context, maxBlock uint64, n int) ([]int64, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	if maxBlock > math.MaxInt64 {
		maxBlock = math.MaxInt64
	}
	var ids []int64
	err = s.selPrepared(ctx, &ids, `SELECT i.id FROM invoices i WHERE i.status = 'PAID' AND i.chain_id = ?
		AND `+lastCountedBlock("i.id")+` <= ? ORDER BY i.id LIMIT ?`, c, false, false, maxBlock, limit(n, 1000, 10000))
	return ids, err
}

// ListConfirmableSince implements store.SettlementStore. It walks
// payments_chain_block over the chain's (after, maxBlock], then reads each invoice's status
// and lastCountedBlock. Both are scalar subqueries, run per invoice of the
// range as written: as a join, the planner drove it from invoices_paid
// when its statistics counted few PAID invoices.
func (s *Store) ListConfirmableSince(ctx context.Context, after, maxBlock uint64, n int) ([]int64, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	maxBlock = min(maxBlock, math.MaxInt64)
	if after >= maxBlock {
		return nil, nil
	}
	var ids []int64
	err = s.selPrepared(ctx, &ids, `SELECT r.id FROM (SELECT DISTINCT p.invoice_id AS id FROM payments p
			WHERE p.chain_id = ? AND p.block_number > ? AND p.block_number <= ? AND p.wrong_asset = ? AND p.wrong_network = ?) r
		WHERE (SELECT i.status FROM invoices i WHERE i.id = r.id AND i.chain_id = ?) = 'PAID'
		AND `+lastCountedBlock("r.id")+` <= ? ORDER BY r.id LIMIT ?`, c, after, maxBlock, false, false, c, false, false, maxBlock, limit(n, 1000, 10000))
	return ids, err
}

// InsertSettledBlock implements store.SettlementStore.
func (s *Store) InsertSettledBlock(ctx context.Context, number uint64, hash common.Hash) error {
	c, err := s.chainID()
	if err != nil {
		return err
	}
	_, err = s.execPrepared(ctx, `INSERT INTO settlement_blocks (chain_id, number, hash) VALUES (?, ?, ?)`, c, number, hash)
	return err
}

// ListSettledBlockHashes implements store.SettlementStore.
func (s *Store) ListSettledBlockHashes(ctx context.Context, from, to uint64) (map[uint64]common.Hash, error) {
	return s.hashesByNumber(ctx, "settlement_blocks", from, to)
}

// DeleteSettledBlocks implements store.SettlementStore.
func (s *Store) DeleteSettledBlocks(ctx context.Context, below, from uint64) error {
	c, err := s.chainID()
	if err != nil {
		return err
	}
	if below > 0 {
		if _, err := s.exec(ctx, `DELETE FROM settlement_blocks WHERE chain_id = ? AND number < ?`, c, min(below, math.MaxInt64)); err != nil {
			return err
		}
	}
	if from <= math.MaxInt64 {
		if _, err := s.exec(ctx, `DELETE FROM settlement_blocks WHERE chain_id = ? AND number >= ?`, c, from); err != nil {
			return err
		}
	}
	return nil
}

// ListPendingInvoiceTxs implements store.SettlementStore. It walks the
// PENDING invoices (the partial index invoices_expiring) and probes transactions_to for each.
func (s *Store) ListPendingInvoiceTxs(ctx context.Context, indexedBefore time.Time, n int) ([]store.PendingInvoiceTx, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var rows []store.PendingInvoiceTx
	// Each invoice in its own asset: native transactions to native
	// invoices, transfers of the invoice's token to token invoices.
	err = s.sel(ctx, &rows, `SELECT invoice_id, amount_wei, hash, block_number, value_wei, indexed_at FROM (
			SELECT i.id AS invoice_id, i.amount_wei, t.hash, t.block_number, t.tx_index AS pos,
				t.value_wei, b.indexed_at
			FROM invoices i
			JOIN transactions t ON t.to_address = i.deposit_address AND t.chain_id = i.chain_id
			JOIN blocks b ON b.chain_id = t.chain_id AND b.number = t.block_number AND b.hash = t.block_hash
			WHERE i.status = 'PENDING' AND i.chain_id = ? AND i.token_address IS NULL AND b.indexed_at <= ?
			UNION ALL
			SELECT i.id, i.amount_wei, tt.tx_hash, tt.block_number, tt.log_index, tt.value, b.indexed_at
			FROM invoices i
			JOIN token_transfers tt ON tt.to_address = i.deposit_address AND tt.token = i.token_address AND tt.chain_id = i.chain_id
			JOIN blocks b ON b.chain_id = tt.chain_id AND b.number = tt.block_number AND b.hash = tt.block_hash
			WHERE i.status = 'PENDING' AND i.chain_id = ? AND b.indexed_at <= ?
		) paid ORDER BY invoice_id, block_number, pos LIMIT ?`, c, indexedBefore, c, indexedBefore, limit(n, 10000, 100000))
	return rows, err
}

// ListUnsweptConfirmed implements store.SettlementStore.
func (s *Store) ListUnsweptConfirmed(ctx context.Context, confirmedBefore time.Time, n int) ([]store.Invoice, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var invs []store.Invoice
	err = s.sel(ctx, &invs, selectInvoice+` WHERE status = 'CONFIRMED' AND chain_id = ? AND confirmed_at <= ?
		AND NOT EXISTS (SELECT 1 FROM sweep_txs s WHERE s.invoice_id = invoices.id AND s.kind IN (?, ?))
		ORDER BY confirmed_at, id LIMIT ?`, c, confirmedBefore, store.SweepTxSweep, store.SweepTxPull, limit(n, 100, 10000))
	return invs, err
}
