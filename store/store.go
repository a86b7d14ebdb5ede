package store

import (
	"context"
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
	// Chain returns a handle on the same database whose chain-scoped
	// records — ChainStore, IdentityStore, FinalityStore, StopStore,
	// CursorStore, the chain reads of SettlementStore and LedgerStore, and
	// what the sweep and the refund engine write (sweep transactions,
	// nonces, outbounds, ledger entries, a wallet's ledger opening block)
	// — are chain id's: one database holds several chains side by side
	// (docs/chains.md, "The chain-bound handle", lists them). On a handle
	// not bound to a chain those methods
	// return ErrNoChain; the rest of the store is the same on every handle,
	// but for the named locks (Locker): a bound handle's are its chain's,
	// so that each chain's indexer, settlement and sweep run once per
	// chain. Chain(0) is a handle bound to none.
	Chain(id uint64) Store
}

// Tx is every record operation, inside or outside a database transaction.
// Consumers declare the narrower interfaces below (or their own subsets).
type Tx interface {
	MerchantStore
	BrandingStore
	InvoiceStore
	IdempotencyStore
	PaymentStore
	SettlementStore
	ChainStore
	IdentityStore
	FinalityStore
	StopStore
	CursorStore
	EventStore
	DeliveryStore
	SweepStore
	// Refunds and payouts (docs/refunds.md).
	APIKeyStore
	PayoutPolicyStore
	ServiceWalletStore
	OutboundStore
	LedgerStore
	DashboardStore // the merchant dashboard (issue #35)
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
