package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jmoiron/sqlx"

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

// Prepared statements for the invoice hot path (authenticate, take the key,
// take an index, insert the invoice, complete the key).
//
// PostgreSQL parses and plans every unnamed statement lib/pq sends, and lib/pq
// spends an extra round trip describing it; a statement prepared once per
// connection skips both, which doubles what the database sustains for
// invoice creation. A statement is prepared on the pool in the background on
// its first use (so that a transaction never waits for a second connection
// while holding one), the calls before that run unprepared, and inside a
// transaction the prepared statement is bound to the transaction's
// connection. The statements live in the Store's query cache under their
// own key type, so they go away with the Store.
//
// TODO(lead): this belongs beside get/exec in sqlstore.go, for every query.

type preparedKey string

type namedPreparedKey string

// preparing marks a statement whose preparation is under way.
type preparing struct{}

const prepareTimeout = 30 * time.Second

// preparedStmt returns q prepared (bound to the transaction when s is in
// one), or nil when it is not prepared yet.
func (s *Store) preparedStmt(ctx context.Context, q string) *sqlx.Stmt {
	v, ok := s.qc.m.Load(preparedKey(q))
	if st, ready := v.(*sqlx.Stmt); ready {
		if s.tx != nil {
			return s.tx.StmtxContext(ctx, st)
		}
		return st
	}
	if !ok {
		if _, loaded := s.qc.m.LoadOrStore(preparedKey(q), preparing{}); !loaded {
			go s.prepare(preparedKey(q), func(ctx context.Context) (any, error) {
				return s.db.PreparexContext(ctx, s.qc.rebind(q))
			})
		}
	}
	return nil
}

func (s *Store) namedPreparedStmt(ctx context.Context, q string) *sqlx.NamedStmt {
	v, ok := s.qc.m.Load(namedPreparedKey(q))
	if st, ready := v.(*sqlx.NamedStmt); ready {
		if s.tx != nil {
			return s.tx.NamedStmtContext(ctx, st)
		}
		return st
	}
	if !ok {
		if _, loaded := s.qc.m.LoadOrStore(namedPreparedKey(q), preparing{}); !loaded {
			go s.prepare(namedPreparedKey(q), func(ctx context.Context) (any, error) {
				return s.db.PrepareNamedContext(ctx, q)
			})
		}
	}
	return nil
}

// prepare runs in the background; on failure the key is forgotten, so the
// next use tries again.
func (s *Store) prepare(key any, fn func(context.Context) (any, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), prepareTimeout)
	defer cancel()
	st, err := fn(ctx)
	if err != nil {
		s.qc.m.Delete(key)
		return
	}
	s.qc.m.Store(key, st)
}

// getPrepared is get through a prepared statement when there is one.
func (s *Store) getPrepared(ctx context.Context, dest any, q string, args ...any) error {
	if st := s.preparedStmt(ctx, q); st != nil {
		return s.wrap(st.GetContext(ctx, dest, args...))
	}
	return s.get(ctx, dest, q, args...)
}

// execPrepared is exec through a prepared statement when there is one.
func (s *Store) execPrepared(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := s.preparedStmt(ctx, q); st != nil {
		res, err := st.ExecContext(ctx, args...)
		return res, s.wrap(err)
	}
	return s.exec(ctx, q, args...)
}

// namedGetPrepared is namedGet through a prepared statement when there is
// one.
func (s *Store) namedGetPrepared(ctx context.Context, dest any, q string, arg any) error {
	if st := s.namedPreparedStmt(ctx, q); st != nil {
		return s.wrap(st.GetContext(ctx, dest, arg))
	}
	return s.namedGet(ctx, dest, q, arg)
}
