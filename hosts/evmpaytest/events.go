package evmpaytest

import (
	"context"
	"strings"

	"github.com/evmpay/evmpay/store"
)

// Events returns the events written about invoice invoiceID (0: the
// merchants' own and payouts'), in the order they were written, whose type
// starts with prefix ("" for all, "invoice.", "refund.", …).
func (e *Env) Events(invoiceID int64, prefix string) []store.Event {
	e.tb.Helper()
	evs, err := e.Store.ListEventsByInvoice(context.Background(), invoiceID)
	must(e.tb, err)
	var out []store.Event
	for _, ev := range evs {
		if strings.HasPrefix(ev.Type, prefix) {
			out = append(out, ev)
		}
	}
	return out
}

// RequireEvents fails the test unless the events about invoice invoiceID
// whose type starts with the first type's kind ("invoice.", "refund.", …)
// are exactly types, in this order — what rivertest's RequireInserted is
// to jobs: the state changes a test caused, each with its event, written
// in its transaction.
func (e *Env) RequireEvents(invoiceID int64, types ...string) []store.Event {
	e.tb.Helper()
	prefix := ""
	if len(types) > 0 {
		if i := strings.IndexByte(types[0], '.'); i >= 0 {
			prefix = types[0][:i+1]
		}
	}
	evs := e.Events(invoiceID, prefix)
	got := make([]string, len(evs))
	for i, ev := range evs {
		got[i] = ev.Type
	}
	if strings.Join(got, " ") != strings.Join(types, " ") {
		e.tb.Fatalf("evmpaytest: the %s events of invoice %d are %v, want %v", strings.TrimSuffix(prefix, "."), invoiceID, got, types)
	}
	return evs
}
