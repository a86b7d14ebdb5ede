package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/evmpay/evmpay/store"
)

const deliveryColumns = `id, event_id, merchant_id, invoice_id, event_type, status, delivered,
	response_status, attempt, last_attempt_at, next_attempt_at, last_error, locked_until,
	created_at, updated_at`

// CreateDelivery implements store.DeliveryStore.
func (s *Store) CreateDelivery(ctx context.Context, d *store.Delivery) error {
	return s.namedGet(ctx, &d.ID, `INSERT INTO webhook_deliveries (event_id, merchant_id, invoice_id,
			event_type, status, delivered, response_status, attempt, last_attempt_at, next_attempt_at,
			last_error, locked_until, created_at, updated_at)
		VALUES (:event_id, :merchant_id, :invoice_id, :event_type, :status, :delivered,
			:response_status, :attempt, :last_attempt_at, :next_attempt_at, :last_error,
			:locked_until, :created_at, :updated_at)
		RETURNING id`, d)
}

// GetDelivery implements store.DeliveryStore.
func (s *Store) GetDelivery(ctx context.Context, id int64) (store.Delivery, error) {
	var d store.Delivery
	err := s.get(ctx, &d, `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE id = ?`, id)
	return d, err
}

// UpdateDelivery implements store.DeliveryStore.
func (s *Store) UpdateDelivery(ctx context.Context, d store.Delivery) error {
	res, err := s.namedExec(ctx, `UPDATE webhook_deliveries SET status = :status,
			delivered = :delivered, response_status = :response_status, attempt = :attempt,
			last_attempt_at = :last_attempt_at, next_attempt_at = :next_attempt_at,
			last_error = :last_error, locked_until = :locked_until, updated_at = :updated_at
		WHERE id = :id`, d)
	if err != nil {
		return err
	}
	return mustAffect(res)
}

// ClaimDeliveries implements store.DeliveryStore.
//
// The innermost SELECT locks the Limit oldest due candidates (SKIP LOCKED
// on PostgreSQL; a window function cannot share a query level with FOR
// UPDATE), the middle one ranks them per merchant so that no merchant gets
// more than PerMerchant, and the UPDATE leases the survivors. A claim cut
// short by the cap returns fewer than Limit; the caller claims again with
// that merchant excluded.
func (s *Store) ClaimDeliveries(ctx context.Context, c store.DeliveryClaim) ([]store.Delivery, error) {
	n := limit(c.Limit, 100, 1000)
	per := n
	if c.PerMerchant > 0 && c.PerMerchant < n {
		per = c.PerMerchant
	}
	args := []any{c.Now.Add(c.Lease), c.Now, c.Now}
	cand := `SELECT id, merchant_id, next_attempt_at FROM webhook_deliveries
			WHERE status = 'PENDING' AND next_attempt_at <= ?
			  AND (locked_until IS NULL OR locked_until <= ?)`
	if len(c.ExcludeMerchants) > 0 {
		cand += ` AND merchant_id NOT IN (?)`
		args = append(args, c.ExcludeMerchants)
	}
	cand += ` ORDER BY next_attempt_at, id LIMIT ?` + s.d.SkipLocked
	args = append(args, n, per, n)
	var ds []store.Delivery
	err := s.selIn(ctx, &ds, `
		UPDATE webhook_deliveries SET locked_until = ?
		WHERE id IN (
			SELECT id FROM (
				SELECT id, next_attempt_at,
					ROW_NUMBER() OVER (PARTITION BY merchant_id ORDER BY next_attempt_at, id) AS rn
				FROM (`+cand+`) cand
			) ranked
			WHERE rn <= ? ORDER BY next_attempt_at, id LIMIT ?)
		RETURNING `+deliveryColumns, args...)
	sort.Slice(ds, func(i, j int) bool {
		a, b := ds[i].NextAttemptAt, ds[j].NextAttemptAt
		if a != nil && b != nil && !a.Equal(*b) {
			return a.Before(*b)
		}
		return ds[i].ID < ds[j].ID
	})
	return ds, err
}

// leaseLost is the error of a lease-fenced write whose lease is gone.
func leaseLost(id int64) error {
	return fmt.Errorf("%w: delivery %d is no longer leased by this claimer", store.ErrConflict, id)
}

// RenewDeliveryLease implements store.DeliveryStore.
func (s *Store) RenewDeliveryLease(ctx context.Context, id int64, held, until time.Time) (time.Time, error) {
	var got time.Time
	err := s.get(ctx, &got, `UPDATE webhook_deliveries SET locked_until = ?
		WHERE id = ? AND status = 'PENDING' AND locked_until = ? RETURNING locked_until`, until, id, held)
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, leaseLost(id)
	}
	return got, err
}

// ReleaseDeliveryLease implements store.DeliveryStore.
func (s *Store) ReleaseDeliveryLease(ctx context.Context, id int64, held time.Time) error {
	res, err := s.exec(ctx, `UPDATE webhook_deliveries SET locked_until = NULL
		WHERE id = ? AND status = 'PENDING' AND locked_until = ?`, id, held)
	if err != nil {
		return err
	}
	if errors.Is(mustAffect(res), store.ErrNotFound) {
		return leaseLost(id)
	}
	return nil
}

// RecordDeliveryAttempt implements store.DeliveryStore.
func (s *Store) RecordDeliveryAttempt(ctx context.Context, d store.Delivery, held time.Time) error {
	res, err := s.exec(ctx, `UPDATE webhook_deliveries SET status = ?, delivered = ?,
			response_status = ?, attempt = ?, last_attempt_at = ?, next_attempt_at = ?,
			last_error = ?, locked_until = NULL, updated_at = ?
		WHERE id = ? AND status = 'PENDING' AND locked_until = ?`,
		d.Status, d.Delivered, d.ResponseStatus, d.Attempt, d.LastAttemptAt, d.NextAttemptAt,
		d.LastError, d.UpdatedAt, d.ID, held)
	if err != nil {
		return err
	}
	if errors.Is(mustAffect(res), store.ErrNotFound) {
		return leaseLost(d.ID)
	}
	return nil
}

// DispatchEvents implements store.DeliveryStore.
func (s *Store) DispatchEvents(ctx context.Context, now, due time.Time, n int) (int, error) {
	var count int
	err := s.withTx(ctx, func(t *Store) error {
		var evs []struct {
			ID         int64  `db:"id"`
			MerchantID int64  `db:"merchant_id"`
			InvoiceID  int64  `db:"invoice_id"`
			Type       string `db:"type"`
		}
		if err := t.sel(ctx, &evs, `SELECT id, merchant_id, invoice_id, type FROM events
			WHERE dispatched_at IS NULL ORDER BY id LIMIT ?`+t.d.SkipLocked, limit(n, 100, 1000)); err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		var (
			q    strings.Builder
			args = make([]any, 0, 7*len(evs))
			ids  = make([]int64, len(evs))
		)
		q.WriteString(`INSERT INTO webhook_deliveries (event_id, merchant_id, invoice_id, event_type,
			status, delivered, attempt, last_error, next_attempt_at, created_at, updated_at) VALUES `)
		for i, e := range evs {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(`(?, ?, ?, ?, 'PENDING', FALSE, 0, '', ?, ?, ?)`)
			args = append(args, e.ID, e.MerchantID, e.InvoiceID, e.Type, due, now, now)
			ids[i] = e.ID
		}
		q.WriteString(` ON CONFLICT (event_id) DO NOTHING`)
		if _, err := t.exec(ctx, q.String(), args...); err != nil {
			return err
		}
		if _, err := t.execIn(ctx, `UPDATE events SET dispatched_at = ? WHERE id IN (?)`, now, ids); err != nil {
			return err
		}
		count = len(evs)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return count, nil
}

// ReplayDelivery implements store.DeliveryStore.
func (s *Store) ReplayDelivery(ctx context.Context, merchantID, id int64, now time.Time) (store.Delivery, error) {
	var d store.Delivery
	err := s.get(ctx, &d, `UPDATE webhook_deliveries SET status = 'PENDING', delivered = ?, attempt = 0,
			next_attempt_at = ?, locked_until = NULL, updated_at = ?
		WHERE id = ? AND merchant_id = ? AND status IN ('FAILED', 'DELIVERED')
		RETURNING `+deliveryColumns, false, now, now, id, merchantID)
	if !errors.Is(err, store.ErrNotFound) {
		return d, err
	}
	cur, err := s.GetDelivery(ctx, id)
	if err != nil {
		return store.Delivery{}, err
	}
	if cur.MerchantID != merchantID {
		return store.Delivery{}, store.ErrNotFound
	}
	return store.Delivery{}, fmt.Errorf("%w: delivery %d is %s", store.ErrConflict, id, cur.Status)
}

// ReplayFailedDeliveries implements store.DeliveryStore.
func (s *Store) ReplayFailedDeliveries(ctx context.Context, merchantID int64, since, now time.Time) (int64, error) {
	res, err := s.exec(ctx, `UPDATE webhook_deliveries SET status = 'PENDING', delivered = ?, attempt = 0,
			next_attempt_at = ?, locked_until = NULL, updated_at = ?
		WHERE merchant_id = ? AND status = 'FAILED' AND created_at >= ?`, false, now, now, merchantID, since)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// ListDeliveries implements store.DeliveryStore.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]store.Delivery, error) {
	var (
		where []string
		args  []any
	)
	if f.MerchantID != 0 {
		where = append(where, "merchant_id = ?")
		args = append(args, f.MerchantID)
	}
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, f.Status)
	}
	if !f.Since.IsZero() {
		where = append(where, "created_at >= ?")
		args = append(args, f.Since)
	}
	if f.BeforeID > 0 {
		where = append(where, "id < ?")
		args = append(args, f.BeforeID)
	}
	q := `SELECT ` + deliveryColumns + ` FROM webhook_deliveries`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit(f.Limit, 100, 1000))
	var ds []store.Delivery
	err := s.sel(ctx, &ds, q, args...)
	return ds, err
}

// CountDeliveries implements store.DeliveryStore.
func (s *Store) CountDeliveries(ctx context.Context, status string, minAttempt int) (int64, error) {
	var n int64
	err := s.get(ctx, &n, `SELECT COUNT(*) FROM webhook_deliveries WHERE status = ? AND attempt >= ?`,
		status, minAttempt)
	return n, err
}

// maxAttemptBatch caps the attempts written by one statement (PostgreSQL
// takes at most 65,535 parameters; each attempt has 10).
const maxAttemptBatch = 500

// RecordDeliveryAttempts implements store.DeliveryStore.
//
// On PostgreSQL each batch is one UPDATE … FROM (VALUES …) fenced by the
// held lease, RETURNING the ids it changed; elsewhere it is the single-row
// UPDATE once per attempt in one transaction.
func (s *Store) RecordDeliveryAttempts(ctx context.Context, as []store.DeliveryAttempt) ([]bool, error) {
	ok := make([]bool, len(as))
	if len(as) == 0 {
		return ok, nil
	}
	err := s.withTx(ctx, func(t *Store) error {
		for from := 0; from < len(as); from += maxAttemptBatch {
			to := min(from+maxAttemptBatch, len(as))
			if err := t.recordAttempts(ctx, as[from:to], ok[from:to]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ok, nil
}

// recordAttempts writes one batch and sets ok[i] for each attempt written.
func (s *Store) recordAttempts(ctx context.Context, as []store.DeliveryAttempt, ok []bool) error {
	if s.d.Name != "postgres" {
		for i, a := range as {
			err := s.RecordDeliveryAttempt(ctx, a.Delivery, a.Held)
			switch {
			case err == nil:
				ok[i] = true
			case !errors.Is(err, store.ErrConflict):
				return err
			}
		}
		return nil
	}
	var (
		q    strings.Builder
		args = make([]any, 0, 10*len(as))
	)
	q.WriteString(`UPDATE webhook_deliveries AS w SET status = v.status, delivered = v.delivered,
			response_status = v.response_status, attempt = v.attempt, last_attempt_at = v.last_attempt_at,
			next_attempt_at = v.next_attempt_at, last_error = v.last_error, locked_until = NULL,
			updated_at = v.updated_at
		FROM (VALUES `)
	for i, a := range as {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(`(?::bigint, ?::text, ?::boolean, ?::integer, ?::integer, ?::timestamptz,
			?::timestamptz, ?::text, ?::timestamptz, ?::timestamptz)`)
		d := a.Delivery
		args = append(args, d.ID, d.Status, d.Delivered, d.ResponseStatus, d.Attempt, d.LastAttemptAt,
			d.NextAttemptAt, d.LastError, d.UpdatedAt, a.Held)
	}
	q.WriteString(`) AS v (id, status, delivered, response_status, attempt, last_attempt_at,
			next_attempt_at, last_error, updated_at, held)
		WHERE w.id = v.id AND w.status = 'PENDING' AND w.locked_until = v.held
		RETURNING w.id`)
	var ids []int64
	// Rebound here, not through the query cache: the text varies with the
	// batch size.
	if err := sqlx.SelectContext(ctx, s.q, &ids, sqlx.Rebind(s.d.BindType, q.String()), args...); err != nil {
		return s.wrap(err)
	}
	done := make(map[int64]bool, len(ids))
	for _, id := range ids {
		done[id] = true
	}
	for i, a := range as {
		ok[i] = done[a.Delivery.ID]
	}
	return nil
}
