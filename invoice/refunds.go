package invoice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// fiatRefundAmount converts a refund asked for in fiat into base units of
// the refunded asset, rounded up to the base unit (the payer gets at least
// the fiat amount back): at the quote the invoice locked for the asset when
// it was created (a fiat-priced invoice's Pricing), or at the current rate
// (Config.Pricer). It returns the rate used.
func (s *Service) fiatRefundAmount(ctx context.Context, inv store.Invoice, asset store.Asset, f fiatAmount) (store.Amount, string, error) {
	switch f.rate {
	case "locked":
		if q, ok := inv.Pricing.QuoteOn(inv.ChainID, inv.ChainID, asset.Token()); ok && q.Price.Currency == f.amount.Currency {
			a, err := q.AmountFor(f.amount)
			if err != nil {
				return store.Amount{}, "", problem.OfField(problem.CodeFiatUnavailable, "fiat", err.Error())
			}
			return a, q.Rate.String(), nil
		}
		return store.Amount{}, "", problem.OfField(problem.CodeFiatUnavailable, "fiat",
			"this invoice has no locked quote in "+f.amount.Currency.Code+" for "+asset.Symbol+`: ask in the asset, or at "current" rate`)
	default:
		if s.cfg.Pricer == nil {
			return store.Amount{}, "", problem.OfField(problem.CodeFiatUnavailable, "fiat",
				"no exchange rates are configured here: ask for the refund in the asset")
		}
		qs, err := s.cfg.Pricer.Quotes(ctx, f.amount, []store.Asset{asset}, s.now().Add(time.Minute))
		if err != nil || len(qs) != 1 {
			return store.Amount{}, "", problem.OfField(problem.CodeFiatUnavailable, "fiat",
				fmt.Sprintf("no current rate of %s in %s: %v", asset.Symbol, f.amount.Currency.Code, err))
		}
		return qs[0].Amount, qs[0].Rate.String(), nil
	}
}

// Refund reasons a request may name: the shortcuts compute the amount.
var refundReasons = []string{store.RefundOverpayment, store.RefundWrongAsset, store.RefundWrongNetwork, store.RefundLatePayment, store.RefundFull, store.RefundPartial}

// parseRefundRequest reads a POST /v1/invoices/{id}/refunds body:
//
//	reason       "overpayment", "wrong_asset", "wrong_network",
//	             "late_payment", "full" (the amount is computed) or
//	             "partial" (default: amount given)
//	chain_id     a wrong-network refund's chain (default: the one chain
//	             its wrong-network payments arrived on)
//	amount | amount_formatted | fiat {"amount","currency","rate"}
//	asset        the asset refunded (default the invoice's; a wrong-asset
//	             refund names it unless one other asset was paid)
//	destination  the payer's address; absent: a claim link
//	paid_by      "service" (default) or "merchant"
//	reference    the merchant's own text
func (s *Service) parseRefundRequest(body []byte, inv store.Invoice) (outboundRequest, *problem.Problem) {
	ms, perr := members(body, "reason", "amount", "amount_formatted", "fiat", "asset", "destination", "paid_by", "reference", "chain_id")
	if perr != nil {
		return outboundRequest{}, perr
	}
	req := outboundRequest{kind: store.OutboundRefund, reason: store.RefundPartial, paidBy: store.PaidByService}
	if raw := ms["reason"]; !isNull(raw) {
		var r string
		if json.Unmarshal(raw, &r) != nil || !slices.Contains(refundReasons, r) {
			return req, problem.OfField(problem.CodeInvalidField, "reason", "reason must be one of overpayment, wrong_asset, wrong_network, late_payment, full, partial")
		}
		req.reason = r
	}
	c := s.chainOf(inv.ChainID)
	if raw := ms["chain_id"]; !isNull(raw) {
		if req.reason != store.RefundWrongNetwork {
			return req, problem.OfField(problem.CodeInvalidField, "chain_id",
				"chain_id is for a wrong_network refund; every other refund is sent on the invoice's chain")
		}
		if c, perr = s.parseChain(raw); perr != nil {
			return req, perr
		}
		if c.id == inv.ChainID {
			return req, problem.OfField(problem.CodeInvalidField, "chain_id", fmt.Sprintf(
				"chain %d is the invoice's own: a payment there is no wrong-network payment", c.id))
		}
		req.chainID = c.id
	}
	req.asset = inv.Asset()
	if req.reason == store.RefundWrongNetwork {
		req.asset = c.assets.native // the reason picks it unless named
	}
	if !isNull(ms["asset"]) {
		if req.reason == store.RefundWrongNetwork && req.chainID == 0 {
			return req, problem.OfField(problem.CodeMissingField, "chain_id",
				"a wrong_network refund that names its asset names its chain too (chain_id): the asset is that chain's")
		}
		if req.asset, perr = s.parseAsset(c, ms["asset"]); perr != nil {
			return req, perr
		}
		req.assetNamed = true
	}
	given := 0
	for _, n := range []string{"amount", "amount_formatted", "fiat"} {
		if !isNull(ms[n]) {
			given++
		}
	}
	switch {
	case req.reason == store.RefundPartial && given != 1:
		return req, problem.OfField(problem.CodeMissingField, "amount",
			"give exactly one of amount, amount_formatted and fiat (or a reason that computes it: overpayment, wrong_asset, late_payment, full)")
	case req.reason != store.RefundPartial && given > 0:
		return req, problem.OfField(problem.CodeInvalidField, "amount", "reason "+req.reason+" computes the amount: give no amount")
	case !isNull(ms["fiat"]):
		f, perr := parseFiat(ms["fiat"])
		if perr != nil {
			return req, perr
		}
		req.fiat = &f
	case given == 1:
		if req.amount, perr = s.parseAssetAmount(c, req.asset, ms); perr != nil {
			return req, perr
		}
	}
	return req, s.parseOutboundCommon(ms, &req)
}

// parseOutboundCommon reads destination, paid_by and reference.
func (s *Service) parseOutboundCommon(ms map[string]json.RawMessage, req *outboundRequest) *problem.Problem {
	if raw := ms["destination"]; !isNull(raw) {
		d, perr := parseAddressMember("destination", raw)
		if perr != nil {
			return perr
		}
		req.dest = &d
	}
	if raw := ms["paid_by"]; !isNull(raw) {
		var p string
		if json.Unmarshal(raw, &p) != nil || (p != "service" && p != "merchant") {
			return problem.OfField(problem.CodeInvalidField, "paid_by", `paid_by must be "service" (sent from a wallet the service holds) or "merchant" (a payment request the merchant pays)`)
		}
		req.paidBy = map[string]string{"service": store.PaidByService, "merchant": store.PaidByMerchant}[p]
	}
	var perr *problem.Problem
	req.reference, perr = textMember(ms, "reference", maxOrderIDLen, false)
	return perr
}

// parseFiat reads {"amount": "12.50", "currency": "EUR", "rate": "locked"|"current"},
// with the one strict decoder of every object (members): a member given
// twice, in another case or unknown is refused, never picked.
func parseFiat(raw json.RawMessage) (fiatAmount, *problem.Problem) {
	bad := problem.OfField(problem.CodeInvalidField, "fiat",
		`fiat must be {"amount": "12.50", "currency": "EUR", "rate": "locked" or "current"}`)
	if raw[0] != '{' {
		return fiatAmount{}, bad
	}
	ms, perr := members(raw, "amount", "currency", "rate")
	if perr != nil {
		perr.Field = "fiat." + perr.Field
		return fiatAmount{}, perr
	}
	amount, p1 := stringMember(ms, "amount", 100)
	currency, p2 := stringMember(ms, "currency", 10)
	rate, p3 := stringMember(ms, "rate", 10)
	if p1 != nil || p2 != nil || p3 != nil {
		return fiatAmount{}, bad
	}
	if rate == "" {
		rate = "locked"
	}
	if rate != "locked" && rate != "current" {
		return fiatAmount{}, bad
	}
	f, err := store.ParseFiat(amount, currency)
	if err != nil || f.IsZero() {
		return fiatAmount{}, problem.OfField(problem.CodeInvalidAmount, "fiat", "fiat.amount must be a positive amount of the currency, e.g. \"12.50\" EUR")
	}
	return fiatAmount{amount: f, rate: rate}, nil
}

// receipts is what an invoice received, with the confirmations, per asset
// (tokenKey: "" for the native coin): byToken every payment, counted and
// wrong-asset alike; counted the payments that count toward the invoice
// (its own asset; any quoted asset of a fiat invoice), late ones
// included; late the late ones alone. countedList is counted as a list
// (a fiat invoice's valuation), lastCounted the key of the latest one.
type receipts struct {
	byToken, counted, late map[string]*big.Int
	countedList            []store.AssetAmount
	lastCounted            *string
}

func tokenKey(t *store.Asset) string {
	if a := t.Token(); a != nil {
		return a.Hex()
	}
	return ""
}

func add(m map[string]*big.Int, k string, v *big.Int) {
	if m[k] == nil {
		m[k] = new(big.Int)
	}
	m[k].Add(m[k], v)
}

// of is m[k], zero when absent.
func of(m map[string]*big.Int, k string) *big.Int {
	if v := m[k]; v != nil {
		return v
	}
	return new(big.Int)
}

// confirmedReceipts sums the invoice's confirmed payments: only money with
// the confirmations (under finality "tag", in a block at or below the
// recorded finalized block) may be refunded (a refund of a payment a reorg
// then removes would be money the service never got).
//
// The payments are those that arrived on chain c, whose index tx reads:
// the invoice's own chain, or (a wrong-network refund) another one.
func (s *Service) confirmedReceipts(ctx context.Context, tx store.Tx, inv store.Invoice, c *chain) (receipts, error) {
	rc := receipts{byToken: map[string]*big.Int{}, counted: map[string]*big.Int{}, late: map[string]*big.Int{}}
	head, err := tx.LatestBlock(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return rc, nil
	}
	if err != nil {
		return rc, err
	}
	final := func(block uint64) bool {
		return block <= head.Number && head.Number-block >= uint64(c.confirmations)
	}
	if c.finality == store.FinalityTag {
		fin, ok, err := tx.FinalizedBlock(ctx)
		if err != nil {
			return rc, err
		}
		if !ok {
			return rc, nil // nothing is final yet
		}
		final = func(block uint64) bool { return block <= head.Number && block <= fin }
	}
	ps, err := tx.ListPaymentsByInvoice(ctx, inv.ID)
	if err != nil {
		return rc, err
	}
	for _, p := range ps {
		if p.ChainID != c.id || !final(p.BlockNumber) {
			continue
		}
		a := store.Asset{Address: p.Token}
		k := tokenKey(&a)
		add(rc.byToken, k, p.AmountWei.Big())
		if inv.Accepts(p.Token) && p.Counted() {
			add(rc.counted, k, p.AmountWei.Big())
			rc.countedList = append(rc.countedList, store.AssetAmount{Token: p.Token, Amount: p.AmountWei})
			rc.lastCounted = &k
			if p.Late {
				add(rc.late, k, p.AmountWei.Big())
			}
		}
	}
	return rc, nil
}

// assetOfKey is the asset of a tokenKey configured on chain c.
func (c *chain) assetOfKey(k string) (store.Asset, bool) {
	if k == "" {
		return c.assets.native, true
	}
	return c.assets.lookup(k)
}

// refundAmount fixes a refund's asset and amount against what the invoice
// received and what its other refunds already take, in the transaction
// that records it (the invoice's row is locked: concurrent refunds are
// counted one after the other, and never exceed what was received).
//
// A fiat-priced invoice accepts every quoted asset: its overpayment is the
// value of what counted, at the locked quotes, above the price and the
// value of its open refunds, converted into the refunded asset at its
// quote (rounded up to the base unit); unnamed, that asset is the one of
// the latest counted payment. Its late-payment refund is in the asset of
// its late payments, its full refund in the one asset it received (either
// names the asset when there were several).
func (s *Service) refundAmount(ctx context.Context, tx store.Tx, inv store.Invoice, req *outboundRequest, c *chain) error {
	rc, err := s.confirmedReceipts(ctx, tx, inv, c)
	if err != nil {
		return err
	}
	all, err := openOutbounds(ctx, tx, store.OutboundFilter{InvoiceID: inv.ID, Kind: store.OutboundRefund})
	if err != nil {
		return err
	}
	// What was received and what was refunded are each chain's own.
	refunds := slices.DeleteFunc(all, func(o store.Outbound) bool { return o.ChainID != c.id })
	if perr := s.refundAsset(inv, rc, req, c); perr != nil {
		return perr
	}
	k := tokenKey(&req.asset)
	received := of(rc.byToken, k)
	refunded := new(big.Int)
	var refundedAll []store.AssetAmount
	for _, r := range refunds {
		refundedAll = append(refundedAll, store.AssetAmount{Token: r.TokenAddress, Amount: r.Amount})
		if store.SameToken(r.TokenAddress, req.asset.Token()) {
			refunded.Add(refunded, r.Amount.Big())
		}
	}
	left := new(big.Int).Sub(received, refunded)
	var want *big.Int
	switch req.reason {
	case store.RefundOverpayment:
		if inv.Pricing == nil {
			want = new(big.Int).Sub(of(rc.counted, k), inv.AmountWei.Big())
			want.Sub(want, refunded)
			break
		}
		if want, err = fiatOverpayment(inv, rc, refundedAll, req.asset); err != nil {
			return err
		}
	case store.RefundLatePayment:
		want = new(big.Int).Sub(of(rc.late, k), refunded)
	case store.RefundWrongAsset, store.RefundWrongNetwork, store.RefundFull:
		want = left
	default:
		want = req.amount.Big()
	}
	if req.reason != store.RefundPartial {
		if want.Sign() <= 0 {
			return problem.Of(problem.CodeNothingToRefund, fmt.Sprintf("nothing to refund as %s: received (confirmed) %s %s, already refunded %s",
				req.reason, req.asset.Format(amountOf(received)), req.asset.Symbol, req.asset.Format(amountOf(refunded))))
		}
		req.amount = amountOf(want)
	}
	if want.Cmp(left) > 0 {
		field := "amount"
		if req.fiat != nil {
			field = "fiat"
		}
		return problem.OfField(problem.CodeRefundExceeds, field, fmt.Sprintf(
			"a refund of %s %s is more than is left to refund: received (%s) %s %s, already refunded %s",
			req.asset.Format(req.amount), req.asset.Symbol, c.finalityTerms(), req.asset.Format(amountOf(received)),
			req.asset.Symbol, req.asset.Format(amountOf(refunded))))
	}
	return nil
}

// finalityTerms says what made received money count, for a refusal:
// "with 12 confirmations"; under finality "tag", "in finalized blocks".
func (c *chain) finalityTerms() string {
	if c.finality == store.FinalityTag {
		return "in finalized blocks"
	}
	return fmt.Sprintf("with %d confirmations", c.confirmations)
}

// refundAsset settles the asset of a refund whose reason computes it when
// the request did not name one, and checks the reason fits the asset.
func (s *Service) refundAsset(inv store.Invoice, rc receipts, req *outboundRequest, c *chain) *problem.Problem {
	// keys returns the assets received (confirmed) in m that keep says to.
	keys := func(m map[string]*big.Int, keep func(token *common.Address) bool) []string {
		var out []string
		for k := range m {
			a := store.Asset{}
			if k != "" {
				t := common.HexToAddress(k)
				a.Address = &t
			}
			if keep(a.Token()) {
				out = append(out, k)
			}
		}
		return out
	}
	pick := func(candidates []string, what string) *problem.Problem {
		if len(candidates) == 0 {
			return problem.Of(problem.CodeNothingToRefund, fmt.Sprintf(
				"nothing to refund as %s: nothing was received (with %s) as %s for this invoice", req.reason, c.finalityTerms(), what))
		}
		if len(candidates) != 1 {
			return problem.OfField(problem.CodeNothingToRefund, "asset", fmt.Sprintf(
				"a %s refund needs its asset: %d assets were received (and confirmed) as %s for this invoice", req.reason, len(candidates), what))
		}
		a, ok := c.assetOfKey(candidates[0])
		if !ok {
			return problem.OfField(problem.CodeUnknownAsset, "asset", "the asset paid ("+candidates[0]+") is not one this service accepts")
		}
		req.asset = a
		return nil
	}
	accepted := func(token *common.Address) bool { return inv.Accepts(token) }
	switch req.reason {
	case store.RefundWrongNetwork:
		if !req.assetNamed {
			return pick(keys(rc.byToken, func(*common.Address) bool { return true }), "wrong-network payments on chain "+strconv.FormatUint(c.id, 10))
		}
	case store.RefundWrongAsset:
		if !req.assetNamed {
			return pick(keys(rc.byToken, func(t *common.Address) bool { return !inv.Accepts(t) }), "another asset")
		}
		if inv.Accepts(req.asset.Token()) {
			return problem.OfField(problem.CodeInvalidField, "asset", "a wrong-asset refund is of an asset the invoice does not accept")
		}
	case store.RefundLatePayment:
		if !req.assetNamed && inv.Pricing != nil {
			return pick(keys(rc.late, accepted), "late payments")
		}
		if !inv.Accepts(req.asset.Token()) {
			return problem.OfField(problem.CodeInvalidField, "asset", "a late payment is in an asset the invoice accepts")
		}
	case store.RefundFull:
		if !req.assetNamed && inv.Pricing != nil {
			return pick(keys(rc.byToken, func(*common.Address) bool { return true }), "payments")
		}
	case store.RefundOverpayment:
		if !req.assetNamed && inv.Pricing != nil && rc.lastCounted != nil {
			return pick([]string{*rc.lastCounted}, "the latest payment")
		}
		if !inv.Accepts(req.asset.Token()) {
			return problem.OfField(problem.CodeInvalidField, "asset", "an overpayment is in an asset the invoice accepts")
		}
	}
	return nil
}

// fiatOverpayment is a fiat invoice's overpayment in asset: the value of
// its counted payments at the locked quotes (rounded down to the minor
// unit), less its price and the value of its open refunds, at the quote of
// asset (rounded up to the base unit). Zero or less: nothing to refund.
func fiatOverpayment(inv store.Invoice, rc receipts, refunded []store.AssetAmount, asset store.Asset) (*big.Int, error) {
	// The refund and what it gives back are on the invoice's chain: its
	// quotes there (the same token may be quoted on another chain).
	quotes := inv.Pricing.QuotesOn(inv.ChainID, inv.ChainID)
	q, ok := inv.Pricing.QuoteOn(inv.ChainID, inv.ChainID, asset.Token())
	if !ok {
		return nil, problem.OfField(problem.CodeInvalidField, "asset", "an overpayment is in an asset the invoice quoted")
	}
	paid, err := store.ValuePayments(quotes, rc.countedList)
	if err != nil {
		return nil, fmt.Errorf("invoice %d: value of its payments: %w", inv.ID, err)
	}
	// A refund in an asset without a quote (a wrong-asset one) gives back
	// nothing that counted.
	var quoted []store.AssetAmount
	for _, r := range refunded {
		if _, ok := inv.Pricing.QuoteOn(inv.ChainID, inv.ChainID, r.Token); ok {
			quoted = append(quoted, r)
		}
	}
	back, err := store.ValuePayments(quotes, quoted)
	if err != nil {
		return nil, fmt.Errorf("invoice %d: value of its refunds: %w", inv.ID, err)
	}
	excess := new(big.Int).Sub(paid.Minor.Big(), inv.Pricing.Price.Minor.Big())
	excess.Sub(excess, back.Minor.Big())
	if excess.Sign() <= 0 {
		return new(big.Int), nil
	}
	a, err := q.AmountFor(store.Fiat{Currency: paid.Currency, Minor: amountOf(excess)})
	if err != nil {
		return nil, fmt.Errorf("invoice %d: overpayment in %s: %w", inv.ID, asset.Symbol, err)
	}
	return a.Big(), nil
}

func (s *Service) handleCreateRefund(w http.ResponseWriter, r *http.Request) {
	key, body, ok := s.idempotentBody(w, r)
	if !ok {
		return
	}
	resp, err := s.createRefundFrom(r.Context(), principal(r), pathID(r), key, body)
	if err != nil {
		if errors.Is(err, errInFlight) {
			w.Header().Set("Retry-After", "1")
		}
		s.fail(w, r, err)
		return
	}
	if resp.replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeBody(w, resp.status, resp.body)
}

// createRefundFrom validates a POST /v1/invoices/{id}/refunds body and
// records the refund: the one path of the HTTP API and of CreateRefund.
func (s *Service) createRefundFrom(ctx context.Context, m Principal, invoiceID int64, key string, body []byte) (response, error) {
	inv, err := s.invoiceOfMerchant(ctx, m.Merchant.ID, invoiceID)
	if err != nil {
		return response{}, err
	}
	req, perr := s.parseRefundRequest(body, inv)
	if perr != nil {
		return response{}, perr
	}
	// The chain the refund is sent on: the invoice's, or for a
	// wrong-network refund the chain that money arrived on.
	c := s.chainOf(inv.ChainID)
	if req.reason == store.RefundWrongNetwork {
		if c, err = s.wrongNetworkChain(ctx, inv, req.chainID); err != nil {
			return response{}, err
		}
		if !req.assetNamed {
			req.asset = c.assets.native
		}
	}
	if req.dest != nil {
		if err := s.checkDestination(ctx, "destination", *req.dest); err != nil {
			return response{}, err
		}
	}
	var fiatRate string
	if req.fiat != nil {
		// Converted before the transaction: a current rate may be a
		// network call.
		if req.amount, fiatRate, err = s.fiatRefundAmount(ctx, inv, req.asset, *req.fiat); err != nil {
			return response{}, err
		}
	}
	fp := requestFingerprint("POST", "/v1/invoices/"+strconv.FormatInt(inv.ID, 10)+"/refunds", body)
	return s.idempotent(ctx, c, m.Merchant.ID, key, fp, func(tx store.Tx) (int, []byte, error) {
		locked, err := tx.GetInvoiceForUpdate(ctx, inv.ID)
		if err != nil {
			return 0, nil, err
		}
		if locked.ChainID != inv.ChainID {
			return 0, nil, problem.Of(problem.CodeStateConflict, "the invoice moved to another chain meanwhile (paid there): ask again")
		}
		if err := s.refundAmount(ctx, tx, locked, &req, c); err != nil {
			return 0, nil, err
		}
		o := s.newOutbound(m, req)
		o.InvoiceID, o.ChainID = &inv.ID, c.id
		if req.fiat != nil {
			minor := req.fiat.amount.Minor
			o.FiatCurrency, o.FiatMinor, o.FiatRate, o.FiatRateKind = req.fiat.amount.Currency.Code, &minor, fiatRate, req.fiat.rate
		}
		return s.recordOutbound(ctx, tx, &o)
	})
}

// newOutbound is the record of a request, before its gates.
func (s *Service) newOutbound(p Principal, req outboundRequest) store.Outbound {
	now := s.now()
	o := store.Outbound{ChainID: s.homeChain().id, Kind: req.kind, MerchantID: p.Merchant.ID, Reason: req.reason, Reference: req.reference,
		Amount: req.amount, Destination: req.dest, PaidBy: req.paidBy, CreatedByKey: p.KeyID, CreatedByUser: p.UserID, CreatedAt: now, UpdatedAt: now}
	if req.kind == store.OutboundPayout {
		o.Reason = ""
	}
	o.SetAsset(req.asset)
	return o
}

// recordOutbound checks the policy (daily limit), sets the gates, a claim
// token when there is no destination, and inserts the outbound with its
// events; the caller holds the merchant's row lock (idempotent).
func (s *Service) recordOutbound(ctx context.Context, tx store.Tx, o *store.Outbound) (int, []byte, error) {
	policy, err := policyOf(ctx, tx, o.MerchantID)
	if err != nil {
		return 0, nil, err
	}
	if err := s.checkDailyLimit(ctx, tx, policy, *o); err != nil {
		return 0, nil, err
	}
	if o.Kind == store.OutboundPayout && o.Destination != nil && !policy.Allowed(*o.Destination) {
		return 0, nil, problem.OfField(problem.CodeDestinationRefused, "destination",
			"destination "+o.Destination.Hex()+" is not on the payout allowlist (payout settings)")
	}
	if head, err := tx.LatestBlock(ctx); err == nil {
		o.CreatedBlock = head.Number
	} else if !errors.Is(err, store.ErrNotFound) {
		return 0, nil, err
	}
	var claim string
	if o.Destination == nil {
		tok, hash, err := newLookupToken()
		if err != nil {
			return 0, nil, err
		}
		claim, o.ClaimTokenHash = tok, hash
	}
	if err := s.gate(o, policy); err != nil {
		return 0, nil, err
	}
	if err := tx.CreateOutbound(ctx, o); err != nil {
		return 0, nil, err
	}
	if err := insertEvents(ctx, tx, *o, true, o.CreatedAt); err != nil {
		return 0, nil, err
	}
	body, err := s.createdBody(*o, claim)
	return http.StatusCreated, body, err
}

// outboundQuery reads the query of GET /v1/refunds, /v1/payouts and
// /v1/invoices/{id}/refunds: status, batch_id (payouts), limit, cursor.
func outboundQuery(r *http.Request, kind string) (OutboundQuery, *problem.Problem) {
	var q OutboundQuery
	vals, perr := httpapi.Query(r)
	if perr != nil {
		return q, perr
	}
	for name, vs := range vals {
		v := vs[0]
		if len(vs) > 1 {
			return q, problem.OfField(problem.CodeInvalidParameter, name, name+" must be given once")
		}
		switch {
		case name == "status":
			if v == "" {
				return q, problem.OfField(problem.CodeInvalidParameter, name, "status must be one of the statuses")
			}
			q.Status = v
		case name == "batch_id" && kind == store.OutboundPayout:
			q.BatchID = v
		case name == "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return q, problem.OfField(problem.CodeInvalidParameter, name, "limit must be an integer from 1 to "+strconv.Itoa(maxListLimit))
			}
			q.Limit = n
		case name == "cursor":
			if v == "" {
				return q, problem.OfField(problem.CodeInvalidCursor, name, "cursor is not one this API returned")
			}
			q.Cursor = v
		default:
			return q, problem.OfField(problem.CodeUnknownParameter, name, "unknown query parameter "+strconv.Quote(name))
		}
	}
	return q, nil
}

// listOutboundsHTTP answers a listing of refunds or payouts with list.
func (s *Service) listOutboundsHTTP(w http.ResponseWriter, r *http.Request, kind string,
	list func(context.Context, OutboundQuery) (OutboundPage, error)) {
	q, perr := outboundQuery(r, kind)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	page, err := list(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// wrongNetworkChain is the chain of a wrong-network refund of inv: the
// named one (id), else the one chain its wrong-network payments arrived
// on. The chain must be served: its engine sends the refund.
func (s *Service) wrongNetworkChain(ctx context.Context, inv store.Invoice, id uint64) (*chain, error) {
	if id != 0 {
		c, _ := s.configuredChain(id) // parseChain checked it
		return c, nil
	}
	ps, err := s.st.ListPaymentsByInvoice(ctx, inv.ID)
	if err != nil {
		return nil, err
	}
	var chains []uint64
	for _, p := range ps {
		if p.WrongNetwork && !slices.Contains(chains, p.ChainID) {
			chains = append(chains, p.ChainID)
		}
	}
	switch len(chains) {
	case 0:
		return nil, problem.Of(problem.CodeNothingToRefund, "nothing to refund as wrong_network: no payment to this invoice arrived on another chain")
	case 1:
		c, ok := s.configuredChain(chains[0])
		if !ok {
			return nil, problem.OfField(problem.CodeUnknownChain, "chain_id", fmt.Sprintf("the wrong-network payment arrived on chain %d, which this service does not serve", chains[0]))
		}
		return c, nil
	}
	slices.Sort(chains)
	return nil, problem.OfField(problem.CodeMissingField, "chain_id", fmt.Sprintf(
		"wrong-network payments arrived on chains %v: name the one to refund in chain_id", chains))
}
