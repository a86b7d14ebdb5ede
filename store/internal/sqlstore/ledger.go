package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

const ledgerColumns = `id, chain_id, kind, merchant_id, invoice_id, outbound_id, payment_id, sweep_tx_id, token_address,
	from_address, to_address, amount, tx_hash, log_index, block_number, at, fiat_currency, fiat_minor, reverses,
	recorded_at`

// InsertLedgerEntries implements store.LedgerStore. A few entries per
// transaction: one statement each, in one database transaction.
func (s *Store) InsertLedgerEntries(ctx context.Context, es []store.LedgerEntry) error {
	if len(es) == 0 {
		return nil
	}
	c, err := s.chainID()
	if err != nil {
		return err
	}
	return s.withTx(ctx, func(t *Store) error {
		for i := range es {
			es[i].ChainID = uint64(c)
			if _, err := t.namedExec(ctx, `INSERT INTO ledger_entries (chain_id, kind, merchant_id, invoice_id, outbound_id,
					payment_id, sweep_tx_id, token_address, from_address, to_address, amount, tx_hash, log_index,
					block_number, at, fiat_currency, fiat_minor, reverses, recorded_at)
				VALUES (:chain_id, :kind, COALESCE(:merchant_id, (SELECT merchant_id FROM invoices WHERE id = :invoice_id),
						(SELECT merchant_id FROM outbounds WHERE id = :outbound_id)),
					:invoice_id, :outbound_id, :payment_id, :sweep_tx_id, :token_address, :from_address, :to_address,
					:amount, :tx_hash, :log_index, :block_number, :at, :fiat_currency, :fiat_minor, :reverses,
					:recorded_at)`, es[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReverseLedgerEntries implements store.LedgerStore.
func (s *Store) ReverseLedgerEntries(ctx context.Context, sweepTxID int64, at time.Time) (int, error) {
	res, err := s.exec(ctx, `INSERT INTO ledger_entries (chain_id, kind, merchant_id, invoice_id, outbound_id, payment_id,
			sweep_tx_id, token_address, from_address, to_address, amount, tx_hash, log_index, block_number, at,
			fiat_currency, fiat_minor, reverses, recorded_at)
		SELECT chain_id, kind, merchant_id, invoice_id, outbound_id, payment_id, sweep_tx_id, token_address, to_address,
			from_address, amount, tx_hash, log_index, block_number, ?, fiat_currency, fiat_minor, id, ?
		FROM ledger_entries e
		WHERE e.sweep_tx_id = ? AND e.reverses IS NULL
		  AND NOT EXISTS (SELECT 1 FROM ledger_entries r WHERE r.reverses = e.id)`, at, at, sweepTxID)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// ListLedgerEntries implements store.LedgerStore.
func (s *Store) ListLedgerEntries(ctx context.Context, f store.LedgerFilter) ([]store.LedgerEntry, error) {
	// An entry of a fiat-priced invoice without a value of its own is
	// valued at the invoice's locked quotes: the pricing is read with it
	// (from the archive once the invoice is archived; '' for an invoice
	// priced in its asset, so that the archive is probed only for archived
	// invoices).
	q := `SELECT ` + ledgerColumns + `, CASE WHEN fiat_minor IS NULL AND invoice_id IS NOT NULL THEN COALESCE(
			(SELECT COALESCE(i.pricing, '') FROM invoices i WHERE i.id = ledger_entries.invoice_id),
			(SELECT a.pricing FROM invoices_archive a WHERE a.id = ledger_entries.invoice_id)) END AS invoice_pricing_json,
		CASE WHEN fiat_minor IS NULL AND invoice_id IS NOT NULL THEN COALESCE(
			(SELECT i.chain_id FROM invoices i WHERE i.id = ledger_entries.invoice_id AND i.pricing IS NOT NULL),
			(SELECT a.chain_id FROM invoices_archive a WHERE a.id = ledger_entries.invoice_id AND a.pricing IS NOT NULL)) END AS invoice_chain_id
		FROM ledger_entries WHERE 1 = 1`
	var args []any
	if f.MerchantID != nil {
		q += ` AND merchant_id = ?`
		args = append(args, *f.MerchantID)
	}
	if !f.From.IsZero() {
		q += ` AND at >= ?`
		args = append(args, f.From)
	}
	if !f.To.IsZero() {
		q += ` AND at < ?`
		args = append(args, f.To)
	}
	if f.AfterID > 0 {
		// A row comparison: the index on (merchant_id, at, id) seeks to
		// the position, so every page costs the same however deep.
		q += ` AND (at, id) > (?, ?)`
		args = append(args, f.AfterAt, f.AfterID)
	}
	q += ` ORDER BY at, id LIMIT ?`
	args = append(args, limit(f.Limit, 1000, 10000))
	var rows []ledgerRow
	if err := s.sel(ctx, &rows, q, args...); err != nil {
		return nil, err
	}
	// An invoice's entries (payments, sweeps, fees) mostly fall in one
	// page: its pricing is decoded once per page and shared, read-only.
	es := make([]store.LedgerEntry, len(rows))
	decoded := map[int64]*store.Pricing{}
	for i, r := range rows {
		es[i] = r.LedgerEntry
		if r.Pricing == nil || len(*r.Pricing) == 0 || r.InvoiceID == nil {
			continue
		}
		p, ok := decoded[*r.InvoiceID]
		if !ok {
			p = new(store.Pricing)
			if err := p.Scan(*r.Pricing); err != nil {
				return nil, fmt.Errorf("ledger entry %d: invoice %d pricing: %w", r.ID, *r.InvoiceID, err)
			}
			decoded[*r.InvoiceID] = p
		}
		es[i].InvoicePricing = p
		if r.InvoiceChain != nil {
			es[i].InvoiceChainID = uint64(*r.InvoiceChain)
		}
	}
	return es, nil
}

// ledgerRow is a ledger entry as ListLedgerEntries reads it: the invoice's
// pricing beside it still encoded.
type ledgerRow struct {
	store.LedgerEntry
	Pricing      *[]byte `db:"invoice_pricing_json"`
	InvoiceChain *int64  `db:"invoice_chain_id"`
}

// ScanLedgerEntries implements store.LedgerStore.
func (s *Store) ScanLedgerEntries(ctx context.Context, sc store.LedgerScan) ([]store.LedgerEntry, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var es []store.LedgerEntry
	err = s.sel(ctx, &es, `SELECT `+ledgerColumns+` FROM ledger_entries
		WHERE id > ? AND chain_id = ? AND block_number <= ? ORDER BY id LIMIT ?`, sc.AfterID, c, sc.MaxBlock, limit(sc.Limit, 1000, 10000))
	return es, err
}

// ListInboundTransfers implements store.LedgerStore.
func (s *Store) ListInboundTransfers(ctx context.Context, to []common.Address, from, through uint64) ([]store.InboundTransfer, error) {
	if len(to) == 0 || through < from {
		return nil, nil
	}
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	addrs := make([][]byte, len(to))
	for i, a := range to {
		addrs[i] = a.Bytes()
	}
	var out []store.InboundTransfer
	err = s.selIn(ctx, &out, `
		SELECT t.hash AS tx_hash, NULL AS log_index, t.block_number, b.timestamp AS block_time,
			NULL AS token_address, t.from_address, t.to_address, t.value_wei AS amount, t.tx_index
		FROM transactions t JOIN blocks b ON b.chain_id = t.chain_id AND b.number = t.block_number
		WHERE t.to_address IN (?) AND t.chain_id = ? AND t.block_number >= ? AND t.block_number <= ? AND t.value_wei <> '0'
		UNION ALL
		SELECT tt.tx_hash, tt.log_index, tt.block_number, b.timestamp, tt.token, tt.from_address, tt.to_address,
			tt.value, tt.tx_index
		FROM token_transfers tt JOIN blocks b ON b.chain_id = tt.chain_id AND b.number = tt.block_number
		WHERE tt.to_address IN (?) AND tt.chain_id = ? AND tt.block_number >= ? AND tt.block_number <= ?
		ORDER BY block_number, tx_index, log_index`, addrs, c, from, through, addrs, c, from, through)
	return out, err
}
