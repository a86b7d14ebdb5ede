package invoice

import (
	"bytes"
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
	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// Refunds and payouts: the API side. A request is checked and recorded
// here, in one database transaction with its idempotency record and its
// events; the sweep role's outbound engine sends it (docs/refunds.md).

// OutboundView is a refund or payout as the merchant API shows it: with
// its claim link (a refund without a destination, in the creating
// response only) and, merchant-paid, the QR code of its payment request.
type OutboundView struct {
	api.Outbound
	ClaimURL string `json:"claim_url,omitempty"`
	QRSVGURL string `json:"qr_svg_url,omitempty"`
}

func (s *Service) outboundViewOf(o store.Outbound) OutboundView {
	v := OutboundView{Outbound: api.NewOutbound(o)}
	if o.PaymentURI != "" {
		v.QRSVGURL = s.cfg.BaseURL + outboundPath(o) + "/qr.svg"
	}
	return v
}

// outboundPath is the API path of a refund or payout.
func outboundPath(o store.Outbound) string {
	if o.Kind == store.OutboundRefund {
		return "/v1/refunds/" + strconv.FormatInt(o.ID, 10)
	}
	return "/v1/payouts/" + strconv.FormatInt(o.ID, 10)
}

// outboundRequest is a validated refund or payout, before the checks that
// need the database.
type outboundRequest struct {
	kind  string
	asset store.Asset
	// assetNamed: the request named the asset (a refund's reason may
	// choose it otherwise).
	assetNamed bool
	amount     store.Amount // zero: computed (a refund's reason)
	reason     string
	// chainID is the chain a wrong-network refund is sent on (the
	// request's chain_id; 0: the one its wrong-network payments arrived on).
	chainID   uint64
	reference string
	dest      *common.Address
	paidBy    string
	fiat      *fiatAmount
}

// fiatAmount is a refund asked for in fiat.
type fiatAmount struct {
	amount store.Fiat
	// rate is "locked" (the invoice's quote) or "current".
	rate string
}

// idempotent runs create in one database transaction, on chain c's store
// (the outbound it records is that chain's), with the
// Idempotency-Key's record: the merchant's row is locked first (its
// refunds and payouts are recorded one after the other, so that limits
// and what is left to refund count every one), the record is inserted,
// create makes its change and its response, and the record is completed
// with that response (sealed) — all or nothing, so a concurrent request
// with the key waits for this one and replays its answer. The same key
// with another request is 422; a key still held by an unfinished invoice
// creation is 409. (The merchant's row is locked before the record is
// inserted: the insert's foreign key takes a share lock on it, and two
// requests that each held that share and then asked for the row lock
// would deadlock.)
func (s *Service) idempotent(ctx context.Context, c *chain, merchantID int64, key string, fp []byte,
	create func(tx store.Tx) (int, []byte, error)) (response, error) {
	for attempt := 0; attempt < maxClaimAttempts; attempt++ {
		now := s.now()
		rec := store.IdempotencyRecord{MerchantID: merchantID, Key: key, RequestHash: fp, Status: store.IdempotencyInFlight,
			LockedUntil: now.Add(s.cfg.IdempotencyLease), CreatedAt: now, ExpiresAt: now.Add(s.cfg.IdempotencyTTL)}
		var resp response
		err := c.st.InTx(ctx, func(tx store.Tx) error {
			if _, err := tx.GetMerchantForUpdate(ctx, merchantID); err != nil {
				return err
			}
			if err := tx.CreateIdempotencyRecord(ctx, rec); err != nil {
				return err
			}
			status, body, err := create(tx)
			if err != nil {
				return err
			}
			sealed, err := s.creds.sealResponse(merchantID, key, body)
			if err != nil {
				return err
			}
			done := rec
			done.Status, done.ResponseStatus, done.ResponseBody = store.IdempotencyDone, &status, sealed
			resp = response{status: status, body: body}
			return tx.CompleteIdempotencyRecord(ctx, done)
		})
		if !errors.Is(err, store.ErrConflict) {
			return resp, err
		}
		prev, err := s.st.GetIdempotencyRecord(ctx, merchantID, key)
		if errors.Is(err, store.ErrNotFound) {
			continue // the conflict was the change's own (a lost race): again
		}
		if err != nil {
			return response{}, err
		}
		if !bytes.Equal(prev.RequestHash, fp) {
			return response{}, problem.Of(problem.CodeKeyReused,
				"this Idempotency-Key was used with a different request (method, path or body)")
		}
		if prev.Status == store.IdempotencyDone {
			return s.replay(merchantID, key, prev)
		}
		return response{}, errInFlight
	}
	return response{}, errInFlight
}

// checkDestination refuses a destination the service holds the key of (a
// deposit address, the sweep wallet, the gas funder, a payout wallet) and
// a contract (native transfers are plain 21,000-gas sends; tokens are
// refused alike, as settlement addresses are). It needs the chain when
// Config.Merchants.Chain is set: run it before any database transaction.
func (s *Service) checkDestination(ctx context.Context, field string, dest common.Address) error {
	if err := s.checkReserved(ctx, field, dest); err != nil {
		return err
	}
	if c := s.cfg.Merchants.Chain; c != nil {
		code, err := c.CodeAt(ctx, dest, nil)
		if err != nil {
			return fmt.Errorf("%w: code at %s: %w", errChainUnavailable, field, err)
		}
		if len(code) > 0 {
			return problem.OfField(problem.CodeDestinationContract, field, field+" "+dest.Hex()+
				" is a contract: refunds and payouts go to externally owned accounts (plain wallet addresses)")
		}
	}
	return nil
}

// checkReserved refuses an address the service holds the key of: a deposit
// address, the sweep wallet, the gas funder or a payout wallet.
func (s *Service) checkReserved(ctx context.Context, field string, a common.Address) error {
	reserved := problem.OfField(problem.CodeDestinationReserved, field, field+" "+a.Hex()+
		" is an address this service holds the key of (a deposit address, the sweep wallet, the gas funder or a payout wallet)")
	if slices.Contains(s.cfg.Merchants.ServiceAddresses, a) {
		return reserved
	}
	if dep, err := s.st.IsDepositAddress(ctx, a); err != nil {
		return err
	} else if dep {
		return reserved
	}
	if _, err := s.st.GetServiceWallet(ctx, a); err == nil {
		return reserved
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// policyOf is the merchant's payout policy (the zero policy when it never
// set one).
func policyOf(ctx context.Context, tx store.Tx, merchantID int64) (store.PayoutPolicy, error) {
	p, err := tx.GetPayoutPolicy(ctx, merchantID)
	if errors.Is(err, store.ErrNotFound) {
		return store.PayoutPolicy{MerchantID: merchantID}, nil
	}
	return p, err
}

// checkDailyLimit refuses a service-paid outbound that would take what the
// merchant's service-paid refunds and payouts sent (or will send) of the
// asset in the last 24 hours above the policy's daily limit. The caller
// holds the merchant's row lock: concurrent requests are counted one after
// the other.
func (s *Service) checkDailyLimit(ctx context.Context, tx store.Tx, policy store.PayoutPolicy, o store.Outbound) error {
	limit := policy.For(o.TokenAddress).DailyLimit
	if o.PaidBy != store.PaidByService || limit == nil {
		return nil
	}
	recent, err := openOutbounds(ctx, tx, store.OutboundFilter{MerchantID: o.MerchantID, PaidBy: store.PaidByService,
		CreatedAfter: o.CreatedAt.Add(-24 * time.Hour)})
	if err != nil {
		return err
	}
	sum := new(big.Int).Set(o.Amount.Big())
	for _, r := range recent {
		if r.ID != o.ID && store.SameToken(r.TokenAddress, o.TokenAddress) {
			sum.Add(sum, r.Amount.Big())
		}
	}
	if sum.Cmp(limit.Big()) > 0 {
		a := o.Asset()
		return problem.OfField(problem.CodeLimitExceeded, "amount", fmt.Sprintf(
			"this would send %s %s in 24 hours, above the daily limit of %s %s (payout settings)",
			a.Format(amountOf(sum)), a.Symbol, a.Format(*limit), a.Symbol))
	}
	return nil
}

// openOutbounds returns every open outbound f selects (FAILED and
// CANCELLED left out by the database), all pages: what limits and refunds
// count must not stop at a page, however many outbounds were made and
// cancelled.
func openOutbounds(ctx context.Context, tx store.Tx, f store.OutboundFilter) ([]store.Outbound, error) {
	f.Statuses, f.Limit = store.OpenOutboundStatuses(), 1000
	var all []store.Outbound
	for {
		page, err := tx.ListOutbounds(ctx, f)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < f.Limit {
			return all, nil
		}
		f.BeforeID = page[len(page)-1].ID
	}
}

func amountOf(x *big.Int) store.Amount {
	a, _ := store.AmountFromBig(x)
	return a
}

// gate sets what a new (or newly claimed) outbound waits for: its
// destination, then a second key's approval (service-paid, above the
// threshold), then the engine (QUEUED) or, merchant-paid, the merchant's
// payment of its request (AWAITING_PAYMENT, the request's URI made here).
func (s *Service) gate(o *store.Outbound, policy store.PayoutPolicy) error {
	if o.PaidBy == store.PaidByService {
		if t := policy.For(o.TokenAddress).ApprovalThreshold; t != nil && o.Amount.Cmp(*t) > 0 {
			o.NeedsApproval = true
		}
	}
	switch {
	case o.Destination == nil:
		o.Status = store.OutboundAwaitingDestination
	case o.NeedsApproval && o.ApprovedAt == nil:
		o.Status = store.OutboundAwaitingApproval
	case o.PaidBy == store.PaidByMerchant:
		uri, err := paymentURI(o.ChainID, o.Asset(), *o.Destination, o.Amount)
		if err != nil {
			return err
		}
		o.Status, o.PaymentURI = store.OutboundAwaitingPayment, uri
	default:
		o.Status = store.OutboundQueued
	}
	return nil
}

// insertEvents writes the events of an outbound entering its status (and,
// first, of its creation).
func insertEvents(ctx context.Context, tx store.Tx, o store.Outbound, created bool, at time.Time) error {
	var types []string
	if created {
		types = append(types, store.OutboundEventType(o.Kind, "created"))
	}
	if t := store.OutboundEventType(o.Kind, o.Status); t != "" {
		types = append(types, t)
	}
	for _, t := range types {
		ev, err := api.OutboundEvent(t, o, at)
		if err != nil {
			return err
		}
		if err := tx.InsertEvent(ctx, &ev); err != nil {
			return err
		}
	}
	return nil
}

// createdBody is the response body of a new outbound.
func (s *Service) createdBody(o store.Outbound, claimToken string) ([]byte, error) {
	v := s.outboundViewOf(o)
	if claimToken != "" {
		v.ClaimURL = s.cfg.ClaimURL + "#" + claimToken
	}
	return json.Marshal(v)
}

// pathID reads the {id} of a route's path; a malformed one is "not found".
func pathID(r *http.Request) int64 {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0
	}
	return id
}

// outboundOf reads the merchant's outbound {id} of a kind; another
// merchant's is "not found", like a missing one.
func (s *Service) outboundOf(w http.ResponseWriter, r *http.Request, kind string) (store.Outbound, bool) {
	o, err := s.outboundOfMerchant(r.Context(), principal(r).Merchant.ID, kind, pathID(r))
	if err != nil {
		s.fail(w, r, err)
		return store.Outbound{}, false
	}
	return o, true
}

// outboundAction adapts an action of the Go API on the merchant's refund or
// payout {id} to a route of one kind.
func outboundAction(act func(*Service, context.Context, Principal, string, int64) (OutboundView, error), kind string) func(*Service, http.ResponseWriter, *http.Request) {
	return func(s *Service, w http.ResponseWriter, r *http.Request) {
		v, err := act(s, r.Context(), principal(r), kind, pathID(r))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// submitPayment answers POST /v1/refunds/{id}/payment and POST
// /v1/payouts/{id}/payment: {"tx_hash": "0x…"} (NamePayment).
func (s *Service) submitPayment(w http.ResponseWriter, r *http.Request, kind string) {
	if !httpapi.CheckJSON(w, r) {
		return
	}
	body, perr := readBody(w, r, s.cfg.MaxBodyBytes)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	ms, perr := members(body, "tx_hash")
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	h, perr := parseTxHashMember("tx_hash", ms["tx_hash"])
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	v, err := s.namePayment(r.Context(), principal(r), kind, pathID(r), h)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// namedPaymentState is the 409 of an outbound that takes no named
// payment: only a merchant-paid one still waiting for its payment does.
func namedPaymentState(o store.Outbound) *problem.Problem {
	if o.PaidBy != store.PaidByMerchant {
		return problem.Of(problem.CodeStateConflict, "the service pays it: only a merchant-paid request takes a named payment")
	}
	if o.Status != store.OutboundAwaitingPayment {
		return problem.Of(problem.CodeStateConflict, "it is "+o.Status+", not waiting for its payment")
	}
	return nil
}

// checkNamedPayment refuses, when h is indexed, a transaction that does
// not pay o; an unindexed one passes (the engine checks it later).
func (s *Service) checkNamedPayment(ctx context.Context, o store.Outbound, h common.Hash) error {
	if perr := namedPaymentState(o); perr != nil {
		return perr
	}
	trs, indexed, err := store.TransfersOf(ctx, s.st, h)
	if err != nil {
		return err
	}
	if !indexed {
		return nil
	}
	why := store.ErrNotThisRequest
	for _, tr := range trs {
		if why = o.PaidWith(tr); why != nil {
			continue
		}
		svc, err := s.st.SentByService(ctx, tr.TxHash, tr.From)
		if err != nil {
			return err
		}
		if !svc {
			return nil
		}
		why = store.ErrSentByService
	}
	return problem.OfField(problem.CodeTransferMismatch, "tx_hash", "transaction "+h.Hex()+" does not pay this request: "+why.Error())
}
