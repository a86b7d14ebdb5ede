package sqlstore

import (
	"context"
	"sort"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

const sweepTxColumns = `id, chain_id, invoice_id, kind, from_address, to_address, nonce, value_wei, gas_limit,
	max_fee_wei, max_priority_fee_wei, tx_hash, raw_tx, status, block_number, gas_used, fee_wei,
	created_at, updated_at, sent_at, mined_at, sent_block, last_error, wrong_token, outbound_id`

// CreateSweepTx implements store.SweepStore.
func (s *Store) CreateSweepTx(ctx context.Context, t *store.SweepTx) error {
	c, err := s.chainID()
	if err != nil {
		return err
	}
	t.ChainID = uint64(c)
	return s.namedGet(ctx, &t.ID, `INSERT INTO sweep_txs (chain_id, invoice_id, kind, from_address, to_address,
			nonce, value_wei, gas_limit, max_fee_wei, max_priority_fee_wei, tx_hash, raw_tx, status,
			block_number, gas_used, fee_wei, created_at, updated_at, sent_at, mined_at, sent_block,
			last_error, wrong_token, outbound_id)
		VALUES (:chain_id, :invoice_id, :kind, :from_address, :to_address, :nonce, :value_wei, :gas_limit,
			:max_fee_wei, :max_priority_fee_wei, :tx_hash, :raw_tx, :status, :block_number,
			:gas_used, :fee_wei, :created_at, :updated_at, :sent_at, :mined_at, :sent_block,
			:last_error, :wrong_token, :outbound_id)
		RETURNING id`, t)
}

// UpdateSweepTx implements store.SweepStore.
func (s *Store) UpdateSweepTx(ctx context.Context, t store.SweepTx) error {
	res, err := s.namedExec(ctx, `UPDATE sweep_txs SET status = :status, block_number = :block_number,
			gas_used = :gas_used, fee_wei = :fee_wei, updated_at = :updated_at, sent_at = :sent_at,
			mined_at = :mined_at, sent_block = :sent_block, last_error = :last_error
		WHERE id = :id`, t)
	if err != nil {
		return err
	}
	return mustAffect(res)
}

// ListSweepTxsByInvoice implements store.SweepStore.
func (s *Store) ListSweepTxsByInvoice(ctx context.Context, invoiceID int64) ([]store.SweepTx, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var ts []store.SweepTx
	err = s.sel(ctx, &ts, `SELECT `+sweepTxColumns+` FROM sweep_txs WHERE invoice_id = ? AND chain_id = ? ORDER BY id`, invoiceID, c)
	return ts, err
}

// ListUnminedSweepTxs implements store.SweepStore.
func (s *Store) ListUnminedSweepTxs(ctx context.Context, from common.Address) ([]store.SweepTx, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var ts []store.SweepTx
	err = s.sel(ctx, &ts, `SELECT `+sweepTxColumns+` FROM sweep_txs
		WHERE from_address = ? AND chain_id = ? AND status IN ('SIGNED', 'SENT') ORDER BY nonce, id`, from, c)
	return ts, err
}

// ListSweepTxsByNonce implements store.SweepStore.
func (s *Store) ListSweepTxsByNonce(ctx context.Context, from common.Address, kind string, nonce uint64) ([]store.SweepTx, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var ts []store.SweepTx
	err = s.sel(ctx, &ts, `SELECT `+sweepTxColumns+` FROM sweep_txs
		WHERE from_address = ? AND chain_id = ? AND kind = ? AND nonce = ? ORDER BY id`, from, c, kind, nonce)
	return ts, err
}

// ListFailedSweepTxs implements store.SweepStore.
func (s *Store) ListFailedSweepTxs(ctx context.Context, from common.Address, kind string) ([]store.SweepTx, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var ts []store.SweepTx
	err = s.sel(ctx, &ts, `SELECT `+sweepTxColumns+` FROM sweep_txs
		WHERE from_address = ? AND chain_id = ? AND kind = ? AND status = ? ORDER BY nonce, id`, from, c, kind, store.SweepTxFailed)
	return ts, err
}

// IsDepositAddress implements store.SweepStore.
func (s *Store) IsDepositAddress(ctx context.Context, addr common.Address) (bool, error) {
	var n int
	err := s.get(ctx, &n, `SELECT (SELECT COUNT(*) FROM invoices WHERE deposit_address = ?)
		+ (SELECT COUNT(*) FROM invoices_archive WHERE deposit_address = ?)`, addr, addr)
	return n > 0, err
}

// ListInvoicesBySweepStatus implements store.SweepStore.
func (s *Store) ListInvoicesBySweepStatus(ctx context.Context, status string, afterID int64, n int) ([]store.Invoice, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var invs []store.Invoice
	err = s.sel(ctx, &invs, selectInvoice+` WHERE sweep_status = ? AND chain_id = ? AND id > ? ORDER BY id LIMIT ?`,
		status, c, afterID, limit(n, 100, 1000))
	return invs, err
}

// ListSweepTxsMinedSince implements store.SweepStore.
func (s *Store) ListSweepTxsMinedSince(ctx context.Context, from common.Address, since time.Time) ([]store.SweepTx, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var ts []store.SweepTx
	err = s.sel(ctx, &ts, `SELECT `+sweepTxColumns+` FROM sweep_txs
		WHERE from_address = ? AND chain_id = ? AND mined_at >= ? ORDER BY id`, from, c, since)
	return ts, err
}

// ReserveNonce implements store.SweepStore.
func (s *Store) ReserveNonce(ctx context.Context, addr common.Address, chainNonce uint64) (uint64, error) {
	c, err := s.chainID()
	if err != nil {
		return 0, err
	}
	var n uint64
	err = s.get(ctx, &n, `INSERT INTO wallet_nonces (chain_id, address, next_nonce) VALUES (?, ?, ?)
		ON CONFLICT (chain_id, address) DO UPDATE SET next_nonce = CASE
			WHEN wallet_nonces.next_nonce > excluded.next_nonce - 1 THEN wallet_nonces.next_nonce + 1
			ELSE excluded.next_nonce END
		RETURNING next_nonce - 1`, c, addr, chainNonce+1)
	return n, err
}

// ClaimSweeps implements store.InvoiceStore.
func (s *Store) ClaimSweeps(ctx context.Context, now time.Time, lease time.Duration, n int) ([]store.Invoice, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var invs []store.Invoice
	err = s.sel(ctx, &invs, `
		UPDATE invoices SET sweep_locked_until = ?
		WHERE id IN (
			SELECT id FROM invoices
			WHERE sweep_status IN ('QUEUED', 'FUNDING', 'SENT') AND chain_id = ?
			  AND (sweep_next_attempt_at IS NULL OR sweep_next_attempt_at <= ?)
			  AND (sweep_locked_until IS NULL OR sweep_locked_until <= ?)
			ORDER BY id LIMIT ?`+s.d.SkipLocked+`)
		RETURNING `+invoiceColumns, now.Add(lease), c, now, now, limit(n, 10, 1000))
	sort.Slice(invs, func(i, j int) bool { return invs[i].ID < invs[j].ID })
	return invs, err
}
