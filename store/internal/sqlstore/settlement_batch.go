package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/evmpay/evmpay/store"
)

// Settlement writes a block's payments, invoice changes and events in a
// handful of statements instead of a few per invoice: at 50 invoices a
// block, round trips are most of its cost.

var (
	paymentInsertColumns = []string{"invoice_id", "tx_hash", "log_index", "block_number", "block_hash",
		"from_address", "amount_wei", "late", "created_at", "token_address", "wrong_asset"}
	eventInsertColumns = []string{"type", "merchant_id", "invoice_id", "data", "created_at"}
)

// InsertPayments implements store.SettlementStore.
func (s *Store) InsertPayments(ctx context.Context, ps []store.Payment) error {
	if len(ps) == 0 {
		return nil
	}
	rows := make([][]any, len(ps))
	for i, p := range ps {
		rows[i] = []any{p.InvoiceID, p.TxHash, p.LogIndex, p.BlockNumber, p.BlockHash, p.From, p.AmountWei,
			p.Late, p.CreatedAt, p.Token, p.WrongAsset}
	}
	return s.withTx(ctx, func(t *Store) error { return t.bulkInsert(ctx, "payments", paymentInsertColumns, rows) })
}

// InsertEvents implements store.SettlementStore.
func (s *Store) InsertEvents(ctx context.Context, evs []store.Event) error {
	if len(evs) == 0 {
		return nil
	}
	rows := make([][]any, len(evs))
	for i, e := range evs {
		rows[i] = []any{e.Type, e.MerchantID, e.InvoiceID, e.Data, e.CreatedAt}
	}
	return s.withTx(ctx, func(t *Store) error { return t.bulkInsert(ctx, "events", eventInsertColumns, rows) })
}

// stateColumns are the invoice columns settlement writes, with their
// PostgreSQL types (for the VALUES list of the bulk update).
var stateColumns = []struct{ name, pgType string }{
	{"status", "text"}, {"paid_wei", "numeric"}, {"underpaid", "boolean"}, {"overpaid", "boolean"},
	{"paid_late", "boolean"}, {"needs_attention", "boolean"}, {"paid_at", "timestamptz"},
	{"confirmed_at", "timestamptz"}, {"sweep_status", "text"}, {"updated_at", "timestamptz"},
}

func stateValues(inv *store.Invoice) []any {
	return []any{inv.Status, inv.PaidWei, inv.Underpaid, inv.Overpaid, inv.PaidLate, inv.NeedsAttention,
		inv.PaidAt, inv.ConfirmedAt, inv.SweepStatus, inv.UpdatedAt}
}

// UpdateInvoiceStates implements store.SettlementStore: one
// UPDATE … FROM (VALUES …) on PostgreSQL, one UPDATE per invoice on SQLite
// (in process, where a statement costs no round trip).
func (s *Store) UpdateInvoiceStates(ctx context.Context, invs []*store.Invoice) error {
	if len(invs) == 0 {
		return nil
	}
	var sets []string
	for _, c := range stateColumns {
		sets = append(sets, fmt.Sprintf("%s = v.%s", c.name, c.name))
	}
	if s.d.Name != "postgres" {
		return s.withTx(ctx, func(t *Store) error {
			var one []string
			for _, c := range stateColumns {
				one = append(one, c.name+" = ?")
			}
			q := `UPDATE invoices SET ` + strings.Join(one, ", ") + `, version = version + 1
				WHERE id = ? AND version = ?`
			for _, inv := range invs {
				res, err := t.exec(ctx, q, append(stateValues(inv), inv.ID, inv.Version)...)
				if err != nil {
					return err
				}
				if n, err := res.RowsAffected(); err != nil {
					return err
				} else if n != 1 {
					return fmt.Errorf("%w: invoice %d changed since it was read (version %d)", store.ErrConflict, inv.ID, inv.Version)
				}
			}
			bumpVersions(invs)
			return nil
		})
	}
	for len(invs) > 0 {
		// PostgreSQL takes at most 65535 parameters a statement.
		chunk := invs[:min(len(invs), 1000)]
		invs = invs[len(chunk):]
		if err := s.updateStatesPG(ctx, chunk, sets); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) updateStatesPG(ctx context.Context, invs []*store.Invoice, sets []string) error {
	var (
		rows  []string
		args  []any
		names = []string{"id", "version"}
	)
	for _, c := range stateColumns {
		names = append(names, c.name)
	}
	for i, inv := range invs {
		vals := append([]any{inv.ID, inv.Version}, stateValues(inv)...)
		ph := make([]string, len(vals))
		for j := range vals {
			ph[j] = "?"
			if i == 0 { // the first row types the columns
				switch {
				case j < 2:
					ph[j] = "?::bigint"
				default:
					ph[j] = "?::" + stateColumns[j-2].pgType
				}
			}
		}
		rows = append(rows, "("+strings.Join(ph, ", ")+")")
		args = append(args, vals...)
	}
	q := `UPDATE invoices AS i SET ` + strings.Join(sets, ", ") + `, version = i.version + 1
		FROM (VALUES ` + strings.Join(rows, ", ") + `) AS v (` + strings.Join(names, ", ") + `)
		WHERE i.id = v.id AND i.version = v.version`
	// The text depends on the row count: rebound here, not cached.
	res, err := s.q.ExecContext(ctx, sqlx.Rebind(s.d.BindType, q), args...)
	if err != nil {
		return s.wrap(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != int64(len(invs)) {
		return fmt.Errorf("%w: %d of %d invoices changed since they were read", store.ErrConflict, int64(len(invs))-n, len(invs))
	}
	bumpVersions(invs)
	return nil
}

func bumpVersions(invs []*store.Invoice) {
	for _, inv := range invs {
		inv.Version++
	}
}
