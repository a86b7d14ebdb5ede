// Package store owns the records of evmpay's shared database and the
// interfaces to read and write them.
//
// The records (Merchant, Invoice, Payment, Block, Tx, Event, Delivery,
// SweepTx, IdempotencyRecord, Cursor, Reorg) are plain structs. Wei amounts
// are Amount, an exact uint256. The interfaces are split by concern
// (MerchantStore, InvoiceStore, ChainStore, …) so that each package asks for
// only what it uses; Store adds transactions (InTx), named locks and
// lifecycle. Errors wrap the sentinels ErrNotFound, ErrConflict,
// ErrInvariant, ErrLocked and ErrUnavailable.
//
// Two implementations pass the same conformance suite (store/storetest):
// store/postgres, the production store, and store/sqlite, the embedded
// zero-setup default:
//
//	st, err := sqlite.Open(ctx, "evmpay.db", sqlite.Config{}) // or postgres.Open(ctx, url, postgres.Config{})
//	err = st.InTx(ctx, func(tx store.Tx) error {
//		if err := tx.UpdateInvoice(ctx, &inv); err != nil {
//			return err
//		}
//		ev, err := api.InvoiceEvent(store.EventInvoicePaid, inv, now, nil)
//		if err != nil {
//			return err
//		}
//		return tx.InsertEvent(ctx, &ev) // commits with the update, or neither
//	})
//
// # Implementing a store of your own
//
// A store is what store.Store says, and store/storetest proves it:
// storetest.Run(t, factory) runs the conformance suite both evmpay stores
// pass (every subtest on a fresh, migrated store). What is required:
//
//   - Every method of Tx, inside InTx's transaction and outside it
//     (autocommit): each package declares the subset it calls, but InTx
//     hands its callback the whole Tx, so a store — or a decorator of one
//     (metrics, tracing) — implements and wraps all of Tx, the bulk
//     methods (InsertEvents, InsertPayments, InsertBlocks, …) as much as
//     the single ones.
//   - The database's own guarantees the packages rely on, which storetest
//     checks: optimistic versions (ErrConflict on a stale update), the
//     unique constraints (deposit address, derivation index, idempotency
//     key per merchant, payment per transaction and log, one transfer per
//     outbound), the ledger's append-only trigger and the payment trigger
//     that writes its ledger entry, the merchant-paid invariant
//     (ErrInvariant), lease claims that never hand a row to two claimers.
//   - Named locks (Locker) that every process sharing the database sees,
//     and InTx's all-or-nothing commit, a panic included.
//
// Optional: the benchmarks (storetest.BenchmarkInsertBlock, …), and the
// read replica a host may give the read API (any Store will do). Errors
// wrap the sentinels above; a driver error that is none of them is
// returned as it is (the HTTP layer answers it 500 and logs it).
package store
