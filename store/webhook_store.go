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
	// GetEvents returns the events with the given ids that exist, by id.
	GetEvents(ctx context.Context, ids []int64) ([]Event, error)
	ListEventsByInvoice(ctx context.Context, invoiceID int64) ([]Event, error)
}

// DeliveryFilter selects deliveries for ListDeliveries, newest first.
type DeliveryFilter struct {
	MerchantID int64
	Status     string    // empty: any
	Since      time.Time // created at or after; zero: any
	BeforeID   int64
	Limit      int // defaults to 100
}

// DeliveryClaim says which due deliveries ClaimDeliveries may lease.
type DeliveryClaim struct {
	// Now is the claimer's clock: deliveries with next_attempt_at ≤ Now and
	// no live lease are due.
	Now time.Time
	// Lease is how long the claimed deliveries stay leased (locked_until =
	// Now + Lease).
	Lease time.Duration
	// Limit caps the deliveries claimed; defaults to 100.
	Limit int
	// PerMerchant, when positive, caps the deliveries claimed for any one
	// merchant, so one merchant's backlog cannot fill a claim.
	PerMerchant int
	// ExcludeMerchants lists merchants whose deliveries are not claimed
	// (the claimer has no room for them).
	ExcludeMerchants []int64
}

// DeliveryAttempt is one attempt for RecordDeliveryAttempts: the
// delivery's new attempt fields and the lease its claimer holds.
type DeliveryAttempt struct {
	Delivery Delivery
	Held     time.Time
}

// DeliveryStore stores webhook deliveries.
//
// Work on a delivery is leased: ClaimDeliveries sets locked_until, and the
// claimer then renews, releases or records an attempt only while the row
// still holds that exact lease (held), so a claimer whose lease expired and
// was taken over cannot overwrite the new holder's work (ErrConflict).
type DeliveryStore interface {
	// CreateDelivery inserts d and sets d.ID; ErrConflict if the event
	// already has a delivery.
	CreateDelivery(ctx context.Context, d *Delivery) error
	GetDelivery(ctx context.Context, id int64) (Delivery, error)
	// UpdateDelivery writes the attempt fields of d.
	UpdateDelivery(ctx context.Context, d Delivery) error
	// ClaimDeliveries is ClaimDueDeliveries with a per-merchant cap and
	// merchants to skip. Deliveries come oldest due first; concurrent
	// callers never get the same delivery (SKIP LOCKED on PostgreSQL).
	ClaimDeliveries(ctx context.Context, c DeliveryClaim) ([]Delivery, error)
	// ClaimDeliveriesWithEvents claims as ClaimDeliveries does and returns
	// each delivery with its event and merchant as they are at the claim:
	// everything an attempt needs, in one statement on PostgreSQL.
	ClaimDeliveriesWithEvents(ctx context.Context, c DeliveryClaim) ([]ClaimedDelivery, error)
	// RenewDeliveryLease moves the lease of a PENDING delivery still leased
	// until held to until and returns the stored value. ErrConflict when
	// the lease is no longer held.
	RenewDeliveryLease(ctx context.Context, id int64, held, until time.Time) (time.Time, error)
	// ReleaseDeliveryLease clears the lease of a PENDING delivery still
	// leased until held, so any claimer may take it at once. ErrConflict
	// when the lease is no longer held.
	ReleaseDeliveryLease(ctx context.Context, id int64, held time.Time) error
	// RecordDeliveryAttempt writes the attempt fields of d (status,
	// delivered, response_status, attempt, last_attempt_at,
	// next_attempt_at, last_error, updated_at) and clears the lease, if the
	// delivery is PENDING and still leased until held. ErrConflict when the
	// lease is no longer held.
	RecordDeliveryAttempt(ctx context.Context, d Delivery, held time.Time) error
	// RecordDeliveryAttempts does what RecordDeliveryAttempt does for each
	// attempt, all in one transaction (one statement on PostgreSQL), and
	// reports for each whether it was recorded: false when that delivery
	// is no longer PENDING and leased until its Held (it is left
	// untouched; the others are still recorded). On an error nothing is
	// recorded.
	RecordDeliveryAttempts(ctx context.Context, as []DeliveryAttempt) ([]bool, error)
	// DispatchEvents turns up to limit undispatched events, oldest first,
	// into PENDING deliveries created at now and due at due, and marks the
	// events dispatched at now, in one transaction. Concurrent callers skip
	// each other's events. It returns how many events it dispatched.
	DispatchEvents(ctx context.Context, now, due time.Time, limit int) (int, error)
	// ReplayDelivery starts a new run of a FAILED or DELIVERED delivery of
	// the merchant: PENDING, attempt 0, due at now, unleased. ErrNotFound
	// when the delivery does not exist or belongs to another merchant;
	// ErrConflict when it is PENDING.
	ReplayDelivery(ctx context.Context, merchantID, id int64, now time.Time) (Delivery, error)
	// ReplayFailedDeliveries does what ReplayDelivery does to every FAILED
	// delivery of the merchant created at or after since, and returns how
	// many it replayed.
	ReplayFailedDeliveries(ctx context.Context, merchantID int64, since, now time.Time) (int64, error)
	ListDeliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error)
	// CountDeliveries returns how many deliveries have the status and at
	// least minAttempt attempts.
	CountDeliveries(ctx context.Context, status string, minAttempt int) (int64, error)
}
