package sqlstore

import (
	"context"

	"github.com/evmpay/evmpay/store"
)

const paymentColumns = `id, invoice_id, tx_hash, log_index, block_number, block_hash, from_address,
	amount_wei, late, created_at, token_address, wrong_asset`

// InsertPayment implements store.PaymentStore.
func (s *Store) InsertPayment(ctx context.Context, p *store.Payment) error {
	return s.namedGet(ctx, &p.ID, `INSERT INTO payments (invoice_id, tx_hash, log_index,
			block_number, block_hash, from_address, amount_wei, late, created_at, token_address, wrong_asset)
		VALUES (:invoice_id, :tx_hash, :log_index, :block_number, :block_hash, :from_address,
			:amount_wei, :late, :created_at, :token_address, :wrong_asset)
		RETURNING id`, p)
}

// ListPaymentsByInvoice implements store.PaymentStore.
func (s *Store) ListPaymentsByInvoice(ctx context.Context, invoiceID int64) ([]store.Payment, error) {
	var ps []store.Payment
	err := s.sel(ctx, &ps, `SELECT `+paymentColumns+` FROM payments WHERE invoice_id = ?
		ORDER BY block_number, id`, invoiceID)
	return ps, err
}

// DeletePaymentsFromBlock implements store.PaymentStore.
func (s *Store) DeletePaymentsFromBlock(ctx context.Context, number uint64) ([]store.Payment, error) {
	var ps []store.Payment
	err := s.sel(ctx, &ps, `DELETE FROM payments WHERE block_number >= ? RETURNING `+paymentColumns, number)
	return ps, err
}
