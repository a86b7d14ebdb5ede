package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
)

const idempotencyColumns = `merchant_id, key, request_hash, status, response_status, response_body,
	invoice_id, locked_until, created_at, expires_at`

// CreateIdempotencyRecord implements store.IdempotencyStore.
//
// On PostgreSQL, an IN_FLIGHT record inserted outside a transaction commits
// without waiting for its WAL flush (synchronous_commit off for that one
// transaction, set by the statement itself). That weakens nothing: such a
// record only makes concurrent requests with the key wait (409), and the
// transaction that completes it is durable and flushes the WAL past it, so
// a crash can lose only a record that nothing committed depends on; the
// request that wrote it fails with the connection and its retry starts
// afresh. It saves a WAL flush wait per request.
func (s *Store) CreateIdempotencyRecord(ctx context.Context, rec store.IdempotencyRecord) error {
	q := `INSERT INTO idempotency_keys (` + idempotencyColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	if s.d.Name == "postgres" && s.tx == nil && rec.Status == store.IdempotencyInFlight {
		q += ` RETURNING set_config('synchronous_commit', 'off', true)`
	}
	_, err := s.execPrepared(ctx, q, rec.MerchantID, rec.Key, rec.RequestHash, rec.Status,
		rec.ResponseStatus, rec.ResponseBody, rec.InvoiceID, micro(rec.LockedUntil), rec.CreatedAt, rec.ExpiresAt)
	return err
}

// GetIdempotencyRecord implements store.IdempotencyStore.
func (s *Store) GetIdempotencyRecord(ctx context.Context, merchantID int64, key string) (store.IdempotencyRecord, error) {
	var rec store.IdempotencyRecord
	err := s.getPrepared(ctx, &rec, `SELECT `+idempotencyColumns+` FROM idempotency_keys
		WHERE merchant_id = ? AND key = ?`, merchantID, key)
	return rec, err
}

// DeleteExpiredIdempotencyRecords implements store.IdempotencyStore.
func (s *Store) DeleteExpiredIdempotencyRecords(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.exec(ctx, `DELETE FROM idempotency_keys WHERE expires_at < ? AND status = ?`,
		now, store.IdempotencyDone)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// micro truncates t to the microsecond, the precision both databases keep,
// so that a lease written and later compared for equality matches exactly
// (PostgreSQL would otherwise round the nanoseconds).
func micro(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

// ClaimIdempotencyRecord implements store.IdempotencyStore.
func (s *Store) ClaimIdempotencyRecord(ctx context.Context, rec store.IdempotencyRecord, now time.Time) error {
	res, err := s.exec(ctx, `UPDATE idempotency_keys SET request_hash = ?, status = ?,
			response_status = NULL, response_body = NULL, invoice_id = NULL,
			locked_until = ?, created_at = ?, expires_at = ?
		WHERE merchant_id = ? AND key = ? AND status = ? AND locked_until <= ?`,
		rec.RequestHash, store.IdempotencyInFlight, micro(rec.LockedUntil), rec.CreatedAt, rec.ExpiresAt,
		rec.MerchantID, rec.Key, store.IdempotencyInFlight, now)
	if err != nil {
		return err
	}
	if err := mustAffect(res); err != nil {
		return fmt.Errorf("%w: idempotency key is not claimable", store.ErrConflict)
	}
	return nil
}

// CompleteIdempotencyRecord implements store.IdempotencyStore.
func (s *Store) CompleteIdempotencyRecord(ctx context.Context, rec store.IdempotencyRecord) error {
	res, err := s.execPrepared(ctx, `UPDATE idempotency_keys SET status = ?, response_status = ?,
			response_body = ?, invoice_id = ?
		WHERE merchant_id = ? AND key = ? AND status = ? AND locked_until = ?`,
		rec.Status, rec.ResponseStatus, rec.ResponseBody, rec.InvoiceID,
		rec.MerchantID, rec.Key, store.IdempotencyInFlight, micro(rec.LockedUntil))
	if err != nil {
		return err
	}
	if err := mustAffect(res); err != nil {
		return fmt.Errorf("%w: idempotency key was claimed by another request", store.ErrConflict)
	}
	return nil
}

// CompleteIdempotencyRecords implements store.IdempotencyStore: one
// UPDATE … FROM (VALUES …) on PostgreSQL (prepared per record count up to
// preparedRows), one UPDATE per record on SQLite (in process, where a
// statement costs no round trip).
func (s *Store) CompleteIdempotencyRecords(ctx context.Context, recs []store.IdempotencyRecord) error {
	if len(recs) == 0 {
		return nil
	}
	return s.withTx(ctx, func(t *Store) error {
		if t.d.Name != "postgres" {
			for _, rec := range recs {
				if err := t.CompleteIdempotencyRecord(ctx, rec); err != nil {
					return err
				}
			}
			return nil
		}
		for len(recs) > 0 {
			chunk := recs[:min(len(recs), insertChunk)]
			recs = recs[len(chunk):]
			if err := t.completeRecordsPG(ctx, chunk); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) completeRecordsPG(ctx context.Context, recs []store.IdempotencyRecord) error {
	// The first row types the VALUES columns; the others follow it.
	const typed = `(?::bigint, ?::text, ?::timestamptz, ?::text, ?::integer, ?::bytea, ?::bigint)`
	const plain = `(?, ?, ?, ?, ?, ?, ?)`
	rows := make([]string, len(recs))
	args := make([]any, 0, 7*len(recs))
	for i, rec := range recs {
		rows[i] = plain
		if i == 0 {
			rows[i] = typed
		}
		args = append(args, rec.MerchantID, rec.Key, micro(rec.LockedUntil), rec.Status, rec.ResponseStatus,
			rec.ResponseBody, rec.InvoiceID)
	}
	q := `UPDATE idempotency_keys AS k SET status = v.status, response_status = v.response_status,
			response_body = v.response_body, invoice_id = v.invoice_id
		FROM (VALUES ` + strings.Join(rows, ", ") + `)
			AS v (merchant_id, key, locked_until, status, response_status, response_body, invoice_id)
		WHERE k.merchant_id = v.merchant_id AND k.key = v.key AND k.status = '` + store.IdempotencyInFlight + `'
			AND k.locked_until = v.locked_until`
	var (
		res sql.Result
		err error
	)
	if len(recs) <= preparedRows {
		res, err = s.execPrepared(ctx, q, args...)
	} else {
		res, err = s.exec(ctx, q, args...)
	}
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != int64(len(recs)) {
		return fmt.Errorf("%w: %d of %d idempotency keys were claimed by other requests", store.ErrConflict,
			int64(len(recs))-n, len(recs))
	}
	return nil
}

// ReleaseIdempotencyRecord implements store.IdempotencyStore.
func (s *Store) ReleaseIdempotencyRecord(ctx context.Context, merchantID int64, key string, lockedUntil time.Time) error {
	res, err := s.exec(ctx, `DELETE FROM idempotency_keys
		WHERE merchant_id = ? AND key = ? AND status = ? AND locked_until = ?`,
		merchantID, key, store.IdempotencyInFlight, micro(lockedUntil))
	if err != nil {
		return err
	}
	return mustAffect(res)
}
