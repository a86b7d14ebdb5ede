package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

// invoiceColumns lists every column of invoices (and invoices_archive), in
// table order.
const invoiceColumns = `id, merchant_id, status, amount_wei, paid_wei, chain_id, deposit_address,
	derivation_index, payment_uri, order_id, description, metadata, lookup_token_hash,
	underpaid, overpaid, paid_late, needs_attention, expires_at, paid_at, confirmed_at,
	settled_at, created_at, updated_at, sweep_status, sweep_tx_hash, sweep_error, swept_wei,
	dust_wei, sweep_attempts, sweep_next_attempt_at, sweep_locked_until, version`

const selectInvoice = `SELECT ` + invoiceColumns + ` FROM invoices`

// NextDerivationIndex implements store.InvoiceStore.
func (s *Store) NextDerivationIndex(ctx context.Context) (uint32, error) {
	var next int64
	err := s.getPrepared(ctx, &next, `UPDATE counters SET value = value + 1
		WHERE name = 'derivation_index' RETURNING value - 1`)
	if err != nil {
		return 0, err
	}
	if next < 0 || next >= 1<<31 {
		return 0, fmt.Errorf("derivation index %d out of range [0, 2^31): the wallet is exhausted", next)
	}
	return uint32(next), nil
}

// CreateInvoice implements store.InvoiceStore.
func (s *Store) CreateInvoice(ctx context.Context, inv *store.Invoice) error {
	inv.Version = 1
	return s.namedGetPrepared(ctx, &inv.ID, `
		INSERT INTO invoices (merchant_id, status, amount_wei, paid_wei, chain_id, deposit_address,
			derivation_index, payment_uri, order_id, description, metadata, lookup_token_hash,
			underpaid, overpaid, paid_late, needs_attention, expires_at, paid_at, confirmed_at,
			settled_at, created_at, updated_at, sweep_status, sweep_tx_hash, sweep_error, swept_wei,
			dust_wei, sweep_attempts, sweep_next_attempt_at, sweep_locked_until, version)
		VALUES (:merchant_id, :status, :amount_wei, :paid_wei, :chain_id, :deposit_address,
			:derivation_index, :payment_uri, :order_id, :description, :metadata, :lookup_token_hash,
			:underpaid, :overpaid, :paid_late, :needs_attention, :expires_at, :paid_at, :confirmed_at,
			:settled_at, :created_at, :updated_at, :sweep_status, :sweep_tx_hash, :sweep_error, :swept_wei,
			:dust_wei, :sweep_attempts, :sweep_next_attempt_at, :sweep_locked_until, :version)
		RETURNING id`, inv)
}

// GetInvoice implements store.InvoiceStore.
func (s *Store) GetInvoice(ctx context.Context, id int64) (store.Invoice, error) {
	var inv store.Invoice
	err := s.getPrepared(ctx, &inv, selectInvoice+` WHERE id = ?`, id)
	return inv, err
}

// GetInvoiceForUpdate implements store.InvoiceStore.
func (s *Store) GetInvoiceForUpdate(ctx context.Context, id int64) (store.Invoice, error) {
	var inv store.Invoice
	err := s.get(ctx, &inv, selectInvoice+` WHERE id = ?`+s.d.ForUpdate, id)
	return inv, err
}

// GetInvoiceByLookupTokenHash implements store.InvoiceStore.
func (s *Store) GetInvoiceByLookupTokenHash(ctx context.Context, hash []byte) (store.Invoice, error) {
	var inv store.Invoice
	err := s.getPrepared(ctx, &inv, selectInvoice+` WHERE lookup_token_hash = ?`, hash)
	return inv, err
}

// ListInvoices implements store.InvoiceStore.
func (s *Store) ListInvoices(ctx context.Context, f store.InvoiceFilter) ([]store.Invoice, error) {
	var (
		where []string
		args  []any
	)
	if f.MerchantID != 0 {
		where = append(where, "merchant_id = ?")
		args = append(args, f.MerchantID)
	}
	if len(f.Statuses) > 0 {
		where = append(where, "status IN (?)")
		args = append(args, f.Statuses)
	}
	if !f.CreatedAfter.IsZero() {
		where = append(where, "created_at >= ?")
		args = append(args, f.CreatedAfter)
	}
	if !f.CreatedBefore.IsZero() {
		where = append(where, "created_at < ?")
		args = append(args, f.CreatedBefore)
	}
	if f.BeforeID > 0 {
		where = append(where, "id < ?")
		args = append(args, f.BeforeID)
	}
	q := selectInvoice
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit(f.Limit, 100, 1000))
	var invs []store.Invoice
	err := s.selIn(ctx, &invs, q, args...)
	return invs, err
}

// InvoicesByDepositAddress implements store.InvoiceStore.
func (s *Store) InvoicesByDepositAddress(ctx context.Context, addrs []common.Address) ([]store.Invoice, error) {
	if len(addrs) == 0 {
		return nil, nil
	}
	keys := make([][]byte, len(addrs))
	for i := range addrs {
		keys[i] = addrs[i].Bytes()
	}
	var invs []store.Invoice
	err := s.selIn(ctx, &invs, selectInvoice+` WHERE deposit_address IN (?) ORDER BY id`, keys)
	return invs, err
}

// UpdateInvoice implements store.InvoiceStore.
func (s *Store) UpdateInvoice(ctx context.Context, inv *store.Invoice) error {
	res, err := s.namedExec(ctx, `
		UPDATE invoices SET status = :status, paid_wei = :paid_wei, order_id = :order_id,
			description = :description, metadata = :metadata, underpaid = :underpaid,
			overpaid = :overpaid, paid_late = :paid_late, needs_attention = :needs_attention,
			expires_at = :expires_at, paid_at = :paid_at, confirmed_at = :confirmed_at,
			settled_at = :settled_at, updated_at = :updated_at, sweep_status = :sweep_status,
			sweep_tx_hash = :sweep_tx_hash, sweep_error = :sweep_error, swept_wei = :swept_wei,
			dust_wei = :dust_wei, sweep_attempts = :sweep_attempts,
			sweep_next_attempt_at = :sweep_next_attempt_at,
			sweep_locked_until = :sweep_locked_until, version = version + 1
		WHERE id = :id AND version = :version`, inv)
	if err != nil {
		return err
	}
	if err := mustAffect(res); err != nil {
		if _, gerr := s.GetInvoice(ctx, inv.ID); gerr != nil {
			return gerr
		}
		return fmt.Errorf("%w: invoice %d changed since it was read (version %d)", store.ErrConflict, inv.ID, inv.Version)
	}
	inv.Version++
	return nil
}

// ListExpiring implements store.InvoiceStore.
func (s *Store) ListExpiring(ctx context.Context, now time.Time, n int) ([]store.Invoice, error) {
	var invs []store.Invoice
	err := s.sel(ctx, &invs, selectInvoice+` WHERE status = 'PENDING' AND expires_at <= ?
		ORDER BY expires_at, id LIMIT ?`, now, limit(n, 100, 10000))
	return invs, err
}

// CountInvoicesByStatus implements store.InvoiceStore.
func (s *Store) CountInvoicesByStatus(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Status string `db:"status"`
		N      int64  `db:"n"`
	}
	if err := s.sel(ctx, &rows, `SELECT status, COUNT(*) AS n FROM invoices GROUP BY status`); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// ArchiveInvoices implements store.InvoiceStore. Only finished invoices
// (SETTLED, or EXPIRED without any payment) move: anything that may still
// see money stays where settlement and sweep look.
func (s *Store) ArchiveInvoices(ctx context.Context, cutoff time.Time, n int) (int, error) {
	moved := 0
	err := s.withTx(ctx, func(t *Store) error {
		var ids []int64
		err := t.sel(ctx, &ids, `SELECT id FROM invoices
			WHERE created_at < ? AND needs_attention = ?
			  AND (status = 'SETTLED' OR (status = 'EXPIRED' AND paid_wei = '0'))
			ORDER BY id LIMIT ?`+t.d.ForUpdate, cutoff, false, limit(n, 1000, 10000))
		if err != nil || len(ids) == 0 {
			return err
		}
		if _, err := t.execIn(ctx, `INSERT INTO invoices_archive (`+invoiceColumns+`)
			SELECT `+invoiceColumns+` FROM invoices WHERE id IN (?)`, ids); err != nil {
			return err
		}
		res, err := t.execIn(ctx, `DELETE FROM invoices WHERE id IN (?)`, ids)
		if err != nil {
			return err
		}
		if d, err := res.RowsAffected(); err != nil || d != int64(len(ids)) {
			return errors.Join(err, fmt.Errorf("archive: deleted %d of %d invoices", d, len(ids)))
		}
		moved = len(ids)
		return nil
	})
	return moved, err
}
