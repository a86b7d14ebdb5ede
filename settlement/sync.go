package settlement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
)

// errNotCanonical: the block settlement is about to build on is no longer
// the indexed chain (a reorg happened under it).
var errNotCanonical = errors.New("settlement: processed block no longer canonical")

// pruneEvery is how often (in blocks) the processed-block history is
// trimmed to MaxReorgDepth.
const pruneEvery = 64

// change is one invoice change written in a transaction, for metrics and
// logs once it committed.
type change struct {
	invoiceID int64
	from, to  string
	event     string
}

// sync processes every indexed block after the cursor, then runs the
// confirmation and expiry passes. Work that started finishes even when ctx
// is cancelled; ctx and lost are checked between blocks.
func (s *Settler) sync(ctx context.Context, lost <-chan struct{}) error {
	work := context.WithoutCancel(ctx)
	head, err := s.st.LatestBlock(work)
	if errors.Is(err, store.ErrNotFound) {
		return nil // nothing indexed yet
	}
	if err != nil {
		return fmt.Errorf("settlement: read indexed head: %w", err)
	}
	cur, err := s.cursor(work)
	if err != nil {
		return err
	}
	// Below the head, the next block's parent hash tells whether the
	// cursor's block is still canonical (processBlock).
	if cur != nil && cur.BlockNumber >= head.Number {
		ok, err := s.canonical(work, *cur, head.Number)
		if err != nil {
			return err
		}
		if !ok {
			if cur, _, err = s.revert(work, *cur); err != nil {
				return err
			}
		}
	}
	// The confirmation pass is planned once the blocks up to the head are
	// about to be processed (a revert before that changes what it must
	// read), and runs in the head block's transaction when it cannot
	// involve that block's payments: one transaction instead of two.
	var (
		plan    *confirmation
		planned bool
	)
	for {
		if err := interrupted(ctx, lost); err != nil {
			return err
		}
		var n uint64
		if cur == nil {
			first, err := s.st.EarliestBlock(work)
			if err != nil {
				return fmt.Errorf("settlement: read earliest block: %w", err)
			}
			n = first.Number
		} else {
			n = cur.BlockNumber + 1
		}
		if n > head.Number {
			break
		}
		var inBlock *confirmation
		if n == head.Number {
			if plan, err = s.planConfirm(work, head.Number); err != nil {
				return err
			}
			planned = true
			if plan != nil && plan.maxBlock < n {
				inBlock = plan
			}
		}
		next, err := s.processBlock(work, cur, n, head.Number, inBlock)
		if errors.Is(err, errNotCanonical) {
			planned = false // the revert below invalidates the plan
			if cur == nil {
				return nil // the first block vanished: start over next time
			}
			var reverted bool
			if cur, reverted, err = s.revert(work, *cur); err != nil {
				return err
			}
			if !reverted {
				return nil // the indexer is mid-reorg: look again next time
			}
			continue
		}
		if err != nil {
			return err
		}
		cur = next
	}
	if cur != nil {
		s.m.setPosition(head.Number, cur.BlockNumber)
	}
	s.last, s.lastKnown = cur, true // what the next round starts from
	if err := interrupted(ctx, lost); err != nil {
		return err
	}
	if !planned {
		if plan, err = s.planConfirm(work, head.Number); err != nil {
			return err
		}
	}
	if plan != nil && !plan.done {
		if err := s.confirmPass(work, plan); err != nil {
			return err
		}
	}
	if err := interrupted(ctx, lost); err != nil {
		return err
	}
	return s.expirePass(work)
}

func interrupted(ctx context.Context, lost <-chan struct{}) error {
	select {
	case <-lost:
		return errLockLost
	default:
	}
	return ctx.Err()
}

// cursor returns settlement's cursor, or nil when it never processed a
// block: the one the last round ended at, when it ended without an error
// (while the lock is held, nobody else moves it; should someone, the
// block's compare-and-set fails), read from the database otherwise.
func (s *Settler) cursor(ctx context.Context) (*store.Cursor, error) {
	if s.lastKnown {
		s.lastKnown = false // until this round ends well
		return s.last, nil
	}
	c, err := s.st.GetCursor(ctx, store.CursorSettlement)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("settlement: read cursor: %w", err)
	}
	return &c, nil
}

// canonical reports whether the cursor's block is still the indexed block
// at its height. A zero hash marks a cursor placed before the first block
// settlement processed, whose hash it never knew.
func (s *Settler) canonical(ctx context.Context, cur store.Cursor, head uint64) (bool, error) {
	if cur.BlockHash == (common.Hash{}) {
		return true, nil
	}
	if cur.BlockNumber > head {
		return false, nil
	}
	b, err := s.st.GetBlock(ctx, cur.BlockNumber)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("settlement: read block %d: %w", cur.BlockNumber, err)
	}
	return b.Hash == cur.BlockHash, nil
}

// processBlock settles block n on top of cur in one database transaction:
// cursor compare-and-set, payments, invoice transitions and their events,
// and the processed-block record commit together or not at all. With c
// non-nil (c.maxBlock below n) the transaction runs a batch of the
// confirmation pass c too, on the same reads and writes: an invoice this
// block pays is then confirmed only if its payments, this block's
// included, all are at or below c.maxBlock, as a pass after the block
// would find.
func (s *Settler) processBlock(ctx context.Context, cur *store.Cursor, n, head uint64, c *confirmation) (*store.Cursor, error) {
	start := time.Now()
	now := s.cfg.Now().UTC()
	var (
		next     store.Cursor
		payments int
		changes  []change
		moves    []move
		// confirming are the confirmation pass's candidates (c), confirmedN
		// how many of them this block's transaction confirmed.
		confirming []int64
		confirmedN int
	)
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		payments, changes, moves, confirming, confirmedN = 0, nil, nil, nil, 0
		b, err := tx.GetBlock(ctx, n)
		if errors.Is(err, store.ErrNotFound) {
			return errNotCanonical
		}
		if err != nil {
			return err
		}
		if cur != nil && cur.BlockHash != (common.Hash{}) && b.ParentHash != cur.BlockHash {
			return errNotCanonical
		}
		next = store.Cursor{Name: store.CursorSettlement, BlockNumber: n, BlockHash: b.Hash, UpdatedAt: now}
		// The compare-and-set comes first: on PostgreSQL its row lock makes
		// a second settler wait here, then fail, before doing any work.
		if err := tx.CompareAndSetCursor(ctx, store.CursorSettlement, cur, next); err != nil {
			return err
		}
		if err := s.step("block.cursor"); err != nil {
			return err
		}
		to, err := s.recipients(ctx, tx, n)
		if err != nil {
			return err
		}
		txs, err := tx.ListInvoiceTxsInBlock(ctx, n, to)
		if err != nil {
			return err
		}
		transfers, err := tx.ListInvoiceTokenTransfersInBlock(ctx, n, to)
		if err != nil {
			return err
		}
		// An incoming is a native-coin transaction or a token transfer to
		// an invoice's deposit address.
		byInvoice := map[int64][]incoming{}
		for _, t := range txs {
			// A zero-value transaction pays nothing; a row of another
			// version of block n (the indexer replaced it meanwhile) is
			// not this block's: the next round sees the new hash.
			if t.ValueWei.IsZero() || t.BlockHash != b.Hash {
				continue
			}
			byInvoice[t.InvoiceID] = append(byInvoice[t.InvoiceID], incoming{tx: t.Hash, log: store.NativeLogIndex,
				from: t.From, value: t.ValueWei, chain: t.ChainID})
		}
		for _, t := range transfers {
			if t.Value.IsZero() || t.BlockHash != b.Hash {
				continue
			}
			token := t.Token
			byInvoice[t.InvoiceID] = append(byInvoice[t.InvoiceID], incoming{tx: t.TxHash, log: t.LogIndex,
				from: t.From, value: t.Value, token: &token, chain: t.ChainID})
		}
		if c != nil {
			// Listed before this block's payments are recorded: they are
			// above c.maxBlock, and keep whatever they pay from confirming.
			if confirming, err = c.list(ctx, tx, s.cfg.BatchSize); err != nil {
				return err
			}
			slices.Sort(confirming) // for the binary search below
		}
		if len(byInvoice)+len(confirming) > 0 {
			ids := slices.Clone(confirming)
			for id := range byInvoice {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			ids = slices.Compact(ids)
			invs, err := tx.GetInvoicesForUpdate(ctx, ids)
			if err != nil {
				return err
			}
			existing, err := tx.ListPaymentsByInvoices(ctx, ids)
			if err != nil {
				return err
			}
			paid := groupPayments(existing)
			var fresh []store.Payment
			rightAsset, wrongAsset, wrongNetwork := map[int64]bool{}, map[int64][]store.Payment{}, map[int64][]store.Payment{}
			before := slices.Clone(invs)
			for i := range invs {
				inv := &invs[i]
				late := inv.Status == store.StatusExpired
				for _, in := range byInvoice[inv.ID] {
					p := store.Payment{InvoiceID: inv.ID, TxHash: in.tx, LogIndex: in.log,
						BlockNumber: n, BlockHash: b.Hash, From: in.from, AmountWei: in.value,
						Late: late, CreatedAt: now, Token: in.token, ChainID: in.chain}
					// The first payment that counts may arrive on another
					// chain the invoice quoted: the invoice moves there
					// and the payment is its own chain's (movesTo).
					if in.chain != inv.ChainID && movesTo(*inv, in, paid[inv.ID], now, s.cfg.LateWindow) {
						moves = append(moves, move{invoiceID: inv.ID, from: inv.ChainID, to: in.chain})
						inv.MoveToChain(in.chain, in.token)
						inv.UpdatedAt = now
						if err := tx.MoveInvoice(ctx, inv); err != nil {
							return fmt.Errorf("move invoice %d to chain %d: %w", inv.ID, in.chain, err)
						}
					}
					// The deposit address is the same on every chain: money
					// sent to it on this chain for an invoice of another is
					// a wrong-network payment (its asset is this chain's,
					// not to be judged against the invoice's chain's). On
					// the invoice's chain it counts when the invoice has a
					// price for its asset on this chain (Accepts: a quote
					// of the same token address on another chain does not
					// count).
					p.WrongNetwork = in.chain != inv.ChainID
					p.WrongAsset = !p.WrongNetwork && !inv.Accepts(in.token)
					fresh = append(fresh, p)
					paid[inv.ID] = append(paid[inv.ID], p)
					switch {
					case p.WrongNetwork:
						wrongNetwork[inv.ID] = append(wrongNetwork[inv.ID], p)
					case p.WrongAsset:
						wrongAsset[inv.ID] = append(wrongAsset[inv.ID], p)
					default:
						rightAsset[inv.ID] = true
					}
				}
			}
			if err := tx.InsertPayments(ctx, fresh); err != nil {
				return fmt.Errorf("record payments: %w", err)
			}
			payments = len(fresh)
			if err := s.step("block.payments"); err != nil {
				return err
			}
			var w writes
			for i, inv := range invs {
				updated, events := inv, []string(nil)
				if rightAsset[inv.ID] {
					var event string
					updated, event = applyPayments(inv, paid[inv.ID], now, s.cfg.LateWindow)
					if event == store.EventInvoiceLatePayment && updated.IsFiat() {
						updated.LateValuation = s.lateValuation(ctx, updated, paid[inv.ID], now)
					}
					events = append(events, event)
				}
				if len(wrongAsset[inv.ID]) > 0 {
					var event string
					updated, event = applyWrongAsset(updated, now)
					events = append(events, event)
				}
				if len(wrongNetwork[inv.ID]) > 0 {
					var event string
					updated, event = applyWrongNetwork(updated, now)
					events = append(events, event)
				}
				if _, ok := slices.BinarySearch(confirming, inv.ID); ok {
					var event string
					updated, event = applyConfirm(updated, paid[inv.ID], c.maxBlock, now)
					if event != "" {
						confirmedN++
					}
					events = append(events, event)
				}
				w.addWrong(before[i], updated, uncounted{asset: wrongAsset[inv.ID], network: wrongNetwork[inv.ID]}, events...)
				w.withPayments(paid[inv.ID])
			}
			if changes, err = s.write(ctx, tx, "block", w, now); err != nil {
				return err
			}
		}
		if err := tx.InsertSettledBlock(ctx, n, b.Hash); err != nil {
			return err
		}
		if n%pruneEvery == 0 && n > uint64(s.cfg.MaxReorgDepth) {
			if err := tx.DeleteSettledBlocks(ctx, n-uint64(s.cfg.MaxReorgDepth), math.MaxUint64); err != nil {
				return err
			}
		}
		return s.step("block.commit")
	})
	if err != nil {
		if errors.Is(err, errNotCanonical) || isCrash(err) {
			return nil, err
		}
		return nil, fmt.Errorf("settlement: block %d: %w", n, err)
	}
	if c != nil {
		c.done = s.confirmedBatch(c, len(confirming), confirmedN)
	}
	if err := s.step("block.committed"); err != nil {
		return nil, err
	}
	s.m.blockTime.Observe(time.Since(start).Seconds())
	s.m.payments.Add(float64(payments))
	s.m.setPosition(max(head, n), n)
	s.record(ctx, changes)
	for _, m := range moves {
		s.log.InfoContext(ctx, "settlement: invoice paid on another chain it quoted; moved there",
			slog.Int64("invoice_id", m.invoiceID), slog.Uint64("from_chain_id", m.from), slog.Uint64("chain_id", m.to),
			slog.Uint64("block", n))
	}
	s.log.DebugContext(ctx, "settlement: block processed",
		slog.Uint64("block", n),
		slog.String("block_hash", next.BlockHash.Hex()),
		slog.Int("payments", payments),
		slog.Uint64("lag", max(head, n)-n))
	return &next, nil
}

// recipients returns the recipients of value in block n that may be
// deposit addresses, or nil — every recipient — while the deposit filter
// is loading or cannot be trusted (deposits.go). Called in the block's
// transaction after the block was read, which is what makes the filter
// complete for it.
func (s *Settler) recipients(ctx context.Context, tx store.Tx, n uint64) ([]common.Address, error) {
	f, ready, err := s.deposits.refresh(ctx, tx)
	if err != nil {
		return nil, err
	}
	if f != s.deposits {
		s.log.InfoContext(ctx, "settlement: loading the deposit address filter", slog.Int("capacity", f.capacity))
	}
	s.deposits = f
	if ready != s.depositsReady {
		s.depositsReady = ready
		inUse := 0.0
		if ready {
			inUse = 1
		}
		s.m.filterInUse.Set(inUse)
		if ready {
			s.log.InfoContext(ctx, "settlement: deposit address filter loaded", slog.Int("addresses", f.n))
		} else {
			s.log.WarnContext(ctx, "settlement: deposit address filter not in use: an invoice was inserted without reserving its derivation index; every recipient is looked up",
				slog.Uint64("next_index", uint64(f.next)))
		}
	}
	if !ready {
		return nil, nil
	}
	to, err := tx.ListBlockRecipients(ctx, n)
	if err != nil {
		return nil, err
	}
	return f.candidates(to), nil
}

func groupPayments(ps []store.Payment) map[int64][]store.Payment {
	out := map[int64][]store.Payment{}
	for _, p := range ps {
		out[p.InvoiceID] = append(out[p.InvoiceID], p)
	}
	return out
}

// move is an invoice moved to the chain a payment arrived on, for the log
// once the block committed.
type move struct {
	invoiceID int64
	from, to  uint64
}

// incoming is money that arrived at a deposit address in a block of
// chain: a native-coin transaction (token nil, log NativeLogIndex) or a
// token transfer.
type incoming struct {
	tx    common.Hash
	log   int
	from  common.Address
	value store.Amount
	token *common.Address
	chain uint64
}

// uncounted are the payments of one block that flag an invoice without
// counting toward it: in another asset (invoice.wrong_asset) and on
// another chain (invoice.wrong_network).
type uncounted struct {
	asset, network []store.Payment
}

// writes are the invoice changes of one transaction, each with the events
// it emits (usually one).
type writes struct {
	old     []store.Invoice
	updated []*store.Invoice
	events  [][]string
	// wrong holds, for an invoice.wrong_asset or invoice.wrong_network
	// event, the payments that caused it (parallel to updated).
	wrong []uncounted
	// payments holds every payment of a fiat invoice (parallel to
	// updated): its events list them, each with its value.
	payments [][]store.Payment
}

// withPayments gives the invoice added last its payments, for its events
// (a fiat invoice's list them with their values). A no-op when the last
// add wrote nothing.
func (w *writes) withPayments(ps []store.Payment) {
	if len(w.payments) < len(w.updated) {
		w.payments = append(w.payments, ps)
	}
}

func (w *writes) add(old, updated store.Invoice, events ...string) {
	w.addWrong(old, updated, uncounted{}, events...)
}

// addWrong is add with the payments an invoice.wrong_asset or
// invoice.wrong_network event among events names.
func (w *writes) addWrong(old, updated store.Invoice, wrong uncounted, events ...string) {
	events = slices.DeleteFunc(events, func(e string) bool { return e == "" })
	if len(events) == 0 {
		return
	}
	for len(w.payments) < len(w.updated) {
		w.payments = append(w.payments, nil) // an earlier add without payments
	}
	w.wrong = append(w.wrong, wrong)
	w.old = append(w.old, old)
	w.updated = append(w.updated, &updated)
	w.events = append(w.events, events)
}

// write stores the updated invoices and their events in tx, in bulk.
// UpdateInvoiceStates checks every version: a writer that changed an
// invoice without locking its row makes it fail with ErrConflict, the
// whole transaction rolls back and the work is retried from a fresh read.
func (s *Settler) write(ctx context.Context, tx store.Tx, step string, w writes, now time.Time) ([]change, error) {
	if len(w.updated) == 0 {
		return nil, nil
	}
	// The events' JSON does not depend on the update: it is built while
	// the database runs the update, from copies of the invoices (the update
	// bumps their versions). On a small machine that shares its cores with
	// the database, this hides most of the encoding (BENCHMARKS.md).
	invs := make([]store.Invoice, len(w.updated))
	for i, inv := range w.updated {
		invs[i] = *inv
	}
	type built struct {
		evs     []store.Event
		changes []change
		err     error
	}
	done := make(chan built, 1)
	go func() {
		var b built
		b.evs, b.changes, b.err = s.events(w, invs, now)
		done <- b
	}()
	err := tx.UpdateInvoiceStates(ctx, w.updated)
	b := <-done
	if err != nil {
		return nil, fmt.Errorf("update invoices: %w", err)
	}
	if err := s.step(step + ".invoice"); err != nil {
		return nil, err
	}
	if b.err != nil {
		return nil, b.err
	}
	if err := tx.InsertEvents(ctx, b.evs); err != nil {
		return nil, fmt.Errorf("write events: %w", err)
	}
	if err := s.step(step + ".events"); err != nil {
		return nil, err
	}
	return b.changes, nil
}

// events are the outbox events of w's invoices (invs: their new states)
// and the changes they record.
func (s *Settler) events(w writes, invs []store.Invoice, now time.Time) ([]store.Event, []change, error) {
	var (
		evs     []store.Event
		changes []change
	)
	for i, inv := range invs {
		for j, typ := range w.events[i] {
			extra := map[string]any{}
			if typ == store.EventInvoiceWrongAsset {
				// What arrived: the asset, amount and transaction of each
				// payment in another asset.
				ps := make([]api.Payment, len(w.wrong[i].asset))
				for j, p := range w.wrong[i].asset {
					ps[j] = api.NewPayment(p, s.cfg.Assets...)
				}
				extra["wrong_asset_payments"] = ps
			}
			if typ == store.EventInvoiceWrongNetwork {
				// What arrived, and on which chain: the asset (by its
				// token address there), amount and transaction of each
				// payment on another chain than the invoice's.
				ps := make([]api.Payment, len(w.wrong[i].network))
				for j, p := range w.wrong[i].network {
					ps[j] = api.NewPayment(p)
				}
				extra["wrong_network_payments"] = ps
			}
			if inv.IsFiat() && i < len(w.payments) && len(w.payments[i]) > 0 {
				// A fiat invoice's events list its payments with their
				// values at the locked quotes.
				extra["payments"] = api.NewPayments(inv, w.payments[i], s.cfg.Assets...)
			}
			ev, err := api.InvoiceEvent(typ, inv, now, extra)
			if err != nil {
				return nil, nil, err
			}
			evs = append(evs, ev)
			from := w.old[i].Status
			if j > 0 { // one transition, however many events
				from = inv.Status
			}
			changes = append(changes, change{invoiceID: inv.ID, from: from, to: inv.Status, event: typ})
		}
	}
	return evs, changes, nil
}

// record counts and logs committed changes.
func (s *Settler) record(ctx context.Context, changes []change) {
	for _, c := range changes {
		s.m.events.WithLabelValues(c.event).Inc()
		if c.from != c.to {
			s.m.transitions.WithLabelValues(c.from, c.to).Inc()
		}
		s.log.DebugContext(ctx, "settlement: invoice changed", slog.Int64("invoice_id", c.invoiceID),
			slog.String("from", c.from), slog.String("to", c.to), slog.String("event", c.event))
	}
}

// revert undoes the processed blocks that are no longer canonical: it
// walks back from cur to the highest processed block still in the indexed
// chain, deletes this chain's payments above it, recomputes the invoices
// they paid (invoice.reverted; an invoice of another chain that lost only
// wrong-network payments keeps its state) and moves the cursor back, in
// one transaction. It
// reports false when cur turned out to be canonical after all.
func (s *Settler) revert(ctx context.Context, cur store.Cursor) (*store.Cursor, bool, error) {
	top := cur.BlockNumber
	lo := top - min(top, uint64(s.cfg.MaxReorgDepth))
	ours, err := s.st.ListSettledBlockHashes(ctx, lo, top)
	if err != nil {
		return nil, false, fmt.Errorf("settlement: read processed blocks: %w", err)
	}
	theirs, err := s.st.ListBlockHashes(ctx, lo, top)
	if err != nil {
		return nil, false, fmt.Errorf("settlement: read indexed blocks: %w", err)
	}
	var (
		anc    *store.Cursor
		lowest = top + 1
	)
	for n := top; ; n-- {
		if h, ok := ours[n]; ok {
			lowest = n
			if theirs[n] == h {
				anc = &store.Cursor{Name: store.CursorSettlement, BlockNumber: n, BlockHash: h}
				break
			}
		}
		if n == lo {
			break
		}
	}
	switch {
	case anc != nil && anc.BlockNumber == top:
		return &cur, false, nil
	case anc == nil && (lowest > top || lowest == 0 || lowest == lo && lo > 0):
		// The history reaches MaxReorgDepth below the cursor (or is
		// missing) and none of it is canonical.
		return nil, false, fmt.Errorf("%w (%d): no processed block at or below %d is in the indexed chain",
			store.ErrReorgTooDeep, s.cfg.MaxReorgDepth, top)
	case anc == nil:
		// Every block settlement ever processed was orphaned: go back to
		// just before the first one. Its hash may be unknown (zero), in
		// which case the next block is not checked against it.
		anc = &store.Cursor{Name: store.CursorSettlement, BlockNumber: lowest - 1}
		if b, err := s.st.GetBlock(ctx, lowest-1); err == nil {
			anc.BlockHash = b.Hash
		}
	}
	s.confirmed.Store(0) // the revert recomputes invoices from older payments
	now := s.cfg.Now().UTC()
	anc.UpdatedAt = now
	var (
		removed []store.Payment
		changes []change
	)
	err = s.st.InTx(ctx, func(tx store.Tx) error {
		changes = nil
		if err := tx.CompareAndSetCursor(ctx, store.CursorSettlement, &cur, *anc); err != nil {
			return err
		}
		if err := s.step("revert.cursor"); err != nil {
			return err
		}
		var err error
		if removed, err = tx.DeletePaymentsFromBlock(ctx, anc.BlockNumber+1); err != nil {
			return err
		}
		if err := tx.DeleteSettledBlocks(ctx, 0, anc.BlockNumber+1); err != nil {
			return err
		}
		if err := s.step("revert.payments"); err != nil {
			return err
		}
		ids := invoiceIDs(removed)
		invs, err := tx.GetInvoicesForUpdate(ctx, ids)
		if err != nil {
			return err
		}
		remaining, err := tx.ListPaymentsByInvoices(ctx, ids)
		if err != nil {
			return err
		}
		left, gone := groupPayments(remaining), groupPayments(removed)
		var w writes
		for _, inv := range invs {
			updated, event := applyRevert(inv, left[inv.ID], now)
			if !slices.ContainsFunc(gone[inv.ID], func(p store.Payment) bool { return p.ChainID == inv.ChainID }) {
				// This chain's reorg removed only payments of an invoice of
				// another chain (wrong-network payments, or payments made
				// before the invoice moved to the chain it is paid on):
				// its own chain's payments decide its state.
				updated, event = applyRevertWrongNetwork(inv, now)
			}
			w.add(inv, updated, event)
			w.withPayments(left[inv.ID])
		}
		if changes, err = s.write(ctx, tx, "revert", w, now); err != nil {
			return err
		}
		return s.step("revert.commit")
	})
	if err != nil {
		if isCrash(err) {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("settlement: revert blocks %d..%d: %w", anc.BlockNumber+1, top, err)
	}
	s.m.reorgs.Inc()
	s.record(ctx, changes)
	s.log.WarnContext(ctx, "settlement: reorg; orphaned blocks reverted",
		slog.Uint64("from_block", anc.BlockNumber+1), slog.Uint64("to_block", top),
		slog.Uint64("ancestor", anc.BlockNumber), slog.Int("payments_removed", len(removed)),
		slog.Int("invoices_reverted", len(changes)))
	return anc, true, nil
}

func invoiceIDs(ps []store.Payment) []int64 {
	var ids []int64
	for _, p := range ps {
		ids = append(ids, p.InvoiceID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// fullConfirmEvery: every so many passes, the confirmation pass reads
// every PAID invoice even when the last pass found them all.
const fullConfirmEvery = 64

// confirmation is a confirmation pass planned at a head: it confirms the
// PAID invoices whose counted payments are all in blocks at or below
// maxBlock, one batch per transaction.
//
// It reads every PAID invoice (ListConfirmable) only when it must. After a
// pass at maxBlock m that confirmed every candidate, an invoice that is
// confirmable at a later pass has its last counted payment above m: it
// became PAID through a block settlement processed after that pass, and
// such blocks are above the head of then, m + Confirmations. So the next
// pass reads only the payments of blocks (m, maxBlock]
// (ListConfirmableSince). What breaks the argument resets it: a revert
// (it recomputes invoices from older payments), taking the lock (another
// process may have settled meanwhile), a pass that failed or left a
// candidate PAID; and every fullConfirmEvery-th pass is a full one anyway.
//
// Under finality "tag" maxBlock is the recorded finalized block (at most
// head), and nothing is confirmed while none is recorded. The argument
// holds the same: maxBlock never exceeds the head of its pass.
type confirmation struct {
	maxBlock uint64
	// since: the candidates are those with a counted payment in a block in
	// (after, maxBlock]; every PAID invoice otherwise.
	since bool
	after uint64
	// done: the pass is over (it ran in the head block's transaction).
	done bool
}

// confirmLister is where a pass lists its candidates: the store, or the
// head block's transaction.
type confirmLister interface {
	ListConfirmable(ctx context.Context, maxBlock uint64, limit int) ([]int64, error)
	ListConfirmableSince(ctx context.Context, after, maxBlock uint64, limit int) ([]int64, error)
}

func (c *confirmation) list(ctx context.Context, r confirmLister, limit int) ([]int64, error) {
	var (
		ids []int64
		err error
	)
	if c.since {
		ids, err = r.ListConfirmableSince(ctx, c.after, c.maxBlock, limit)
	} else {
		ids, err = r.ListConfirmable(ctx, c.maxBlock, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("list confirmable invoices: %w", err)
	}
	return ids, nil
}

// planConfirm plans the confirmation pass at head, nil when no block is
// final yet. It takes over what the last pass left (confirmed): until the
// pass reports it confirmed every candidate, the next plan reads every
// PAID invoice.
func (s *Settler) planConfirm(ctx context.Context, head uint64) (*confirmation, error) {
	maxBlock, ok, err := s.finalBlock(ctx, head)
	if err != nil || !ok {
		return nil, err
	}
	c := &confirmation{maxBlock: maxBlock}
	if last := s.confirmed.Swap(0); last > 0 && last-1 <= maxBlock && s.passes.Add(1)%fullConfirmEvery != 0 {
		c.since, c.after = true, last-1
	}
	return c, nil
}

// confirmedBatch records the outcome of a batch of pass c: n of the
// listed ids confirmed. It reports whether the pass is over.
func (s *Settler) confirmedBatch(c *confirmation, listed, n int) bool {
	switch {
	case n < listed:
		return true // one stayed PAID: the next pass reads every PAID invoice
	case listed < s.cfg.BatchSize:
		s.confirmed.Store(c.maxBlock + 1)
		return true
	}
	return false
}

// confirmPass runs the confirmation pass c on its own, one batch per
// transaction.
func (s *Settler) confirmPass(ctx context.Context, c *confirmation) error {
	for {
		ids, err := c.list(ctx, s.st, s.cfg.BatchSize)
		if err != nil {
			return fmt.Errorf("settlement: %w", err)
		}
		if len(ids) == 0 {
			s.confirmedBatch(c, 0, 0) // every candidate confirmed
			return nil
		}
		n, err := s.batch(ctx, ids, "confirm", func(inv store.Invoice, ps []store.Payment, now time.Time) (store.Invoice, string) {
			return applyConfirm(inv, ps, c.maxBlock, now)
		})
		if err != nil || s.confirmedBatch(c, len(ids), n) {
			return err
		}
	}
}

// finalBlock is the highest final block at the indexed head: head −
// Confirmations (ok false while head < Confirmations); under finality
// "tag" the recorded finalized block, at most head (ok false while none
// is recorded).
func (s *Settler) finalBlock(ctx context.Context, head uint64) (uint64, bool, error) {
	if s.cfg.Finality == store.FinalityTag {
		fin, ok, err := s.st.FinalizedBlock(ctx)
		if err != nil {
			return 0, false, fmt.Errorf("settlement: read the finalized block: %w", err)
		}
		return min(fin, head), ok, nil
	}
	conf := uint64(s.cfg.Confirmations)
	if head < conf {
		return 0, false, nil
	}
	return head - conf, true, nil
}

// expirePass expires the PENDING invoices whose expires_at has passed.
// It runs only after settlement caught up with the indexed head, so that a
// payment already indexed is never counted late because settlement lagged.
func (s *Settler) expirePass(ctx context.Context) error {
	for {
		invs, err := s.st.ListExpiring(ctx, s.cfg.Now().UTC(), s.cfg.BatchSize)
		if err != nil {
			return fmt.Errorf("settlement: list expiring invoices: %w", err)
		}
		if len(invs) == 0 {
			return nil
		}
		ids := make([]int64, len(invs))
		chains := make(map[int64]uint64, len(invs))
		for i, inv := range invs {
			ids[i], chains[inv.ID] = inv.ID, inv.ChainID
		}
		done, err := s.batch(ctx, ids, "expire", func(inv store.Invoice, _ []store.Payment, now time.Time) (store.Invoice, string) {
			if inv.ChainID != chains[inv.ID] {
				// Another chain's settlement moved it there (a payment on
				// another quoted chain) since it was listed: that chain's
				// settlement expires it, once it has settled its blocks.
				return inv, ""
			}
			return applyExpire(inv, now)
		})
		if err != nil || done < len(ids) || len(ids) < s.cfg.BatchSize {
			return err
		}
	}
}

// batch applies rule to the invoices ids in one transaction (locked, with
// their payments) and writes each change with its event. It returns how
// many invoices changed.
func (s *Settler) batch(ctx context.Context, ids []int64, name string,
	rule func(store.Invoice, []store.Payment, time.Time) (store.Invoice, string)) (int, error) {
	now := s.cfg.Now().UTC()
	var changes []change
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		changes = nil
		invs, err := tx.GetInvoicesForUpdate(ctx, ids)
		if err != nil {
			return err
		}
		ps, err := tx.ListPaymentsByInvoices(ctx, ids)
		if err != nil {
			return err
		}
		paid := groupPayments(ps)
		var w writes
		for _, inv := range invs {
			updated, event := rule(inv, paid[inv.ID], now)
			w.add(inv, updated, event)
			w.withPayments(paid[inv.ID])
		}
		if changes, err = s.write(ctx, tx, name, w, now); err != nil {
			return err
		}
		return s.step(name + ".commit")
	})
	if err != nil {
		if isCrash(err) {
			return 0, err
		}
		return 0, fmt.Errorf("settlement: %s pass: %w", name, err)
	}
	s.record(ctx, changes)
	return len(changes), nil
}
