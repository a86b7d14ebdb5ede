package sqlstore

import (
	"context"
	"math"

	"github.com/evmpay/evmpay/store"
)

const paymentColumns = `id, invoice_id, tx_hash, log_index, block_number, block_hash, from_address,
	amount_wei, late, created_at, token_address, wrong_asset, chain_id, wrong_network`

// InsertPayment implements store.PaymentStore: the payment arrived on the
// handle's chain, which it records (p.ChainID).
func (s *Store) InsertPayment(ctx context.Context, p *store.Payment) error {
	c, err := s.chainID()
	if err != nil {
		return err
	}
	p.ChainID = uint64(c)
	return s.namedGet(ctx, &p.ID, `INSERT INTO payments (invoice_id, tx_hash, log_index,
			block_number, block_hash, from_address, amount_wei, late, created_at, token_address, wrong_asset,
			chain_id, wrong_network)
		VALUES (:invoice_id, :tx_hash, :log_index, :block_number, :block_hash, :from_address,
			:amount_wei, :late, :created_at, :token_address, :wrong_asset, :chain_id, :wrong_network)
		RETURNING id`, p)
}

// ListPaymentsByInvoice implements store.PaymentStore.
func (s *Store) ListPaymentsByInvoice(ctx context.Context, invoiceID int64) ([]store.Payment, error) {
	var ps []store.Payment
	err := s.sel(ctx, &ps, `SELECT `+paymentColumns+` FROM payments WHERE invoice_id = ?
		ORDER BY block_number, id`, invoiceID)
	return ps, err
}

// DeletePaymentsFromBlock implements store.PaymentStore: the handle's
// chain's payments only (block numbers are per chain), whatever their
// invoice's chain.
func (s *Store) DeletePaymentsFromBlock(ctx context.Context, number uint64) ([]store.Payment, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var ps []store.Payment
	err = s.sel(ctx, &ps, `DELETE FROM payments WHERE chain_id = ? AND block_number >= ? RETURNING `+paymentColumns,
		c, min(number, math.MaxInt64))
	return ps, err
}
