package sqlstore

import (
	"context"

	"github.com/evmpay/evmpay/store"
)

const eventColumns = `id, type, merchant_id, invoice_id, data, created_at, dispatched_at`

// InsertEvent implements store.EventStore.
func (s *Store) InsertEvent(ctx context.Context, e *store.Event) error {
	return s.namedGet(ctx, &e.ID, `INSERT INTO events (type, merchant_id, invoice_id, data, created_at, dispatched_at)
		VALUES (:type, :merchant_id, :invoice_id, :data, :created_at, :dispatched_at) RETURNING id`, e)
}

// GetEvent implements store.EventStore.
func (s *Store) GetEvent(ctx context.Context, id int64) (store.Event, error) {
	var e store.Event
	err := s.get(ctx, &e, `SELECT `+eventColumns+` FROM events WHERE id = ?`, id)
	return e, err
}

// ListEventsByInvoice implements store.EventStore.
func (s *Store) ListEventsByInvoice(ctx context.Context, invoiceID int64) ([]store.Event, error) {
	var es []store.Event
	err := s.sel(ctx, &es, `SELECT `+eventColumns+` FROM events WHERE invoice_id = ? ORDER BY id`, invoiceID)
	return es, err
}

// GetEvents implements store.EventStore.
func (s *Store) GetEvents(ctx context.Context, ids []int64) ([]store.Event, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var es []store.Event
	err := s.selIn(ctx, &es, `SELECT `+eventColumns+` FROM events WHERE id IN (?) ORDER BY id`, ids)
	return es, err
}
