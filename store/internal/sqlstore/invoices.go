package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
)

// invoiceColumns lists every column of invoices (and invoices_archive), in
// table order.
const invoiceColumns = `id, merchant_id, status, amount_wei, paid_wei, chain_id, deposit_address,
	derivation_index, payment_uri, order_id, description, metadata, lookup_token_hash,
	underpaid, overpaid, paid_late, needs_attention, expires_at, paid_at, confirmed_at,
	settled_at, created_at, updated_at, sweep_status, sweep_tx_hash, sweep_error, swept_wei,
	dust_wei, sweep_attempts, sweep_next_attempt_at, sweep_locked_until, version,
	token_address, asset_symbol, asset_decimals, redirect_url, pricing, paid_value,
	late_valuation, sweep_asset`

const selectInvoice = `SELECT ` + invoiceColumns + ` FROM invoices`

// NextDerivationIndex implements store.InvoiceStore.
func (s *Store) NextDerivationIndex(ctx context.Context) (uint32, error) {
	var next int64
	err := s.getPrepared(ctx, &next, `UPDATE counters SET value = value + 1
		WHERE name = 'derivation_index' RETURNING value - 1`)
	if err != nil {
		return 0, err
	}
	if next < 0 || next >= 1<<31 {
		return 0, fmt.Errorf("derivation index %d out of range [0, 2^31): the wallet is exhausted", next)
	}
	return uint32(next), nil
}

// ReserveDerivationIndexes implements store.InvoiceStore.
func (s *Store) ReserveDerivationIndexes(ctx context.Context, n int) (uint32, error) {
	if n < 1 || n > maxReserve {
		return 0, fmt.Errorf("reserve %d derivation indexes: want 1 to %d", n, maxReserve)
	}
	var first int64
	err := s.getPrepared(ctx, &first, `UPDATE counters SET value = value + ?
		WHERE name = 'derivation_index' AND value + ? <= ? RETURNING value - ?`, n, n, int64(1)<<31, n)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("reserve %d derivation indexes: fewer are left below 2^31: the wallet is exhausted", n)
	}
	if err != nil {
		return 0, err
	}
	if first < 0 {
		return 0, fmt.Errorf("derivation index %d out of range [0, 2^31)", first)
	}
	return uint32(first), nil
}

// maxReserve bounds one reservation of derivation indexes (and so one batch
// of invoices) to something a wallet's gap scan can sensibly cover.
const maxReserve = 1 << 16

// invoiceInsertColumns is invoiceColumns without id.
const invoiceInsertColumns = `merchant_id, status, amount_wei, paid_wei, chain_id, deposit_address,
	derivation_index, payment_uri, order_id, description, metadata, lookup_token_hash,
	underpaid, overpaid, paid_late, needs_attention, expires_at, paid_at, confirmed_at,
	settled_at, created_at, updated_at, sweep_status, sweep_tx_hash, sweep_error, swept_wei,
	dust_wei, sweep_attempts, sweep_next_attempt_at, sweep_locked_until, version,
	token_address, asset_symbol, asset_decimals, redirect_url, pricing, paid_value,
	late_valuation, sweep_asset`

// invoiceInsertValues returns inv's values in invoiceInsertColumns order.
func invoiceInsertValues(inv *store.Invoice) []any {
	return []any{inv.MerchantID, inv.Status, inv.AmountWei, inv.PaidWei, inv.ChainID, inv.DepositAddress,
		inv.DerivationIndex, inv.PaymentURI, inv.OrderID, inv.Description, inv.Metadata, inv.LookupTokenHash,
		inv.Underpaid, inv.Overpaid, inv.PaidLate, inv.NeedsAttention, inv.ExpiresAt, inv.PaidAt, inv.ConfirmedAt,
		inv.SettledAt, inv.CreatedAt, inv.UpdatedAt, inv.SweepStatus, inv.SweepTxHash, inv.SweepError, inv.SweptWei,
		inv.DustWei, inv.SweepAttempts, inv.SweepNextAttemptAt, inv.SweepLockedUntil, inv.Version,
		inv.TokenAddress, inv.AssetSymbol, inv.AssetDecimals, inv.RedirectURL, inv.Pricing, inv.PaidValue,
		inv.LateValuation, inv.SweepAsset}
}

// CreateInvoice implements store.InvoiceStore.
func (s *Store) CreateInvoice(ctx context.Context, inv *store.Invoice) error {
	inv.Version = 1
	normalizeAsset(inv)
	return s.namedGetPrepared(ctx, &inv.ID, `
		INSERT INTO invoices (`+invoiceInsertColumns+`)
		VALUES (:merchant_id, :status, :amount_wei, :paid_wei, :chain_id, :deposit_address,
			:derivation_index, :payment_uri, :order_id, :description, :metadata, :lookup_token_hash,
			:underpaid, :overpaid, :paid_late, :needs_attention, :expires_at, :paid_at, :confirmed_at,
			:settled_at, :created_at, :updated_at, :sweep_status, :sweep_tx_hash, :sweep_error, :swept_wei,
			:dust_wei, :sweep_attempts, :sweep_next_attempt_at, :sweep_locked_until, :version,
			:token_address, :asset_symbol, :asset_decimals, :redirect_url, :pricing, :paid_value,
			:late_valuation, :sweep_asset)
		RETURNING id`, inv)
}

// normalizeAsset stores a native-coin invoice (no token, or the zero
// address) with a NULL token and NativeDecimals.
func normalizeAsset(inv *store.Invoice) {
	if !inv.IsToken() {
		inv.TokenAddress, inv.AssetDecimals = nil, store.NativeDecimals
	}
}

// insertChunk is how many invoices one INSERT writes: 39 parameters a row
// stays under SQLite's 32766 and PostgreSQL's 65535.
const insertChunk = 500

// preparedRows bounds the multi-row statements kept prepared: one text per
// row count up to it (the invoice API's batches are at most 64).
const preparedRows = 64

// CreateInvoices implements store.InvoiceStore: a multi-row INSERT …
// RETURNING, prepared per row count up to preparedRows.
func (s *Store) CreateInvoices(ctx context.Context, invs []*store.Invoice) error {
	if len(invs) == 0 {
		return nil
	}
	return s.withTx(ctx, func(t *Store) error {
		for len(invs) > 0 {
			chunk := invs[:min(len(invs), insertChunk)]
			invs = invs[len(chunk):]
			if err := t.insertInvoices(ctx, chunk); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) insertInvoices(ctx context.Context, invs []*store.Invoice) error {
	row := "(" + strings.Repeat("?, ", strings.Count(invoiceInsertColumns, ",")) + "?)"
	rows := make([]string, len(invs))
	args := make([]any, 0, len(invs)*(strings.Count(invoiceInsertColumns, ",")+1))
	byIndex := make(map[uint32]*store.Invoice, len(invs))
	for i, inv := range invs {
		inv.Version = 1
		normalizeAsset(inv)
		rows[i] = row
		args = append(args, invoiceInsertValues(inv)...)
		byIndex[inv.DerivationIndex] = inv
	}
	if len(byIndex) != len(invs) {
		return fmt.Errorf("%w: two invoices of one insert share a derivation index", store.ErrConflict)
	}
	q := `INSERT INTO invoices (` + invoiceInsertColumns + `) VALUES ` + strings.Join(rows, ", ") +
		` RETURNING id, derivation_index`
	var got []struct {
		ID    int64 `db:"id"`
		Index int64 `db:"derivation_index"`
	}
	var err error
	if len(invs) <= preparedRows {
		err = s.selPrepared(ctx, &got, q, args...)
	} else {
		err = s.sel(ctx, &got, q, args...)
	}
	if err != nil {
		return err
	}
	if len(got) != len(invs) {
		return fmt.Errorf("insert invoices: %d rows returned for %d", len(got), len(invs))
	}
	for _, r := range got {
		inv := byIndex[uint32(r.Index)]
		if inv == nil || r.Index < 0 {
			return fmt.Errorf("insert invoices: unexpected derivation index %d returned", r.Index)
		}
		inv.ID = r.ID
	}
	return nil
}

// GetInvoice implements store.InvoiceStore.
func (s *Store) GetInvoice(ctx context.Context, id int64) (store.Invoice, error) {
	var inv store.Invoice
	err := s.getPrepared(ctx, &inv, selectInvoice+` WHERE id = ?`, id)
	return inv, err
}

// GetInvoiceForUpdate implements store.InvoiceStore.
func (s *Store) GetInvoiceForUpdate(ctx context.Context, id int64) (store.Invoice, error) {
	var inv store.Invoice
	err := s.get(ctx, &inv, selectInvoice+` WHERE id = ?`+s.d.ForUpdate, id)
	return inv, err
}

// GetInvoiceByLookupTokenHash implements store.InvoiceStore.
func (s *Store) GetInvoiceByLookupTokenHash(ctx context.Context, hash []byte) (store.Invoice, error) {
	var inv store.Invoice
	err := s.getPrepared(ctx, &inv, selectInvoice+` WHERE lookup_token_hash = ?`, hash)
	return inv, err
}

// ListInvoices implements store.InvoiceStore as a deferred join: the
// page's ids first, each status's from one range of the narrowest index
// that holds them in id order (invoices_merchant_status, or
// invoices_merchant_id without a status; index-only), then the page's rows
// by primary key. Asked for whole rows directly, the planner walked
// invoices_pkey backward for a busy merchant and filtered: a page of
// SETTLED invoices read every newer invoice in another status first (23k
// rows, 25–32 ms at docs/scale.md's year when sweeps lagged). Several
// statuses are one range each, merged (a single scan cannot give them in
// id order: 18 ms → 1.4 ms for two statuses).
func (s *Store) ListInvoices(ctx context.Context, f store.InvoiceFilter) ([]store.Invoice, error) {
	var (
		where []string
		args  []any
	)
	if f.MerchantID != 0 {
		where = append(where, "merchant_id = ?")
		args = append(args, f.MerchantID)
	}
	if !f.CreatedAfter.IsZero() {
		where = append(where, "created_at >= ?")
		args = append(args, f.CreatedAfter)
	}
	if !f.CreatedBefore.IsZero() {
		where = append(where, "created_at < ?")
		args = append(args, f.CreatedBefore)
	}
	if f.BeforeID > 0 {
		where = append(where, "id < ?")
		args = append(args, f.BeforeID)
	}
	n := limit(f.Limit, 100, 1000)
	// page is the ids of one range, newest first, with its arguments.
	page := func(status string) (string, []any) {
		w, a := where, slices.Clone(args)
		if status != "" {
			w = append(slices.Clone(w), "status = ?")
			a = append(a, status)
		}
		q := "SELECT id FROM invoices"
		if len(w) > 0 {
			q += " WHERE " + strings.Join(w, " AND ")
		}
		return q + " ORDER BY id DESC LIMIT ?", append(a, n)
	}
	statuses := slices.Compact(slices.Sorted(slices.Values(f.Statuses)))
	var (
		ids     string
		idsArgs []any
	)
	switch len(statuses) {
	case 0:
		ids, idsArgs = page("")
	case 1:
		ids, idsArgs = page(statuses[0])
	default:
		arms := make([]string, len(statuses))
		for i, st := range statuses {
			q, a := page(st)
			arms[i] = "SELECT id FROM (" + q + ") s" + strconv.Itoa(i)
			idsArgs = append(idsArgs, a...)
		}
		ids = "SELECT id FROM (" + strings.Join(arms, " UNION ALL ") + ") u ORDER BY id DESC LIMIT ?"
		idsArgs = append(idsArgs, n)
	}
	var invs []store.Invoice
	err := s.sel(ctx, &invs, selectInvoice+" WHERE id IN ("+ids+") ORDER BY id DESC", idsArgs...)
	return invs, err
}

// UpdateInvoice implements store.InvoiceStore.
func (s *Store) UpdateInvoice(ctx context.Context, inv *store.Invoice) error {
	res, err := s.namedExec(ctx, `
		UPDATE invoices SET status = :status, paid_wei = :paid_wei, order_id = :order_id,
			description = :description, metadata = :metadata, underpaid = :underpaid,
			overpaid = :overpaid, paid_late = :paid_late, needs_attention = :needs_attention,
			expires_at = :expires_at, paid_at = :paid_at, confirmed_at = :confirmed_at,
			settled_at = :settled_at, updated_at = :updated_at, sweep_status = :sweep_status,
			sweep_tx_hash = :sweep_tx_hash, sweep_error = :sweep_error, swept_wei = :swept_wei,
			dust_wei = :dust_wei, sweep_attempts = :sweep_attempts,
			sweep_next_attempt_at = :sweep_next_attempt_at,
			sweep_locked_until = :sweep_locked_until, paid_value = :paid_value,
			late_valuation = :late_valuation, sweep_asset = :sweep_asset, version = version + 1
		WHERE id = :id AND version = :version`, inv)
	if err != nil {
		return err
	}
	if err := mustAffect(res); err != nil {
		if _, gerr := s.GetInvoice(ctx, inv.ID); gerr != nil {
			return gerr
		}
		return fmt.Errorf("%w: invoice %d changed since it was read (version %d)", store.ErrConflict, inv.ID, inv.Version)
	}
	inv.Version++
	return nil
}

// ListExpiring implements store.InvoiceStore.
// It walks invoices_expiring (PENDING by expires_at) and keeps the
// handle's chain's.
func (s *Store) ListExpiring(ctx context.Context, now time.Time, n int) ([]store.Invoice, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var invs []store.Invoice
	err = s.selPrepared(ctx, &invs, selectInvoice+` WHERE status = 'PENDING' AND expires_at <= ? AND chain_id = ?
		ORDER BY expires_at, id LIMIT ?`, now, c, limit(n, 100, 10000))
	return invs, err
}

// CountLiveInvoices implements store.InvoiceStore: one count per live
// status, each answered by that status's partial index (invoices_expiring,
// invoices_paid, invoices_confirmed), so the cost follows the invoices in
// flight, not the table (a GROUP BY over every status read all 10 million
// invoices of docs/scale.md's year on every metrics scrape: 0.3–0.8 s).
func (s *Store) CountLiveInvoices(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Status string `db:"status"`
		N      int64  `db:"n"`
	}
	err := s.sel(ctx, &rows, `SELECT 'PENDING' AS status, COUNT(*) AS n FROM invoices WHERE status = 'PENDING'
		UNION ALL SELECT 'PAID', COUNT(*) FROM invoices WHERE status = 'PAID'
		UNION ALL SELECT 'CONFIRMED', COUNT(*) FROM invoices WHERE status = 'CONFIRMED'`)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		if r.N > 0 {
			out[r.Status] = r.N
		}
	}
	return out, nil
}

// ArchiveInvoices implements store.InvoiceStore. Only finished invoices
// (SETTLED, or EXPIRED without any payment: nothing paid in its asset and
// not underpaid, which a fiat invoice paid in another quoted asset is)
// move: anything that may still see money stays where settlement and
// sweep look.
//
// The oldest go first, in created_at order: the scan is a range of
// invoices_created below the cutoff, so a batch reads the invoices it moves
// and the few old ones that stay (unswept, flagged), never the newer rest
// of the table. (Ordered by id, the scan of the primary key could not stop
// at the cutoff: each call that found fewer than a batch — the last one of
// every run — read the whole table; see docs/scale.md.)
func (s *Store) ArchiveInvoices(ctx context.Context, cutoff time.Time, n int) (int, error) {
	moved := 0
	err := s.withTx(ctx, func(t *Store) error {
		var ids []int64
		err := t.sel(ctx, &ids, `SELECT id FROM invoices
			WHERE created_at < ? AND needs_attention = ?
			  AND (status = 'SETTLED' OR (status = 'EXPIRED' AND paid_wei = '0' AND underpaid = ?))
			  AND NOT EXISTS (SELECT 1 FROM outbounds o WHERE o.invoice_id = invoices.id
			                  AND o.status NOT IN ('CONFIRMED', 'FAILED', 'CANCELLED'))
			ORDER BY created_at, id LIMIT ?`+t.d.ForUpdate, cutoff, false, false, limit(n, 1000, 10000))
		if err != nil || len(ids) == 0 {
			return err
		}
		if _, err := t.execIn(ctx, `INSERT INTO invoices_archive (`+invoiceColumns+`)
			SELECT `+invoiceColumns+` FROM invoices WHERE id IN (?)`, ids); err != nil {
			return err
		}
		res, err := t.execIn(ctx, `DELETE FROM invoices WHERE id IN (?)`, ids)
		if err != nil {
			return err
		}
		if d, err := res.RowsAffected(); err != nil || d != int64(len(ids)) {
			return errors.Join(err, fmt.Errorf("archive: deleted %d of %d invoices", d, len(ids)))
		}
		moved = len(ids)
		return nil
	})
	return moved, err
}
