package settlement

import (
	"context"
	"log/slog"
	"time"

	"github.com/holiman/uint256"

	"github.com/evmpay/evmpay/store"
)

var maxAmount = store.AmountFromUint256(new(uint256.Int).SetAllOne())

// The status rules, as pure functions of an invoice and its payments. Each
// returns the next state of the invoice and the event type the change
// emits ("" when nothing changed). The caller writes both in one database
// transaction.

// sumPayments adds the amounts of ps. Payments are bounded by the native
// token's supply, so the uint256 sum cannot overflow in practice; if it
// ever did, the sum saturates at the maximum instead of wrapping.
func sumPayments(ps []store.Payment) store.Amount {
	var sum store.Amount
	for _, p := range ps {
		s, ok := sum.Add(p.AmountWei)
		if !ok {
			return maxAmount
		}
		sum = s
	}
	return sum
}

// counted returns the payments that count toward their invoice
// (store.Payment.Counted): those in the invoice's asset, on the invoice's
// chain. A payment in another asset (WrongAsset) or on another chain
// (WrongNetwork) is recorded but never counted.
func counted(ps []store.Payment) []store.Payment {
	for i, p := range ps {
		if !p.Counted() {
			out := append([]store.Payment(nil), ps[:i]...)
			for _, q := range ps[i+1:] {
				if q.Counted() {
					out = append(out, q)
				}
			}
			return out
		}
	}
	return ps
}

// setTotals sets paid_wei and the flags derived from the counted payments:
// overpaid (more than the amount), underpaid (something, but less than the
// amount) and paid_late (any payment arrived after expiry).
// NeedsAttention is never cleared here: only an operator clears it.
func setTotals(inv *store.Invoice, ps []store.Payment) {
	ps = counted(ps)
	if inv.IsFiat() {
		setFiatTotals(inv, ps)
		return
	}
	sum := sumPayments(ps)
	inv.PaidWei = sum
	c := sum.Cmp(inv.AmountWei)
	inv.Overpaid = c > 0
	inv.Underpaid = c < 0 && !sum.IsZero()
	inv.PaidLate = false
	for _, p := range ps {
		if p.Late {
			inv.PaidLate = true
		}
	}
}

func paidInFull(inv *store.Invoice) bool {
	if inv.IsFiat() {
		return fiatStanding(inv).Paid
	}
	return inv.PaidWei.Cmp(inv.AmountWei) >= 0
}

// setFiatTotals sets a fiat invoice's totals from its counted payments
// (docs/pricing.md): paid_value is their value at the locked quotes of
// their assets, added exactly and rounded down once; paid_wei what arrived
// in its own asset (its first quote's); overpaid when the value passes the
// price, underpaid when something arrived and the value is short of the
// price (within the tolerance or not: a PAID invoice can be underpaid);
// paid_late when any payment arrived after expiry. A valuation that fails
// (it cannot, with quotes made by one pricer) counts nothing and flags the
// invoice for an operator: never paid on an error.
func setFiatTotals(inv *store.Invoice, ps []store.Payment) {
	own := inv.Asset().Token()
	amounts := make([]store.AssetAmount, len(ps))
	var inOwn []store.Payment
	inv.PaidLate = false
	for i, p := range ps {
		amounts[i] = store.AssetAmount{Token: p.Token, Amount: p.AmountWei}
		if store.SameToken(p.Token, own) {
			inOwn = append(inOwn, p)
		}
		inv.PaidLate = inv.PaidLate || p.Late
	}
	inv.PaidWei = sumPayments(inOwn)
	inv.Underpaid, inv.Overpaid = false, false
	if len(ps) == 0 {
		inv.PaidValue = nil
		return
	}
	// Counted payments are on the invoice's chain: valued at its quotes
	// there (a token is matched with its chain, never by address alone).
	v, err := store.ValuePayments(inv.Pricing.QuotesOn(inv.ChainID, inv.ChainID), amounts)
	if err != nil {
		inv.NeedsAttention = true
		v = store.Fiat{Currency: inv.Pricing.Price.Currency}
	}
	inv.PaidValue = &v.Minor
	st := fiatStanding(inv)
	inv.Underpaid = !st.Shortfall.IsZero()
	inv.Overpaid = !st.Excess.IsZero()
}

// fiatStanding is how a fiat invoice's paid value stands against its price
// under its tolerance (an invalid stored tolerance counts as none).
func fiatStanding(inv *store.Invoice) store.Standing {
	paid, _ := inv.PaidFiat()
	st, err := store.Assess(inv.Pricing.Price, paid, inv.Pricing.Tolerance)
	if err != nil {
		st, _ = store.Assess(inv.Pricing.Price, paid, store.Tolerance{})
	}
	return st
}

// sweepLead is the asset a fiat invoice's sweep moves first, chosen when
// the sweep is queued from the payments that count: the native coin when
// some arrived (its sponsored sweep sends exactly what the payer sent),
// else the first quoted token that arrived. The sweep moves the other
// quoted assets that arrived after it, as it moves wrong assets
// (docs/tokens.md). ps are counted payments, on the invoice's chain: the
// lead is one of its quotes on that chain (the sweep runs there).
func sweepLead(inv store.Invoice, ps []store.Payment) *store.Asset {
	for _, native := range []bool{true, false} {
		for _, q := range inv.Pricing.QuotesOn(inv.ChainID, inv.ChainID) {
			if q.Asset.IsNative() != native {
				continue
			}
			for _, p := range ps {
				if store.SameToken(p.Token, q.Asset.Token()) {
					a := q.Asset
					return &a
				}
			}
		}
	}
	return nil
}

// isLateBeyondWindow reports whether a payment now to an EXPIRED invoice
// comes after its late window: recorded, but no longer applied.
func isLateBeyondWindow(inv store.Invoice, now time.Time, lateWindow time.Duration) bool {
	return inv.Status == store.StatusExpired && now.After(inv.ExpiresAt.Add(lateWindow))
}

// applyPayments is the invoice after new payments were recorded; all is
// every payment of the invoice, the new ones included.
//
//   - PENDING: paid in full → PAID (invoice.paid); short → stays PENDING,
//     underpaid (invoice.underpaid, once per block that adds payments).
//   - EXPIRED within the late window: the same as PENDING, with paid_late
//     (a short late payment leaves it EXPIRED).
//   - EXPIRED beyond the late window: recorded, paid_late and
//     needs_attention, stays EXPIRED (invoice.late_payment).
//   - PAID: more money; overpaid (invoice.overpaid). Confirmation now waits
//     for the new payment too.
//   - CONFIRMED, SETTLED: more money after the sweep was queued or done;
//     overpaid and needs_attention, status and sweep untouched
//     (invoice.overpaid).
func applyPayments(inv store.Invoice, all []store.Payment, now time.Time, lateWindow time.Duration) (store.Invoice, string) {
	next := inv
	next.UpdatedAt = now
	setTotals(&next, all)
	switch inv.Status {
	case store.StatusPending, store.StatusExpired:
		if isLateBeyondWindow(inv, now, lateWindow) {
			next.NeedsAttention = true
			return next, store.EventInvoiceLatePayment
		}
		if paidInFull(&next) {
			next.Status = store.StatusPaid
			next.PaidAt = &now
			return next, store.EventInvoicePaid
		}
		return next, store.EventInvoiceUnderpaid
	case store.StatusPaid:
		return next, store.EventInvoiceOverpaid
	default: // CONFIRMED, SETTLED
		next.NeedsAttention = true
		return next, store.EventInvoiceOverpaid
	}
}

// movesTo reports whether money that arrived on another chain than the
// invoice's (in.chain ≠ inv.ChainID) moves the invoice there and counts:
// a fiat invoice that quoted the asset on that chain (Pricing.QuoteOn:
// its token with its chain), that no payment counts toward yet (on any
// chain: paid are all its payments, this block's earlier ones included),
// PENDING, or EXPIRED within the late window (as a payment on its own
// chain would be credited). Otherwise the money is a wrong-network
// payment (applyWrongNetwork).
func movesTo(inv store.Invoice, in incoming, paid []store.Payment, now time.Time, lateWindow time.Duration) bool {
	if !inv.IsFiat() || !inv.AcceptsOn(in.chain, in.token) || len(counted(paid)) > 0 {
		return false
	}
	switch inv.Status {
	case store.StatusPending:
		return true
	case store.StatusExpired:
		return !isLateBeyondWindow(inv, now, lateWindow)
	}
	return false
}

// applyWrongAsset is the invoice after a payment in another asset than its
// own arrived (native coin to a token invoice, another token, a token to a
// native invoice): the payment is recorded but not counted, the invoice is
// flagged needs_attention with its status and totals untouched, and sweep
// moves what arrived to the merchant (invoice.wrong_asset).
func applyWrongAsset(inv store.Invoice, now time.Time) (store.Invoice, string) {
	next := inv
	next.NeedsAttention = true
	next.UpdatedAt = now
	return next, store.EventInvoiceWrongAsset
}

// applyWrongNetwork is the invoice after a payment to its deposit address
// arrived on another chain than its own (the address is the same on every
// chain): the payment is recorded on the chain it arrived on but not
// counted, and the invoice is flagged needs_attention with its status and
// totals untouched (invoice.wrong_network). The money stays at the deposit
// address on that chain.
func applyWrongNetwork(inv store.Invoice, now time.Time) (store.Invoice, string) {
	next := inv
	next.NeedsAttention = true
	next.UpdatedAt = now
	return next, store.EventInvoiceWrongNetwork
}

// applyRevertWrongNetwork is the invoice after a reorg of another chain
// removed only wrong-network payments of it: they never counted, so its
// status, totals, sweep and confirmations stay as they are (its own
// chain's payments are untouched); the event says what happened
// (invoice.reverted) and needs_attention stays for an operator.
func applyRevertWrongNetwork(inv store.Invoice, now time.Time) (store.Invoice, string) {
	next := inv
	next.UpdatedAt = now
	return next, store.EventInvoiceReverted
}

// sweepStarted reports whether the sweep may have moved money: anything
// past QUEUED. Such an invoice can no longer go back.
func sweepStarted(inv store.Invoice) bool {
	return inv.SweepStatus != store.SweepNone && inv.SweepStatus != store.SweepQueued
}

// applyRevert is the invoice after a reorg removed some of its payments;
// remaining is what is left. It always emits invoice.reverted.
//
//   - PAID short of the amount → PENDING (EXPIRED when past expires_at).
//   - CONFIRMED whose sweep is not started (QUEUED): the sweep is
//     un-queued and the invoice goes back to PAID (the confirmation pass
//     confirms it again if its remaining payments are deep enough) or, if
//     short, to PENDING/EXPIRED.
//   - CONFIRMED with a sweep started (FUNDING, SENT, SWEPT, FAILED), or
//     SETTLED: money may have moved, so the status stays and the invoice is
//     flagged needs_attention for an operator.
//   - PENDING, EXPIRED: the totals and flags change, the status stays.
func applyRevert(inv store.Invoice, remaining []store.Payment, now time.Time) (store.Invoice, string) {
	next := inv
	next.UpdatedAt = now
	setTotals(&next, remaining)
	back := func() {
		next.Status = store.StatusPending
		if !now.Before(inv.ExpiresAt) {
			next.Status = store.StatusExpired
		}
		next.PaidAt = nil
	}
	switch inv.Status {
	case store.StatusPaid:
		if !paidInFull(&next) {
			back()
		}
	case store.StatusConfirmed:
		if sweepStarted(inv) {
			next.NeedsAttention = true
			break
		}
		next.SweepStatus = store.SweepNone
		next.ConfirmedAt = nil
		next.SweepAsset = nil // chosen again at the next confirmation
		next.Status = store.StatusPaid
		if !paidInFull(&next) {
			back()
		}
	case store.StatusSettled:
		next.NeedsAttention = true
	}
	return next, store.EventInvoiceReverted
}

// applyConfirm confirms a PAID invoice when every counted payment is in a
// block at or below maxBlock (head − threshold) and the payments still
// cover the amount: CONFIRMED, sweep QUEUED (invoice.confirmed).
func applyConfirm(inv store.Invoice, ps []store.Payment, maxBlock uint64, now time.Time) (store.Invoice, string) {
	ps = counted(ps)
	if inv.Status != store.StatusPaid || len(ps) == 0 {
		return inv, ""
	}
	for _, p := range ps {
		if p.BlockNumber > maxBlock {
			return inv, ""
		}
	}
	next := inv
	setTotals(&next, ps)
	if !paidInFull(&next) {
		return inv, ""
	}
	next.Status = store.StatusConfirmed
	next.ConfirmedAt = &now
	next.SweepStatus = store.SweepQueued
	next.UpdatedAt = now
	if next.IsFiat() {
		next.SweepAsset = sweepLead(next, ps)
	}
	return next, store.EventInvoiceConfirmed
}

// applyExpire expires a PENDING invoice whose expires_at has passed
// (invoice.expired). A PENDING invoice is never paid in full, so what it
// holds stays as underpaid.
func applyExpire(inv store.Invoice, now time.Time) (store.Invoice, string) {
	if inv.Status != store.StatusPending || now.Before(inv.ExpiresAt) {
		return inv, ""
	}
	next := inv
	next.Status = store.StatusExpired
	next.UpdatedAt = now
	return next, store.EventInvoiceExpired
}

// lateValuation values the counted payments of a fiat invoice that
// arrived after its late window (recorded after expires_at + the window:
// the new ones among them): at the locked quotes, and at the rates of the
// moment through the Valuer, when there is one and it has a rate for each
// asset (Current nil otherwise).
func (s *Settler) lateValuation(ctx context.Context, inv store.Invoice, ps []store.Payment, now time.Time) *store.LateValuation {
	cutoff := inv.ExpiresAt.Add(s.cfg.LateWindow)
	perAsset := map[string]*store.AssetAmount{}
	var order []string
	var amounts []store.AssetAmount
	for _, p := range counted(ps) {
		if !p.CreatedAt.After(cutoff) {
			continue
		}
		amounts = append(amounts, store.AssetAmount{Token: p.Token, Amount: p.AmountWei})
		key := "native"
		if p.Token != nil {
			key = p.Token.Hex()
		}
		if perAsset[key] == nil {
			perAsset[key] = &store.AssetAmount{Token: p.Token}
			order = append(order, key)
		}
		perAsset[key].Amount = sumPayments([]store.Payment{{AmountWei: perAsset[key].Amount}, {AmountWei: p.AmountWei}})
	}
	cur := inv.Pricing.Price.Currency
	locked, err := store.ValuePayments(inv.Pricing.QuotesOn(inv.ChainID, inv.ChainID), amounts)
	if err != nil {
		locked = store.Fiat{Currency: cur}
	}
	out := &store.LateValuation{Locked: locked, At: now}
	if s.cfg.Valuer == nil {
		return out
	}
	current := store.Fiat{Currency: cur}
	for _, key := range order {
		a := perAsset[key]
		q, ok := inv.Pricing.QuoteOn(inv.ChainID, inv.ChainID, a.Token)
		if !ok {
			return out
		}
		v, err := s.cfg.Valuer.CurrentValue(ctx, q.Asset, a.Amount, cur.Code)
		if err != nil || v.Currency != cur {
			s.log.WarnContext(ctx, "settlement: no current rate for a late payment", slog.Int64("invoice_id", inv.ID),
				slog.String("asset", q.Asset.Symbol), slog.Any("error", err))
			return out
		}
		sum, ok := current.Minor.Add(v.Minor)
		if !ok {
			return out
		}
		current.Minor = sum
	}
	out.Current = &current
	return out
}
