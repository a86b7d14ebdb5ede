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
package store
