package store

import (
	"context"
)

// PaymentStore stores payments matched to invoices.
type PaymentStore interface {
	// InsertPayment inserts p and sets p.ID. ErrConflict when (tx hash, log
	// index) is already recorded.
	InsertPayment(ctx context.Context, p *Payment) error
	ListPaymentsByInvoice(ctx context.Context, invoiceID int64) ([]Payment, error)
	// DeletePaymentsFromBlock removes the payments in blocks ≥ number (a
	// reorg) and returns them.
	DeletePaymentsFromBlock(ctx context.Context, number uint64) ([]Payment, error)
}
