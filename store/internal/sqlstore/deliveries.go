package sqlstore

import (
	"context"
	"sort"
	"strings"
	"time"

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

// ClaimDueDeliveries implements store.DeliveryStore.
func (s *Store) ClaimDueDeliveries(ctx context.Context, now time.Time, lease time.Duration, n int) ([]store.Delivery, error) {
	var ds []store.Delivery
	err := s.sel(ctx, &ds, `
		UPDATE webhook_deliveries SET locked_until = ?
		WHERE id IN (
			SELECT id FROM webhook_deliveries
			WHERE status = 'PENDING' AND next_attempt_at <= ?
			  AND (locked_until IS NULL OR locked_until <= ?)
			ORDER BY next_attempt_at, id LIMIT ?`+s.d.SkipLocked+`)
		RETURNING `+deliveryColumns, now.Add(lease), now, now, limit(n, 100, 1000))
	sort.Slice(ds, func(i, j int) bool { return ds[i].ID < ds[j].ID })
	return ds, err
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
