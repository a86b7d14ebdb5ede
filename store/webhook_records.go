package store

import (
	"time"
)

// Event types emitted by state transitions (the transactional outbox).
const (
	EventInvoicePaid        = "invoice.paid"
	EventInvoiceConfirmed   = "invoice.confirmed"
	EventInvoiceSettled     = "invoice.settled"
	EventInvoiceExpired     = "invoice.expired"
	EventInvoiceUnderpaid   = "invoice.underpaid"
	EventInvoiceReverted    = "invoice.reverted"
	EventInvoiceSweepFailed = "invoice.sweep_failed"

	// EventSettlementAddressChanged: the merchant's settlement address —
	// where every sweep sends its money — was changed (by the merchant's
	// owner). Its data is store/api's SettlementAddressChange; it has no
	// invoice (0).
	EventSettlementAddressChanged = "merchant.settlement_address_changed"
)

// EventTypes returns every event type, in the order merchants meet them:
// what a webhook's type can be (the invoice's, then the refund's and the
// payout's, OutboundEventTypes).
func EventTypes() []string {
	return append([]string{
		EventInvoiceUnderpaid, EventInvoicePaid, EventInvoiceOverpaid, EventInvoiceWrongAsset, EventInvoiceWrongNetwork,
		EventInvoiceConfirmed, EventInvoiceSettled, EventInvoiceExpired, EventInvoiceLatePayment,
		EventInvoiceReverted, EventInvoiceSweepFailed,
	}, append(OutboundEventTypes(), EventSettlementAddressChanged)...)
}

// Event is an outbox entry written in the same database transaction as the
// state change it reports. Data is a JSON snapshot of the invoice at that
// moment.
type Event struct {
	ID           int64      `db:"id" json:"id"`
	Type         string     `db:"type" json:"type"`
	MerchantID   int64      `db:"merchant_id" json:"merchant_id"`
	InvoiceID    int64      `db:"invoice_id" json:"invoice_id"`
	Data         RawJSON    `db:"data" json:"data"`
	CreatedAt    time.Time  `db:"created_at" json:"created_at"`
	DispatchedAt *time.Time `db:"dispatched_at" json:"-"`
}

// Delivery statuses.
const (
	DeliveryPending   = "PENDING"
	DeliveryDelivered = "DELIVERED"
	DeliveryFailed    = "FAILED"
)

// Delivery is the webhook delivery of one event to its merchant.
type Delivery struct {
	ID         int64  `db:"id" json:"id"`
	EventID    int64  `db:"event_id" json:"event_id"`
	MerchantID int64  `db:"merchant_id" json:"merchant_id"`
	InvoiceID  int64  `db:"invoice_id" json:"invoice_id"`
	EventType  string `db:"event_type" json:"event_type"`
	Status     string `db:"status" json:"status"`
	Delivered  bool   `db:"delivered" json:"delivered"`
	// ResponseStatus is nil on a timeout or network error.
	ResponseStatus *int       `db:"response_status" json:"response_status"`
	Attempt        int        `db:"attempt" json:"attempt"`
	LastAttemptAt  *time.Time `db:"last_attempt_at" json:"last_attempt_at"`
	NextAttemptAt  *time.Time `db:"next_attempt_at" json:"next_attempt_at"`
	LastError      string     `db:"last_error" json:"last_error"`
	LockedUntil    *time.Time `db:"locked_until" json:"-"`
	CreatedAt      time.Time  `db:"created_at" json:"created_at"`
	UpdatedAt      time.Time  `db:"updated_at" json:"updated_at"`
}

// ClaimedDelivery is a delivery leased by ClaimDeliveriesWithEvents, with
// what an attempt at it needs.
type ClaimedDelivery struct {
	Delivery
	// Event is the delivery's event; nil when it no longer exists.
	Event *Event
	// Merchant is the delivery's merchant; nil when it no longer exists.
	Merchant *Merchant
}
