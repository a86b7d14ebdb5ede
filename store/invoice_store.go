package store

import (
	"context"
	"time"
)

// MerchantStore stores merchants.
type MerchantStore interface {
	// CreateMerchant inserts m and sets m.ID. ErrConflict if the api key
	// digest is already used.
	CreateMerchant(ctx context.Context, m *Merchant) error
	GetMerchant(ctx context.Context, id int64) (Merchant, error)
	// GetMerchantForUpdate reads a merchant and, on PostgreSQL, locks its
	// row until the transaction ends. Use it inside InTx before
	// UpdateMerchant, so that concurrent changes (a rotation and a profile
	// update) do not overwrite each other.
	GetMerchantForUpdate(ctx context.Context, id int64) (Merchant, error)
	// GetMerchantByAPIKeyDigest finds the merchant whose current api key
	// has this HMAC digest.
	GetMerchantByAPIKeyDigest(ctx context.Context, digest []byte) (Merchant, error)
	// GetMerchantByExternalID finds the merchant a host created with this
	// external id; ErrNotFound for none (and for "").
	GetMerchantByExternalID(ctx context.Context, externalID string) (Merchant, error)
	// UpdateMerchant writes the mutable fields of m (name, credentials,
	// webhook_url, settlement_address, updated_at, disabled_at,
	// underpayment tolerance).
	UpdateMerchant(ctx context.Context, m Merchant) error
	ListMerchants(ctx context.Context) ([]Merchant, error)
}

// InvoiceFilter selects invoices for ListInvoices. Zero fields do not
// filter. Results are ordered by id, newest first.
type InvoiceFilter struct {
	MerchantID    int64
	Statuses      []string
	CreatedAfter  time.Time // inclusive
	CreatedBefore time.Time // exclusive
	// BeforeID continues a listing: only ids smaller than it.
	BeforeID int64
	// Limit defaults to 100.
	Limit int
}

// InvoiceStore stores invoices.
type InvoiceStore interface {
	// NextDerivationIndex reserves the next deposit-address derivation
	// index. Call it inside the transaction that inserts the invoice, so a
	// rollback leaves no gap.
	NextDerivationIndex(ctx context.Context) (uint32, error)
	// ReserveDerivationIndexes reserves n consecutive derivation indexes
	// and returns the first: the caller owns [first, first+n). Call it
	// inside the transaction that inserts the invoices using them, so that
	// a rollback leaves no gap. It fails, changing nothing, when n < 1 or
	// fewer than n of the 2^31 non-hardened indexes are left.
	ReserveDerivationIndexes(ctx context.Context, n int) (first uint32, err error)
	// CreateInvoice inserts inv and sets inv.ID and inv.Version.
	// ErrConflict on a reused deposit address, derivation index or lookup
	// token.
	CreateInvoice(ctx context.Context, inv *Invoice) error
	// CreateInvoices inserts invs (all or none) and sets each one's ID and
	// Version, like CreateInvoice for each but in one statement per few
	// hundred rows. ErrConflict on a reused deposit address, derivation
	// index or lookup token.
	CreateInvoices(ctx context.Context, invs []*Invoice) error
	GetInvoice(ctx context.Context, id int64) (Invoice, error)
	// GetInvoiceForUpdate reads an invoice and, on PostgreSQL, locks its row
	// until the transaction ends. Use it inside InTx before UpdateInvoice.
	GetInvoiceForUpdate(ctx context.Context, id int64) (Invoice, error)
	GetInvoiceByLookupTokenHash(ctx context.Context, hash []byte) (Invoice, error)
	ListInvoices(ctx context.Context, f InvoiceFilter) ([]Invoice, error)
	// UpdateInvoice writes every mutable field of inv if its Version still
	// matches the stored one, then increments inv.Version. ErrConflict when
	// the invoice changed since it was read.
	UpdateInvoice(ctx context.Context, inv *Invoice) error
	// ListExpiring returns the PENDING invoices of the handle's chain
	// (ErrNoChain on a handle bound to none) whose expires_at is at or
	// before now, oldest first: each chain's settlement expires its own
	// chain's invoices, once it has settled its own chain's blocks.
	ListExpiring(ctx context.Context, now time.Time, limit int) ([]Invoice, error)
	// CountLiveInvoices returns how many invoices are PENDING, PAID and
	// CONFIRMED — those still awaiting money, confirmations or a sweep —
	// keyed by status (a status with none is absent). It reads only those
	// statuses' partial indexes, never the history: SETTLED and EXPIRED
	// invoices, most of a year-old table, are not counted.
	CountLiveInvoices(ctx context.Context) (map[string]int64, error)
	// ArchiveInvoices moves up to limit invoices created before cutoff to
	// invoices_archive and returns how many moved.
	ArchiveInvoices(ctx context.Context, cutoff time.Time, limit int) (int, error)
}

// IdempotencyStore stores Idempotency-Key records.
type IdempotencyStore interface {
	// CreateIdempotencyRecord inserts rec; ErrConflict when the merchant
	// already used the key. Outside a transaction, an IN_FLIGHT record may
	// be committed without waiting for durability (PostgreSQL: an
	// asynchronous commit): it only blocks the key, and the durable commit
	// that completes it makes it durable first.
	CreateIdempotencyRecord(ctx context.Context, rec IdempotencyRecord) error
	// CreateIdempotencyRecords is CreateIdempotencyRecord for several
	// records at once (one statement on PostgreSQL): it inserts every
	// record whose merchant has not used its key and leaves the others
	// alone; created[i] tells whether recs[i] was inserted. The records must
	// name distinct (merchant, key) pairs.
	CreateIdempotencyRecords(ctx context.Context, recs []IdempotencyRecord) (created []bool, err error)
	GetIdempotencyRecord(ctx context.Context, merchantID int64, key string) (IdempotencyRecord, error)
	// ClaimIdempotencyRecord replaces the IN_FLIGHT record of
	// (rec.MerchantID, rec.Key) by rec when that record's lease
	// (LockedUntil) ended at or before now: the request that held it died
	// without changing anything. ErrConflict when there is no such record
	// (it is DONE, its lease is still running, another request claimed it
	// first, or it is gone).
	ClaimIdempotencyRecord(ctx context.Context, rec IdempotencyRecord, now time.Time) error
	// CompleteIdempotencyRecord writes status, response and invoice id of
	// rec (the expiry set at creation stays, so that no indexed column
	// changes), only if the stored record is still IN_FLIGHT under the
	// lease rec.LockedUntil (the one its caller wrote). ErrConflict when
	// another request has claimed the key since. Call it inside the
	// transaction that makes the change the response describes: on
	// PostgreSQL it also locks the row until that transaction ends.
	CompleteIdempotencyRecord(ctx context.Context, rec IdempotencyRecord) error
	// CompleteIdempotencyRecords is CompleteIdempotencyRecord for several
	// records at once (one statement on PostgreSQL). ErrConflict when any of
	// them is no longer IN_FLIGHT under its lease; then the caller must roll
	// back the transaction it runs in (InTx does, on the returned error),
	// since the others may have been written. Outside a transaction it is
	// all or none.
	CompleteIdempotencyRecords(ctx context.Context, recs []IdempotencyRecord) error
	// ReleaseIdempotencyRecord deletes the IN_FLIGHT record of
	// (merchantID, key) if it is still held under the lease lockedUntil, so
	// that a request that failed without changing anything can be retried
	// at once. ErrNotFound when the record is gone or held by another lease.
	ReleaseIdempotencyRecord(ctx context.Context, merchantID int64, key string, lockedUntil time.Time) error
	// DeleteExpiredIdempotencyRecords removes records that expired before
	// now and returns how many.
	DeleteExpiredIdempotencyRecords(ctx context.Context, now time.Time) (int64, error)
}
