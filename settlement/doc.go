// Package settlement turns indexed transactions into invoice state: it
// matches payments to invoices, counts confirmations, expires invoices,
// undoes reorged payments and writes the events every change emits.
//
// Settlement reads only the shared database. The indexer writes blocks and
// transactions there; a Settler follows them block by block from its own
// cursor (store.CursorSettlement), so it can run in any process that
// reaches the database:
//
//	s, err := settlement.New(st, settlement.Config{Logger: logger})
//	if err != nil { … }
//	go s.Run(ctx) // until ctx is cancelled
//
// # One block, one transaction
//
// For each indexed block after its cursor, a Settler reads the block's
// transactions whose recipient is an invoice's deposit address (an indexed
// join, never a scan of the invoices), records each non-zero one as a
// payment and recomputes the invoices they pay. Token transfers the
// indexer recorded count the same way toward invoices in that token; a
// payment in another asset than its invoice's is recorded as wrong_asset,
// never counted, and flags the invoice (invoice.wrong_asset; see
// docs/tokens.md). A deposit address is the same on every chain: a
// Settler on chain X also finds deposits to the addresses of invoices of
// other chains, and records each as a wrong_network payment on chain X,
// never counted, flagging the invoice (invoice.wrong_network; see
// docs/chains.md). An invoice priced in a fiat currency counts a payment
// in any asset it quoted, valued at that quote (Config.Valuer values money
// that arrives after its late window at today's rates too;
// docs/pricing.md). The cursor's
// compare-and-set, the payments, the invoice changes and their events
// commit in one database transaction: a crash at any point leaves either
// all of the block or none of it, so a restart neither counts a payment
// twice nor loses one, and no event is duplicated or dropped. It logs one
// progress line per block (block, payments, lag behind the indexed head).
//
// # Status rules
//
// A payment in block b has h − b confirmations, h the highest indexed
// block (Config.Confirmations, default 12). Config.Finality changes what
// "confirmed" means below: under store.FinalityInstant a payment is
// confirmed once indexed; under store.FinalityTag once b is at or below
// the finalized block the indexer recorded (docs/chains.md).
//
//   - PENDING: payments adding up to the amount → PAID (invoice.paid);
//     less → PENDING with underpaid (invoice.underpaid, once per block that
//     adds payments); more → overpaid as well.
//   - PAID: when every payment has the confirmations → CONFIRMED with
//     sweep_status QUEUED (invoice.confirmed). More money while PAID →
//     overpaid (invoice.overpaid), and confirmation waits for it too.
//   - PENDING past expires_at → EXPIRED (invoice.expired), decided only
//     once settlement has processed every indexed block, so that its own
//     lag never makes a payment late.
//   - A payment to an EXPIRED invoice is recorded as late and sets
//     paid_late; within Config.LateWindow (default 24 h) after expiry the
//     invoice then follows the normal path (PAID, CONFIRMED, swept); after
//     it, the invoice stays EXPIRED and is flagged needs_attention
//     (invoice.late_payment).
//   - A payment to a CONFIRMED or SETTLED invoice (after the sweep was
//     queued or done) is recorded, sets overpaid and needs_attention, and
//     leaves the status and the sweep alone (invoice.overpaid).
//
// # Reorgs
//
// When a processed block is no longer in the indexed chain, the Settler
// walks back to the common ancestor (it keeps the hashes of the last
// Config.MaxReorgDepth processed blocks), deletes the orphaned blocks'
// payments, recomputes the invoices they paid and emits invoice.reverted,
// then processes the new branch. PAID goes back to PENDING (EXPIRED if past
// expiry); CONFIRMED whose sweep is only QUEUED is un-queued; an invoice
// whose sweep started (FUNDING, SENT, SWEPT, FAILED) or that is SETTLED
// keeps its status and is flagged needs_attention.
//
// # Several processes
//
// Only the holder of the "settlement" named lock (store.Locker: a
// PostgreSQL advisory lock) advances the cursor; the others wait and take
// over when it stops or its session dies. The cursor's compare-and-set is
// a second guard.
//
// # Observable conditions
//
// CheckConditions reports paid invoices still PENDING five minutes after
// their payment was indexed (settlement lags) and CONFIRMED invoices with
// no sweep transaction (the sweep lags), for a host to expose.
package settlement
