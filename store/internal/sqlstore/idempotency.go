package sqlstore

import (
	"context"
	"database/sql"
	"errors"
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

// CreateIdempotencyRecords implements store.IdempotencyStore: one INSERT …
// ON CONFLICT DO NOTHING RETURNING on PostgreSQL (prepared per record count
// up to preparedRows; outside a transaction, IN_FLIGHT records commit
// asynchronously as in CreateIdempotencyRecord), one INSERT per record in
// one transaction on SQLite (in process, where a statement costs no round
// trip).
func (s *Store) CreateIdempotencyRecords(ctx context.Context, recs []store.IdempotencyRecord) ([]bool, error) {
	created := make([]bool, len(recs))
	at := make(map[idempotencyID]int, len(recs))
	for i, rec := range recs {
		id := idempotencyID{rec.MerchantID, rec.Key}
		if _, dup := at[id]; dup {
			return nil, fmt.Errorf("create idempotency records: key %q of merchant %d appears twice", rec.Key, rec.MerchantID)
		}
		at[id] = i
	}
	if len(recs) == 0 {
		return created, nil
	}
	if s.d.Name != "postgres" {
		err := s.withTx(ctx, func(t *Store) error {
			for i, rec := range recs {
				err := t.CreateIdempotencyRecord(ctx, rec)
				if err != nil && !errors.Is(err, store.ErrConflict) {
					return err
				}
				created[i] = err == nil
			}
			return nil
		})
		return created, err
	}
	for len(recs) > 0 {
		chunk := recs[:min(len(recs), insertChunk)]
		recs = recs[len(chunk):]
		if err := s.insertRecordsPG(ctx, chunk, at, created); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// idempotencyID is an idempotency record's primary key.
type idempotencyID struct {
	merchantID int64
	key        string
}

// insertRecordsPG inserts recs, marking in created (by at, the position of
// each key) the ones inserted.
func (s *Store) insertRecordsPG(ctx context.Context, recs []store.IdempotencyRecord, at map[idempotencyID]int, created []bool) error {
	const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	rows := make([]string, len(recs))
	args := make([]any, 0, 10*len(recs))
	async := s.tx == nil
	for i, rec := range recs {
		rows[i] = row
		args = append(args, rec.MerchantID, rec.Key, rec.RequestHash, rec.Status, rec.ResponseStatus,
			rec.ResponseBody, rec.InvoiceID, micro(rec.LockedUntil), rec.CreatedAt, rec.ExpiresAt)
		async = async && rec.Status == store.IdempotencyInFlight
	}
	q := `INSERT INTO idempotency_keys (` + idempotencyColumns + `) VALUES ` + strings.Join(rows, ", ") +
		` ON CONFLICT (merchant_id, key) DO NOTHING RETURNING merchant_id, key`
	if async {
		q += `, set_config('synchronous_commit', 'off', true) AS async`
	}
	var got []struct {
		MerchantID int64          `db:"merchant_id"`
		Key        string         `db:"key"`
		Async      sql.NullString `db:"async"`
	}
	var err error
	if len(recs) <= preparedRows {
		err = s.selPrepared(ctx, &got, q, args...)
	} else {
		err = s.sel(ctx, &got, q, args...)
	}
	if err != nil {
		return err
	}
	for _, r := range got {
		i, ok := at[idempotencyID{r.MerchantID, r.Key}]
		if !ok {
			return fmt.Errorf("create idempotency records: unexpected key %q of merchant %d returned", r.Key, r.MerchantID)
		}
		created[i] = true
	}
	return nil
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
