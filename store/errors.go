package store

import "errors"

// Sentinel errors. Implementations wrap them with %w so callers test with
// errors.Is; the HTTP layer maps them to statuses in one place.
var (
	// ErrNotFound: the record does not exist (or is not visible to the caller).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a uniqueness constraint was violated, or an optimistic
	// update lost a race (the record changed since it was read).
	ErrConflict = errors.New("conflict")
	// ErrLocked: a named lock is held by another process.
	ErrLocked = errors.New("lock held by another process")
	// ErrInvariant: the database refused a change that would break a rule
	// it enforces itself (a check constraint or a trigger), such as a
	// merchant-paid outbound settled by the service's own transfer.
	ErrInvariant = errors.New("refused by a database invariant")
	// ErrUnavailable: the database cannot be reached or cannot write.
	ErrUnavailable = errors.New("database unavailable")
	// ErrNoChain: a chain-scoped method (the index, cursors, the chain's
	// identity and finality, settlement's and the sweep's invoice lists,
	// sweep transactions, nonces, outbound claims, the ledger's chain
	// records; docs/chains.md) was called on a store not bound to a chain:
	// call Store.Chain(id) first.
	ErrNoChain = errors.New("store not bound to a chain: call Chain(chainID) first")
	// ErrOtherChain: a record names another chain than the one the store
	// is bound to (a node of another chain offered its identity).
	ErrOtherChain = errors.New("the record is of another chain than the store's")

	// The chain's sentinels, shared by every package that reads a node (one
	// name per idea: the indexer, settlement and sweep wrap the same ones).

	// ErrNodeBehind: the node's head is below one already acted on (the
	// indexed tip, or a head a sweep pass used). It is waited for, never
	// acted on, until it catches up.
	ErrNodeBehind = errors.New("the node is behind the chain already acted on")
	// ErrReorgTooDeep: a reorganisation reaches deeper than the configured
	// MaxReorgDepth; the part stops rather than rewrite that much history,
	// and an operator decides.
	ErrReorgTooDeep = errors.New("reorg deeper than MaxReorgDepth")
)
