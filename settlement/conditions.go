package settlement

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/evmpay/evmpay/store"
)

// Ages after which the observable conditions report an invoice.
const (
	// StalePaidPendingAfter: a paid invoice still PENDING this long after
	// its payment was indexed means settlement lags (DESIGN.md §1 limits).
	StalePaidPendingAfter = 5 * time.Minute
	// UnsweptConfirmedAfter: a CONFIRMED invoice without a sweep
	// transaction this long after its confirmation means the sweep lags.
	UnsweptConfirmedAfter = 10 * time.Minute
)

// conditionLimit caps how many invoices each condition lists.
const conditionLimit = 100

// ConditionStore is what the condition checks read. store.Store satisfies
// it.
type ConditionStore interface {
	ListPendingInvoiceTxs(ctx context.Context, indexedBefore time.Time, limit int) ([]store.PendingInvoiceTx, error)
	ListUnsweptConfirmed(ctx context.Context, confirmedBefore time.Time, limit int) ([]store.Invoice, error)
	GetInvoice(ctx context.Context, id int64) (store.Invoice, error)
}

var _ ConditionStore = store.Store(nil)

// Conditions are the observable signs that money is not moving as it
// should. Each list holds at most 100 invoices, oldest first; empty lists
// mean healthy.
type Conditions struct {
	// StalePaidPending are invoices still PENDING although indexed
	// transactions to their deposit address, indexed at least
	// StalePaidPendingAfter ago, add up to their amount.
	StalePaidPending []store.Invoice
	// UnsweptConfirmed are invoices CONFIRMED at least
	// UnsweptConfirmedAfter ago that have no sweep transaction.
	UnsweptConfirmed []store.Invoice
}

// Healthy reports whether no condition holds.
func (c Conditions) Healthy() bool {
	return len(c.StalePaidPending) == 0 && len(c.UnsweptConfirmed) == 0
}

// CheckConditions evaluates both conditions at now, with the default ages.
// Hosts expose the result (a health endpoint, metrics, alerts).
func CheckConditions(ctx context.Context, st ConditionStore, now time.Time) (Conditions, error) {
	stale, err := StalePaidPending(ctx, st, now, StalePaidPendingAfter)
	if err != nil {
		return Conditions{}, err
	}
	unswept, err := UnsweptConfirmed(ctx, st, now, UnsweptConfirmedAfter)
	if err != nil {
		return Conditions{}, err
	}
	return Conditions{StalePaidPending: stale, UnsweptConfirmed: unswept}, nil
}

// StalePaidPending returns the PENDING invoices whose indexed payments,
// counting only transactions in blocks indexed at or before now − age,
// add up to at least their amount: settlement should have marked them
// PAID. Sums are exact (store.Amount), done here rather than in SQL.
func StalePaidPending(ctx context.Context, st ConditionStore, now time.Time, age time.Duration) ([]store.Invoice, error) {
	rows, err := st.ListPendingInvoiceTxs(ctx, now.Add(-age), 0)
	if err != nil {
		return nil, fmt.Errorf("settlement: stale paid invoices: %w", err)
	}
	type total struct {
		amount, sum store.Amount
	}
	var (
		order  []int64
		totals = map[int64]*total{}
	)
	for _, r := range rows {
		t := totals[r.InvoiceID]
		if t == nil {
			t = &total{amount: r.AmountWei}
			totals[r.InvoiceID] = t
			order = append(order, r.InvoiceID)
		}
		if sum, ok := t.sum.Add(r.ValueWei); ok {
			t.sum = sum
		} else {
			t.sum = maxAmount
		}
	}
	var out []store.Invoice
	for _, id := range order {
		t := totals[id]
		if t.sum.IsZero() || t.sum.Cmp(t.amount) < 0 {
			continue
		}
		inv, err := st.GetInvoice(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("settlement: stale paid invoices: %w", err)
		}
		if inv.Status != store.StatusPending {
			continue // settled meanwhile
		}
		out = append(out, inv)
		if len(out) == conditionLimit {
			break
		}
	}
	return out, nil
}

// UnsweptConfirmed returns the invoices CONFIRMED at or before now − age
// that have no sweep transaction yet.
func UnsweptConfirmed(ctx context.Context, st ConditionStore, now time.Time, age time.Duration) ([]store.Invoice, error) {
	invs, err := st.ListUnsweptConfirmed(ctx, now.Add(-age), conditionLimit)
	if err != nil {
		return nil, fmt.Errorf("settlement: unswept confirmed invoices: %w", err)
	}
	return invs, nil
}
