package store

import (
	"context"
	"time"
)

// EventStore stores outbox events.
type EventStore interface {
	// InsertEvent inserts e and sets e.ID.
	InsertEvent(ctx context.Context, e *Event) error
	GetEvent(ctx context.Context, id int64) (Event, error)
	ListEventsByInvoice(ctx context.Context, invoiceID int64) ([]Event, error)
	// ClaimUndispatchedEvents returns up to limit events not yet dispatched,
	// oldest first, locking them (SKIP LOCKED on PostgreSQL) until the
	// transaction ends. Use inside InTx together with MarkEventDispatched.
	ClaimUndispatchedEvents(ctx context.Context, limit int) ([]Event, error)
	MarkEventDispatched(ctx context.Context, id int64, at time.Time) error
}

// DeliveryFilter selects deliveries for ListDeliveries, newest first.
type DeliveryFilter struct {
	MerchantID int64
	Status     string    // empty: any
	Since      time.Time // created at or after; zero: any
	BeforeID   int64
	Limit      int // defaults to 100
}

// DeliveryStore stores webhook deliveries.
type DeliveryStore interface {
	// CreateDelivery inserts d and sets d.ID; ErrConflict if the event
	// already has a delivery.
	CreateDelivery(ctx context.Context, d *Delivery) error
	GetDelivery(ctx context.Context, id int64) (Delivery, error)
	// UpdateDelivery writes the attempt fields of d.
	UpdateDelivery(ctx context.Context, d Delivery) error
	// ClaimDueDeliveries leases up to limit PENDING deliveries due at now
	// (next_attempt_at ≤ now, no live lease) until now+lease. Concurrent
	// callers never get the same delivery.
	ClaimDueDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Delivery, error)
	ListDeliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error)
	// CountDeliveries returns how many deliveries have the status and at
	// least minAttempt attempts.
	CountDeliveries(ctx context.Context, status string, minAttempt int) (int64, error)
}
