package store

import (
	"context"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Store is a handle on the shared database. Its methods run in their own
// transaction (autocommit); InTx runs several in one.
//
// Implementations: store/postgres (production) and store/sqlite (embedded
// default). Both pass store/storetest.
type Store interface {
	Tx
	// InTx runs fn in one database transaction: it commits when fn returns
	// nil and rolls back when fn returns an error or panics. Use it to
	// commit a state change together with the event it emits. fn must use
	// only the Tx it is given.
	InTx(ctx context.Context, fn func(tx Tx) error) error
	Locker
	// Ping reports whether the database is reachable.
	Ping(ctx context.Context) error
	// Close releases the database handle.
	Close() error
}

// Tx is every record operation, inside or outside a database transaction.
// Consumers declare the narrower interfaces below (or their own subsets).
type Tx interface {
	MerchantStore
	InvoiceStore
	IdempotencyStore
	PaymentStore
	ChainStore
	CursorStore
	EventStore
	DeliveryStore
	SweepStore
}

// Locker hands out named locks shared by every process on the database, for
// work that must have a single runner (the indexer, settlement's cursor).
type Locker interface {
	// TryLock takes the named lock without waiting. It returns ErrLocked
	// when another holder has it.
	TryLock(ctx context.Context, name string) (Lock, error)
}

// Lock is a held named lock.
type Lock interface {
	// Lost is closed when the lock is lost (for example the database
	// session that held it died). The holder must stop the work it guards.
	Lost() <-chan struct{}
	// Unlock releases the lock. It is safe to call more than once.
	Unlock() error
}

// MerchantStore stores merchants.
type MerchantStore interface {
	// CreateMerchant inserts m and sets m.ID. ErrConflict if the api key
	// digest is already used.
	CreateMerchant(ctx context.Context, m *Merchant) error
	GetMerchant(ctx context.Context, id int64) (Merchant, error)
	// GetMerchantByAPIKeyDigest finds the merchant whose current api key
	// has this HMAC digest.
	GetMerchantByAPIKeyDigest(ctx context.Context, digest []byte) (Merchant, error)
	// UpdateMerchant writes the mutable fields of m (name, credentials,
	// webhook_url, settlement_address, updated_at, disabled_at).
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
	// CreateInvoice inserts inv and sets inv.ID and inv.Version.
	// ErrConflict on a reused deposit address, derivation index or lookup
	// token.
	CreateInvoice(ctx context.Context, inv *Invoice) error
	GetInvoice(ctx context.Context, id int64) (Invoice, error)
	// GetInvoiceForUpdate reads an invoice and, on PostgreSQL, locks its row
	// until the transaction ends. Use it inside InTx before UpdateInvoice.
	GetInvoiceForUpdate(ctx context.Context, id int64) (Invoice, error)
	GetInvoiceByLookupTokenHash(ctx context.Context, hash []byte) (Invoice, error)
	ListInvoices(ctx context.Context, f InvoiceFilter) ([]Invoice, error)
	// InvoicesByDepositAddress returns the invoices (any status) whose
	// deposit address is one of addrs, by an indexed lookup.
	InvoicesByDepositAddress(ctx context.Context, addrs []common.Address) ([]Invoice, error)
	// UpdateInvoice writes every mutable field of inv if its Version still
	// matches the stored one, then increments inv.Version. ErrConflict when
	// the invoice changed since it was read.
	UpdateInvoice(ctx context.Context, inv *Invoice) error
	// ListExpiring returns PENDING invoices whose expires_at is at or before
	// now, oldest first.
	ListExpiring(ctx context.Context, now time.Time, limit int) ([]Invoice, error)
	// ClaimSweeps leases up to limit invoices whose sweep is due
	// (sweep_status QUEUED, FUNDING or SENT, sweep_next_attempt_at unset or
	// ≤ now, no live lease) until now+lease. Concurrent callers never get
	// the same invoice.
	ClaimSweeps(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Invoice, error)
	// CountInvoicesByStatus returns the number of invoices per status.
	CountInvoicesByStatus(ctx context.Context) (map[string]int64, error)
	// ArchiveInvoices moves up to limit invoices created before cutoff to
	// invoices_archive and returns how many moved.
	ArchiveInvoices(ctx context.Context, cutoff time.Time, limit int) (int, error)
}

// IdempotencyStore stores Idempotency-Key records.
type IdempotencyStore interface {
	// CreateIdempotencyRecord inserts rec; ErrConflict when the merchant
	// already used the key.
	CreateIdempotencyRecord(ctx context.Context, rec IdempotencyRecord) error
	GetIdempotencyRecord(ctx context.Context, merchantID int64, key string) (IdempotencyRecord, error)
	// UpdateIdempotencyRecord writes status, response and lease of rec.
	UpdateIdempotencyRecord(ctx context.Context, rec IdempotencyRecord) error
	// DeleteIdempotencyRecord removes a record (a request that failed
	// before it changed anything).
	DeleteIdempotencyRecord(ctx context.Context, merchantID int64, key string) error
	// DeleteExpiredIdempotencyRecords removes records that expired before
	// now and returns how many.
	DeleteExpiredIdempotencyRecords(ctx context.Context, now time.Time) (int64, error)
}

// PaymentStore stores payments matched to invoices.
type PaymentStore interface {
	// InsertPayment inserts p and sets p.ID. ErrConflict when (tx hash, log
	// index) is already recorded.
	InsertPayment(ctx context.Context, p *Payment) error
	ListPaymentsByInvoice(ctx context.Context, invoiceID int64) ([]Payment, error)
	// DeletePaymentsFromBlock removes the payments in blocks ≥ number (a
	// reorg) and returns them.
	DeletePaymentsFromBlock(ctx context.Context, number uint64) ([]Payment, error)
}

// ChainStore stores the indexed chain.
type ChainStore interface {
	// InsertBlocks inserts blocks and their transactions in bulk (COPY on
	// PostgreSQL). ErrConflict if a block number or tx hash exists.
	InsertBlocks(ctx context.Context, blocks []Block, txs []Transaction) error
	GetBlock(ctx context.Context, number uint64) (Block, error)
	GetBlockByHash(ctx context.Context, hash common.Hash) (Block, error)
	// LatestBlock returns the highest indexed block; ErrNotFound if none.
	LatestBlock(ctx context.Context) (Block, error)
	// ListBlockHashes returns the hashes of blocks in [from, to], by number.
	ListBlockHashes(ctx context.Context, from, to uint64) (map[uint64]common.Hash, error)
	// DeleteBlocksFrom removes blocks ≥ number and their transactions and
	// returns how many blocks it removed.
	DeleteBlocksFrom(ctx context.Context, number uint64) (int64, error)
	GetTx(ctx context.Context, hash common.Hash) (Transaction, error)
	// ListTxsByBlock returns a block's transactions in index order.
	ListTxsByBlock(ctx context.Context, number uint64) ([]Transaction, error)
	// ListTxsByAddress returns transactions from or to addr, newest first,
	// continuing below the position (beforeBlock, beforeIndex) when
	// beforeBlock > 0.
	ListTxsByAddress(ctx context.Context, addr common.Address, beforeBlock uint64, beforeIndex int, limit int) ([]Transaction, error)
	// ListTxsToInvoices returns the transactions of block number whose
	// recipient is an invoice's deposit address, with that invoice's id.
	ListTxsToInvoices(ctx context.Context, number uint64) ([]InvoiceTx, error)
	InsertReorg(ctx context.Context, r *Reorg) error
	ListReorgs(ctx context.Context, afterID int64, limit int) ([]Reorg, error)
}

// InvoiceTx is an indexed transaction paying an invoice's deposit address.
type InvoiceTx struct {
	Transaction
	InvoiceID int64 `db:"invoice_id"`
}

// CursorStore stores named chain cursors.
type CursorStore interface {
	// GetCursor returns ErrNotFound when the cursor was never set.
	GetCursor(ctx context.Context, name string) (Cursor, error)
	// SetCursor creates or overwrites the cursor.
	SetCursor(ctx context.Context, c Cursor) error
}

// EventStore stores outbox events.
type EventStore interface {
	// InsertEvent inserts e and sets e.ID.
	InsertEvent(ctx context.Context, e *Event) error
	GetEvent(ctx context.Context, id int64) (Event, error)
	ListEventsByInvoice(ctx context.Context, invoiceID int64) ([]Event, error)
	// ClaimUndispatchedEvents returns up to limit events not yet dispatched,
	// oldest first, locking them (SKIP LOCKED on PostgreSQL) until the
	// transaction ends. Use inside InTx together with MarkEventDispatched.
	ClaimUndispatchedEvents(ctx context.Context, limit int) ([]Event, error)
	MarkEventDispatched(ctx context.Context, id int64, at time.Time) error
}

// DeliveryFilter selects deliveries for ListDeliveries, newest first.
type DeliveryFilter struct {
	MerchantID int64
	Status     string    // empty: any
	Since      time.Time // created at or after; zero: any
	BeforeID   int64
	Limit      int // defaults to 100
}

// DeliveryStore stores webhook deliveries.
type DeliveryStore interface {
	// CreateDelivery inserts d and sets d.ID; ErrConflict if the event
	// already has a delivery.
	CreateDelivery(ctx context.Context, d *Delivery) error
	GetDelivery(ctx context.Context, id int64) (Delivery, error)
	// UpdateDelivery writes the attempt fields of d.
	UpdateDelivery(ctx context.Context, d Delivery) error
	// ClaimDueDeliveries leases up to limit PENDING deliveries due at now
	// (next_attempt_at ≤ now, no live lease) until now+lease. Concurrent
	// callers never get the same delivery.
	ClaimDueDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Delivery, error)
	ListDeliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error)
	// CountDeliveries returns how many deliveries have the status and at
	// least minAttempt attempts.
	CountDeliveries(ctx context.Context, status string, minAttempt int) (int64, error)
}

// SweepStore stores the transactions the sweep worker signs and the nonces
// of the wallets it sends from.
type SweepStore interface {
	// CreateSweepTx inserts t and sets t.ID.
	CreateSweepTx(ctx context.Context, t *SweepTx) error
	// UpdateSweepTx writes status, mining and fee fields of t.
	UpdateSweepTx(ctx context.Context, t SweepTx) error
	ListSweepTxsByInvoice(ctx context.Context, invoiceID int64) ([]SweepTx, error)
	// ListSweepTxsByStatus returns transactions with one of the statuses,
	// oldest first.
	ListSweepTxsByStatus(ctx context.Context, statuses []string, limit int) ([]SweepTx, error)
	// ListSweepTxsMinedSince returns transactions from addr mined at or
	// after since (for the 24-hour gas spend).
	ListSweepTxsMinedSince(ctx context.Context, from common.Address, since time.Time) ([]SweepTx, error)
	// ReserveNonce returns the next nonce to use for addr and advances it:
	// the larger of the stored next nonce and chainNonce (the node's
	// pending nonce). Use inside the transaction that stores the signed tx.
	ReserveNonce(ctx context.Context, addr common.Address, chainNonce uint64) (uint64, error)
}
