package sqlstore

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

const outboundColumns = `id, chain_id, kind, merchant_id, invoice_id, batch_id, reason, reference, token_address,
	asset_symbol, asset_decimals, amount, fiat_currency, fiat_minor, fiat_rate, fiat_rate_kind, destination,
	payment_uri, paid_by, source, from_address, status, error, claim_token_hash, created_by_key, needs_approval,
	approved_by_key, approved_at, tx_hash, log_index, block_number, created_block, attempts,
	next_attempt_at, locked_until, created_at, updated_at, broadcast_at, confirmed_at, submitted_tx_hash, version, created_by_user, approved_by_user`

const selectOutbound = `SELECT ` + outboundColumns + ` FROM outbounds`

// CreateOutbound implements store.OutboundStore.
func (s *Store) CreateOutbound(ctx context.Context, o *store.Outbound) error {
	c, err := s.chainID()
	if err != nil {
		return err
	}
	o.Version, o.ChainID = 1, uint64(c)
	return s.namedGet(ctx, &o.ID, `INSERT INTO outbounds (chain_id, kind, merchant_id, invoice_id, batch_id, reason,
			reference, token_address, asset_symbol, asset_decimals, amount, fiat_currency, fiat_minor, fiat_rate,
			fiat_rate_kind, destination, payment_uri, paid_by, source, from_address, status, error, claim_token_hash,
			created_by_key, needs_approval, approved_by_key, approved_at, tx_hash, log_index, block_number,
			created_block, attempts, next_attempt_at, locked_until, created_at, updated_at, broadcast_at,
			confirmed_at, submitted_tx_hash, version, created_by_user, approved_by_user)
		VALUES (:chain_id, :kind, :merchant_id, :invoice_id, :batch_id, :reason, :reference, :token_address,
			:asset_symbol, :asset_decimals, :amount, :fiat_currency, :fiat_minor, :fiat_rate, :fiat_rate_kind,
			:destination, :payment_uri, :paid_by, :source, :from_address, :status, :error, :claim_token_hash,
			:created_by_key, :needs_approval, :approved_by_key, :approved_at, :tx_hash, :log_index,
			:block_number, :created_block, :attempts, :next_attempt_at, :locked_until, :created_at,
			:updated_at, :broadcast_at, :confirmed_at, :submitted_tx_hash, :version, :created_by_user,
			:approved_by_user)
		RETURNING id`, o)
}

// GetOutbound implements store.OutboundStore.
func (s *Store) GetOutbound(ctx context.Context, id int64) (store.Outbound, error) {
	var o store.Outbound
	err := s.get(ctx, &o, selectOutbound+` WHERE id = ?`, id)
	return o, err
}

// GetOutboundForUpdate implements store.OutboundStore.
func (s *Store) GetOutboundForUpdate(ctx context.Context, id int64) (store.Outbound, error) {
	var o store.Outbound
	err := s.get(ctx, &o, selectOutbound+` WHERE id = ?`+s.d.ForUpdate, id)
	return o, err
}

// GetOutboundByClaimTokenHash implements store.OutboundStore.
func (s *Store) GetOutboundByClaimTokenHash(ctx context.Context, hash []byte) (store.Outbound, error) {
	var o store.Outbound
	err := s.get(ctx, &o, selectOutbound+` WHERE claim_token_hash = ?`, hash)
	return o, err
}

// UpdateOutbound implements store.OutboundStore.
func (s *Store) UpdateOutbound(ctx context.Context, o *store.Outbound) error {
	res, err := s.namedExec(ctx, `UPDATE outbounds SET destination = :destination, payment_uri = :payment_uri, source = :source,
			from_address = :from_address, status = :status, error = :error, needs_approval = :needs_approval,
			approved_by_key = :approved_by_key, approved_by_user = :approved_by_user, approved_at = :approved_at, tx_hash = :tx_hash,
			log_index = :log_index, block_number = :block_number, attempts = :attempts,
			next_attempt_at = :next_attempt_at, locked_until = :locked_until, updated_at = :updated_at,
			broadcast_at = :broadcast_at, confirmed_at = :confirmed_at, submitted_tx_hash = :submitted_tx_hash,
			version = version + 1
		WHERE id = :id AND version = :version`, o)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		if _, gerr := s.GetOutbound(ctx, o.ID); gerr != nil {
			return gerr
		}
		return store.ErrConflict
	}
	o.Version++
	return nil
}

// SentByService implements store.OutboundStore: the same test as the
// outbounds_merchant_paid_not_service trigger (migration 0150).
func (s *Store) SentByService(ctx context.Context, txHash common.Hash, from common.Address) (bool, error) {
	var n int
	err := s.get(ctx, &n, `SELECT
		(SELECT count(*) FROM sweep_txs WHERE tx_hash = ?) +
		(SELECT count(*) FROM service_wallets WHERE address = ?) +
		(SELECT count(*) FROM invoices WHERE deposit_address = ?) +
		(SELECT count(*) FROM invoices_archive WHERE deposit_address = ?)`, txHash, from, from, from)
	return n > 0, err
}

// ListOutbounds implements store.OutboundStore.
func (s *Store) ListOutbounds(ctx context.Context, f store.OutboundFilter) ([]store.Outbound, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if f.MerchantID != 0 {
		add("merchant_id = ?", f.MerchantID)
	}
	if f.Kind != "" {
		add("kind = ?", f.Kind)
	}
	if f.InvoiceID != 0 {
		add("invoice_id = ?", f.InvoiceID)
	}
	if f.BatchID != "" {
		add("batch_id = ?", f.BatchID)
	}
	if f.PaidBy != "" {
		add("paid_by = ?", f.PaidBy)
	}
	if !f.CreatedAfter.IsZero() {
		add("created_at >= ?", f.CreatedAfter)
	}
	if f.BeforeID > 0 {
		add("id < ?", f.BeforeID)
	}
	q := selectOutbound
	if len(f.Statuses) > 0 {
		where = append(where, "status IN (?)")
		args = append(args, f.Statuses)
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit(f.Limit, 100, 1000))
	var out []store.Outbound
	var err error
	if len(f.Statuses) > 0 {
		err = s.selIn(ctx, &out, q, args...)
	} else {
		err = s.sel(ctx, &out, q, args...)
	}
	return out, err
}

// ClaimOutbounds implements store.OutboundStore.
func (s *Store) ClaimOutbounds(ctx context.Context, now time.Time, lease time.Duration, n int) ([]store.Outbound, error) {
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var out []store.Outbound
	err = s.sel(ctx, &out, `
		UPDATE outbounds SET locked_until = ?
		WHERE id IN (
			SELECT id FROM outbounds
			WHERE status IN ('QUEUED', 'AWAITING_PAYMENT', 'BROADCAST') AND chain_id = ?
			  AND (next_attempt_at IS NULL OR next_attempt_at <= ?)
			  AND (locked_until IS NULL OR locked_until <= ?)
			ORDER BY id LIMIT ?`+s.d.SkipLocked+`)
		RETURNING `+outboundColumns, now.Add(lease), c, now, now, limit(n, 10, 1000))
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

// ListSweepTxsByOutbound implements store.OutboundStore.
func (s *Store) ListSweepTxsByOutbound(ctx context.Context, outboundID int64) ([]store.SweepTx, error) {
	var ts []store.SweepTx
	err := s.sel(ctx, &ts, `SELECT `+sweepTxColumns+` FROM sweep_txs WHERE outbound_id = ? ORDER BY id`, outboundID)
	return ts, err
}

// ListSweepTxsByHashes implements store.LedgerStore.
func (s *Store) ListSweepTxsByHashes(ctx context.Context, hashes []common.Hash) ([]store.SweepTx, error) {
	if len(hashes) == 0 {
		return nil, nil
	}
	keys := make([][]byte, len(hashes))
	for i, h := range hashes {
		keys[i] = h.Bytes()
	}
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	var ts []store.SweepTx
	err = s.selIn(ctx, &ts, `SELECT `+sweepTxColumns+` FROM sweep_txs WHERE tx_hash IN (?) AND chain_id = ? ORDER BY id`, keys, c)
	return ts, err
}
