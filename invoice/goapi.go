package invoice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/problem"
)

// The Go API (issue #34): every action of the HTTP API is a method here,
// and the HTTP handlers are adapters over the same code — a request body
// is validated by one parser whether it came over HTTP or from these
// methods' typed parameters (encoded as the JSON API's members), each
// action runs in one database transaction, and the answer is the same
// bytes (a replay returns exactly what the first call did).
//
// A method acts as a Principal: the merchant and the key the HTTP API
// authenticated, or, for a host that trusts its caller, Owner (the
// merchant's own key: every scope). Scopes are the HTTP API's business:
// a Go caller is trusted.
//
// Errors are *problem.Problem for what the caller can fix or retry —
// errors.As gives its Code, the stable code the HTTP API answers with
// (ErrorCode does too) — or the store's sentinels (store.ErrNotFound, …)
// and pricing.ErrRateUnavailable, wrapped.

// ErrorCode is the problem code of err — exactly what the HTTP API answers
// it with: the Code of a *problem.Problem, of an invalid merchant's field,
// "unauthorized", "not_found" for store.ErrNotFound, "unavailable" for
// store.ErrUnavailable, "internal" otherwise; "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	p, _ := problemOf(err)
	return p.Code
}

// Owner returns the principal of merchant merchantID's own API key (every
// scope), without a key: what a host that trusts its caller acts with.
// ErrUnauthorized when the merchant is disabled; store.ErrNotFound when
// there is none.
func (s *Service) Owner(ctx context.Context, merchantID int64) (Principal, error) {
	m, err := s.st.GetMerchant(ctx, merchantID)
	if err != nil {
		return Principal{}, fmt.Errorf("invoice: merchant %d: %w", merchantID, err)
	}
	if m.DisabledAt != nil {
		return Principal{}, ErrUnauthorized
	}
	return Principal{Merchant: m}, nil
}

// EnsureMerchant returns the merchant a host knows by externalID, creating
// it with p the first time (created true); later calls return it as it is
// (p is not applied again: change it with UpdateMerchant). A restarting
// host needs no stored API key: it acts with Owner, and reads the webhook
// secret it verifies deliveries with from WebhookSecret. Concurrent calls
// with one external id make one merchant.
func (s *Service) EnsureMerchant(ctx context.Context, externalID string, p MerchantParams) (store.Merchant, bool, error) {
	if externalID == "" || len(externalID) > 200 || textProblem(externalID, false) != "" {
		return store.Merchant{}, false, &invalidMerchant{field: "external_id", reason: "1 to 200 bytes of text without control characters"}
	}
	for range 2 {
		m, err := s.st.GetMerchantByExternalID(ctx, externalID)
		if err == nil {
			return m, false, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return store.Merchant{}, false, err
		}
		p.ExternalID = externalID
		created, err := s.CreateMerchant(ctx, p)
		if err == nil {
			return created.Merchant, true, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return store.Merchant{}, false, err
		}
		// Another call created it meanwhile: read it.
	}
	return store.Merchant{}, false, fmt.Errorf("invoice: merchant %q: %w", externalID, store.ErrConflict)
}

// WebhookSecret returns merchant merchantID's webhook secret (whsec_…), for
// a host that verifies the deliveries it receives.
func (s *Service) WebhookSecret(ctx context.Context, merchantID int64) (string, error) {
	m, err := s.st.GetMerchant(ctx, merchantID)
	if err != nil {
		return "", fmt.Errorf("invoice: merchant %d: %w", merchantID, err)
	}
	return s.creds.WebhookSecret(m)
}

// checkKey is the Go API's check of an idempotency key: the header's rule.
func checkKey(key string) *problem.Problem {
	if key == "" {
		return problem.Of(problem.CodeKeyMissing, "an idempotency key is required")
	}
	if len(key) > maxKeyLen {
		return problem.Of(problem.CodeKeyInvalid, "the idempotency key must be 1 to 255 printable ASCII characters")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e || key[i] == '"' || key[i] == '\\' {
			return problem.Of(problem.CodeKeyInvalid, "the idempotency key must be 1 to 255 printable ASCII characters")
		}
	}
	return nil
}

// InvoiceParams is a new invoice: the members of POST /v1/invoices.
// Either an asset and an amount (Amount, or AmountFormatted in whole
// units), or a Price in a fiat currency that the accepted assets are
// quoted in.
type InvoiceParams struct {
	// ChainID is the chain the invoice is on (one of Service.ChainIDs); 0
	// is New's.
	ChainID uint64
	// Asset is the asset's symbol or token address; "" is the native coin.
	Asset string
	// Amount is in the asset's base units (wei for the native coin).
	Amount *store.Amount
	// AmountFormatted is the amount in whole units ("12.5").
	AmountFormatted string
	// Price prices the invoice in a fiat currency; Accept lists the
	// assets quoted (nil: every asset with a rate).
	Price  *Price
	Accept []string
	// ExpiresIn is the invoice's lifetime, whole seconds. Defaults to
	// Config.DefaultExpiry.
	ExpiresIn   time.Duration
	OrderID     string
	Description string
	// Metadata is a JSON object, returned as it is.
	Metadata json.RawMessage
	// RedirectURL is where the checkout page sends the payer back.
	RedirectURL string
}

// Price is an amount of a fiat currency: {"amount": "49.90", "currency":
// "EUR"}.
type Price struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// body is p as the JSON API's request body.
func (p InvoiceParams) body() ([]byte, error) {
	if p.ExpiresIn%time.Second != 0 {
		return nil, problem.OfField(problem.CodeInvalidField, "expires_in_seconds", "ExpiresIn must be whole seconds")
	}
	return json.Marshal(struct {
		Asset           string          `json:"asset,omitempty"`
		Amount          *store.Amount   `json:"amount,omitempty"`
		AmountFormatted string          `json:"amount_formatted,omitempty"`
		Price           *Price          `json:"price,omitempty"`
		Accept          []string        `json:"accept,omitempty"`
		ExpiresIn       int64           `json:"expires_in_seconds,omitempty"`
		OrderID         string          `json:"order_id,omitempty"`
		Description     string          `json:"description,omitempty"`
		Metadata        json.RawMessage `json:"metadata,omitempty"`
		RedirectURL     string          `json:"redirect_url,omitempty"`
		ChainID         uint64          `json:"chain_id,omitempty"`
	}{p.Asset, p.Amount, p.AmountFormatted, p.Price, p.Accept, int64(p.ExpiresIn / time.Second), p.OrderID,
		p.Description, p.Metadata, p.RedirectURL, p.ChainID})
}

// Created is a new invoice as its creation answers it: the View with, in
// this answer only, the payer's lookup token and checkout URL. Replayed
// tells that the key had made it before (the same answer again).
type Created struct {
	View
	Replayed bool
}

// CreateInvoice makes an invoice for p's merchant, idempotently under key:
// the same key and parameters again answer the first answer (Replayed),
// other parameters 422 idempotency_key_reused, a key still in flight 409.
// An invoice on a chain whose parts stopped (Config.ChainStopped) is 503
// chain_unavailable, with nothing written and the key free again.
func (s *Service) CreateInvoice(ctx context.Context, p Principal, key string, params InvoiceParams) (Created, error) {
	if perr := checkKey(key); perr != nil {
		return Created{}, perr
	}
	body, err := params.body()
	if err != nil {
		return Created{}, err
	}
	resp, err := s.createInvoiceFrom(ctx, p.Merchant, key, requestFingerprint("POST", "/v1/invoices", body), body)
	if err != nil {
		return Created{}, err
	}
	var c Created
	if err := json.Unmarshal(resp.body, &c.View); err != nil {
		return Created{}, fmt.Errorf("invoice: reading a create answer: %w", err)
	}
	c.Replayed = resp.replayed
	return c, nil
}

// createInvoiceFrom validates a POST /v1/invoices body and makes the
// invoice: the one path of the HTTP API and of CreateInvoice.
func (s *Service) createInvoiceFrom(ctx context.Context, m store.Merchant, key string, fp, body []byte) (response, error) {
	req, perr := s.parseInvoiceRequest(body)
	if perr != nil {
		return response{}, perr
	}
	return s.createInvoice(ctx, m, key, fp, req)
}

// Invoice returns merchant merchantID's invoice id; another merchant's is
// store.ErrNotFound, like a missing one.
func (s *Service) Invoice(ctx context.Context, merchantID, id int64) (View, error) {
	inv, err := s.invoiceOfMerchant(ctx, merchantID, id)
	if err != nil {
		return View{}, err
	}
	vs, err := s.views(ctx, []store.Invoice{inv})
	if err != nil {
		return View{}, err
	}
	return vs[0], nil
}

// invoiceOfMerchant reads an invoice of the merchant's.
func (s *Service) invoiceOfMerchant(ctx context.Context, merchantID, id int64) (store.Invoice, error) {
	if id <= 0 {
		return store.Invoice{}, errNotFound
	}
	inv, err := s.st.GetInvoice(ctx, id)
	if err == nil && inv.MerchantID != merchantID {
		err = store.ErrNotFound
	}
	return inv, err
}

// InvoiceQuery selects a page of a merchant's invoices, newest first: the
// query of GET /v1/invoices. Zero fields do not filter.
type InvoiceQuery struct {
	// Statuses keeps invoices in any of these statuses.
	Statuses []string
	// CreatedAfter (inclusive) and CreatedBefore (exclusive) bound the
	// creation time.
	CreatedAfter, CreatedBefore time.Time
	// Limit is the page size, 1 to 100. Defaults to 20.
	Limit int
	// Cursor continues from a page's NextCursor.
	Cursor string
}

// InvoicePage is a page of invoices.
type InvoicePage struct {
	Data    []View `json:"data"`
	HasMore bool   `json:"has_more"`
	// NextCursor continues the listing (InvoiceQuery.Cursor) when
	// HasMore; nil otherwise.
	NextCursor *string `json:"next_cursor"`
}

// ListInvoices returns a page of merchant merchantID's invoices.
func (s *Service) ListInvoices(ctx context.Context, merchantID int64, q InvoiceQuery) (InvoicePage, error) {
	f := store.InvoiceFilter{MerchantID: merchantID, CreatedAfter: q.CreatedAfter, CreatedBefore: q.CreatedBefore,
		Limit: defaultListLimit}
	for _, st := range q.Statuses {
		st = strings.ToUpper(strings.TrimSpace(st))
		if !slices.Contains(invoiceStatuses, st) {
			return InvoicePage{}, problem.OfField(problem.CodeInvalidParameter, "status", "status must be one or more of "+strings.Join(invoiceStatuses, ", "))
		}
		if !slices.Contains(f.Statuses, st) {
			f.Statuses = append(f.Statuses, st)
		}
	}
	var perr *problem.Problem
	if f.Limit, f.BeforeID, perr = pageOf(q.Limit, q.Cursor); perr != nil {
		return InvoicePage{}, perr
	}
	limit := f.Limit
	f.Limit++ // one more tells whether there is a next page
	invs, err := s.st.ListInvoices(ctx, f)
	if err != nil {
		return InvoicePage{}, err
	}
	var out InvoicePage
	if len(invs) > limit {
		invs = invs[:limit]
		out.HasMore = true
		c := encodeCursor(invs[len(invs)-1].ID)
		out.NextCursor = &c
	}
	if out.Data, err = s.views(ctx, invs); err != nil {
		return InvoicePage{}, err
	}
	return out, nil
}

// pageOf checks a page's limit (0: the default) and cursor ("": the
// start), the limit and cursor parameters of every listing.
func pageOf(limit int, cursor string) (int, int64, *problem.Problem) {
	if limit == 0 {
		limit = defaultListLimit
	}
	if limit < 1 || limit > maxListLimit {
		return 0, 0, problem.OfField(problem.CodeInvalidParameter, "limit", "limit must be an integer from 1 to "+strconv.Itoa(maxListLimit))
	}
	if cursor == "" {
		return limit, 0, nil
	}
	id, ok := decodeCursor(cursor)
	if !ok {
		return 0, 0, problem.OfField(problem.CodeInvalidCursor, "cursor", "cursor is not one this API returned")
	}
	return limit, id, nil
}

// RefundParams is a refund: the members of POST /v1/invoices/{id}/refunds
// (docs/refunds.md).
type RefundParams struct {
	// Reason is "overpayment", "wrong_asset", "late_payment", "full" (the
	// amount is computed) or "partial" (the default: give exactly one of
	// Amount, AmountFormatted and Fiat).
	Reason          string
	Amount          *store.Amount
	AmountFormatted string
	Fiat            *FiatAmount
	// Asset is the asset refunded: the invoice's by default.
	Asset string
	// Destination is the payer's address; nil makes a claim link.
	Destination *common.Address
	// PaidBy is "service" (the default) or "merchant".
	PaidBy    string
	Reference string
}

// FiatAmount is a refund asked for in fiat: converted at the invoice's
// locked quote (Rate "locked", the default) or the current rate
// ("current").
type FiatAmount struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	Rate     string `json:"rate,omitempty"`
}

func (p RefundParams) body() ([]byte, error) {
	return json.Marshal(struct {
		Reason          string          `json:"reason,omitempty"`
		Amount          *store.Amount   `json:"amount,omitempty"`
		AmountFormatted string          `json:"amount_formatted,omitempty"`
		Fiat            *FiatAmount     `json:"fiat,omitempty"`
		Asset           string          `json:"asset,omitempty"`
		Destination     *common.Address `json:"destination,omitempty"`
		PaidBy          string          `json:"paid_by,omitempty"`
		Reference       string          `json:"reference,omitempty"`
	}{p.Reason, p.Amount, p.AmountFormatted, p.Fiat, p.Asset, p.Destination, p.PaidBy, p.Reference})
}

// OutboundCreated is a new refund or payout as its creation answers it:
// with its claim link (a refund without a destination) in this answer
// only. Replayed tells that the key had made it before.
type OutboundCreated struct {
	OutboundView
	Replayed bool
}

func outboundCreated(resp response) (OutboundCreated, error) {
	var c OutboundCreated
	if err := json.Unmarshal(resp.body, &c.OutboundView); err != nil {
		return OutboundCreated{}, fmt.Errorf("invoice: reading a create answer: %w", err)
	}
	c.Replayed = resp.replayed
	return c, nil
}

// CreateRefund refunds (part of) what invoice invoiceID received,
// idempotently under key, never more than it received with the
// confirmations (under finality "tag", in finalized blocks) less its other
// refunds (docs/refunds.md).
func (s *Service) CreateRefund(ctx context.Context, p Principal, invoiceID int64, key string, params RefundParams) (OutboundCreated, error) {
	if perr := checkKey(key); perr != nil {
		return OutboundCreated{}, perr
	}
	body, err := params.body()
	if err != nil {
		return OutboundCreated{}, err
	}
	resp, err := s.createRefundFrom(ctx, p, invoiceID, key, body)
	if err != nil {
		return OutboundCreated{}, err
	}
	return outboundCreated(resp)
}

// PayoutParams is a payout: the members of POST /v1/payouts.
type PayoutParams struct {
	// Asset is the asset's symbol or token address; "" is the native coin.
	Asset           string
	Amount          *store.Amount
	AmountFormatted string
	Destination     common.Address
	// PaidBy is "service" (the default) or "merchant".
	PaidBy    string
	Reference string
}

func (p PayoutParams) body() ([]byte, error) {
	var dest *common.Address
	if p.Destination != (common.Address{}) {
		dest = &p.Destination
	}
	return json.Marshal(struct {
		Asset           string          `json:"asset,omitempty"`
		Amount          *store.Amount   `json:"amount,omitempty"`
		AmountFormatted string          `json:"amount_formatted,omitempty"`
		Destination     *common.Address `json:"destination,omitempty"`
		PaidBy          string          `json:"paid_by,omitempty"`
		Reference       string          `json:"reference,omitempty"`
	}{p.Asset, p.Amount, p.AmountFormatted, dest, p.PaidBy, p.Reference})
}

// CreatePayout sends the merchant's money to an address, idempotently
// under key, within its payout settings (docs/refunds.md).
func (s *Service) CreatePayout(ctx context.Context, p Principal, key string, params PayoutParams) (OutboundCreated, error) {
	if perr := checkKey(key); perr != nil {
		return OutboundCreated{}, perr
	}
	body, err := params.body()
	if err != nil {
		return OutboundCreated{}, err
	}
	req, _, perr := s.parsePayout(body, false)
	if perr != nil {
		return OutboundCreated{}, perr
	}
	resp, err := s.createPayout(ctx, p, key, requestFingerprint("POST", "/v1/payouts", body), req, "")
	if err != nil {
		return OutboundCreated{}, err
	}
	return outboundCreated(resp)
}

// Refund returns the merchant's refund id.
func (s *Service) Refund(ctx context.Context, merchantID, id int64) (OutboundView, error) {
	return s.outboundViewOfMerchant(ctx, merchantID, store.OutboundRefund, id)
}

// Payout returns the merchant's payout id.
func (s *Service) Payout(ctx context.Context, merchantID, id int64) (OutboundView, error) {
	return s.outboundViewOfMerchant(ctx, merchantID, store.OutboundPayout, id)
}

func (s *Service) outboundViewOfMerchant(ctx context.Context, merchantID int64, kind string, id int64) (OutboundView, error) {
	o, err := s.outboundOfMerchant(ctx, merchantID, kind, id)
	if err != nil {
		return OutboundView{}, err
	}
	return s.outboundViewOf(o), nil
}

// outboundOfMerchant reads the merchant's outbound id of a kind ("": either
// kind); another merchant's is store.ErrNotFound, like a missing one.
func (s *Service) outboundOfMerchant(ctx context.Context, merchantID int64, kind string, id int64) (store.Outbound, error) {
	if id <= 0 {
		return store.Outbound{}, errNotFound
	}
	o, err := s.st.GetOutbound(ctx, id)
	if err == nil && (o.MerchantID != merchantID || (kind != "" && o.Kind != kind)) {
		err = store.ErrNotFound
	}
	return o, err
}

// OutboundQuery selects a page of a merchant's refunds or payouts, newest
// first: the query of GET /v1/refunds and GET /v1/payouts.
type OutboundQuery struct {
	// InvoiceID keeps one invoice's refunds.
	InvoiceID int64
	// Status keeps one status.
	Status string
	// BatchID keeps one batch's payouts.
	BatchID string
	// Limit is the page size, 1 to 100. Defaults to 20.
	Limit  int
	Cursor string
}

// OutboundPage is a page of refunds or payouts.
type OutboundPage struct {
	Data       []OutboundView `json:"data"`
	HasMore    bool           `json:"has_more"`
	NextCursor *string        `json:"next_cursor"`
}

// ListRefunds returns a page of the merchant's refunds.
func (s *Service) ListRefunds(ctx context.Context, merchantID int64, q OutboundQuery) (OutboundPage, error) {
	if q.InvoiceID != 0 {
		if _, err := s.invoiceOfMerchant(ctx, merchantID, q.InvoiceID); err != nil {
			return OutboundPage{}, err
		}
	}
	return s.listOutbounds(ctx, store.OutboundFilter{MerchantID: merchantID, Kind: store.OutboundRefund, InvoiceID: q.InvoiceID}, q)
}

// ListPayouts returns a page of the merchant's payouts.
func (s *Service) ListPayouts(ctx context.Context, merchantID int64, q OutboundQuery) (OutboundPage, error) {
	return s.listOutbounds(ctx, store.OutboundFilter{MerchantID: merchantID, Kind: store.OutboundPayout, BatchID: q.BatchID}, q)
}

func (s *Service) listOutbounds(ctx context.Context, f store.OutboundFilter, q OutboundQuery) (OutboundPage, error) {
	if q.Status != "" {
		if !slices.Contains(store.OutboundStatuses(), q.Status) {
			return OutboundPage{}, problem.OfField(problem.CodeInvalidParameter, "status", "status must be one of the statuses")
		}
		f.Statuses = []string{q.Status}
	}
	var perr *problem.Problem
	if f.Limit, f.BeforeID, perr = pageOf(q.Limit, q.Cursor); perr != nil {
		return OutboundPage{}, perr
	}
	limit := f.Limit
	f.Limit++
	os, err := s.st.ListOutbounds(ctx, f)
	if err != nil {
		return OutboundPage{}, err
	}
	out := OutboundPage{Data: make([]OutboundView, 0, min(len(os), limit))}
	if len(os) > limit {
		os = os[:limit]
		out.HasMore = true
		c := encodeCursor(os[len(os)-1].ID)
		out.NextCursor = &c
	}
	for _, o := range os {
		out.Data = append(out.Data, s.outboundViewOf(o))
	}
	return out, nil
}

// Approve approves the merchant's refund or payout id that waits for an
// approval: by a principal other than the one that made it (403
// approval_same_key).
func (s *Service) Approve(ctx context.Context, p Principal, id int64) (OutboundView, error) {
	return s.approve(ctx, p, "", id)
}

func (s *Service) approve(ctx context.Context, p Principal, kind string, id int64) (OutboundView, error) {
	return s.transition(ctx, p, kind, id, func(o *store.Outbound) *problem.Problem {
		if o.Status != store.OutboundAwaitingApproval {
			return problem.Of(problem.CodeStateConflict, "it is "+o.Status+", not waiting for an approval")
		}
		if o.CreatedByKey == p.KeyID && o.CreatedByUser == p.UserID {
			return problem.Of(problem.CodeApprovalSameKey, "the key or person that made it cannot approve it: approve with a second API key or user that has the approve scope")
		}
		now, key, user := s.now(), p.KeyID, p.UserID
		o.ApprovedByKey, o.ApprovedAt, o.Status = &key, &now, store.OutboundQueued
		if user != 0 {
			o.ApprovedByUser = &user
		}
		return nil
	})
}

// Reject turns down the merchant's refund or payout id that waits for an
// approval.
func (s *Service) Reject(ctx context.Context, p Principal, id int64) (OutboundView, error) {
	return s.reject(ctx, p, "", id)
}

func (s *Service) reject(ctx context.Context, p Principal, kind string, id int64) (OutboundView, error) {
	return s.transition(ctx, p, kind, id, func(o *store.Outbound) *problem.Problem {
		if o.Status != store.OutboundAwaitingApproval {
			return problem.Of(problem.CodeStateConflict, "it is "+o.Status+", not waiting for an approval")
		}
		o.Status, o.Error = store.OutboundCancelled, "rejected by an approver"
		return nil
	})
}

// Cancel stops the merchant's refund or payout id before anything was
// sent: once its send is signed (BROADCAST) it can no longer be taken back
// (409 state_conflict).
func (s *Service) Cancel(ctx context.Context, p Principal, id int64) (OutboundView, error) {
	return s.cancel(ctx, p, "", id)
}

func (s *Service) cancel(ctx context.Context, p Principal, kind string, id int64) (OutboundView, error) {
	return s.transition(ctx, p, kind, id, cancelChange)
}

func cancelChange(o *store.Outbound) *problem.Problem {
	switch o.Status {
	case store.OutboundAwaitingDestination, store.OutboundAwaitingApproval, store.OutboundQueued, store.OutboundAwaitingPayment:
		o.Status, o.Error = store.OutboundCancelled, "cancelled by the merchant"
		return nil
	}
	return problem.Of(problem.CodeStateConflict, "it is "+o.Status+": only a refund or payout not yet sent can be cancelled")
}

// NamePayment records txHash as the payment of the merchant's merchant-paid
// refund or payout id (docs/refunds.md, "Which transfer pays a
// merchant-paid request"): an indexed transaction that does not pay it is
// refused (422 transfer_mismatch); an unindexed one is checked later.
func (s *Service) NamePayment(ctx context.Context, p Principal, id int64, txHash common.Hash) (OutboundView, error) {
	return s.namePayment(ctx, p, "", id, txHash)
}

func (s *Service) namePayment(ctx context.Context, p Principal, kind string, id int64, h common.Hash) (OutboundView, error) {
	o, err := s.outboundOfMerchant(ctx, p.Merchant.ID, kind, id)
	if err != nil {
		return OutboundView{}, err
	}
	if err := s.checkNamedPayment(ctx, o, h); err != nil {
		return OutboundView{}, err
	}
	return s.transition(ctx, p, kind, id, func(o *store.Outbound) *problem.Problem {
		if perr := namedPaymentState(*o); perr != nil {
			return perr
		}
		o.SubmittedTxHash, o.Error = &h, ""
		return nil
	})
}

// transition changes the merchant's outbound id of a kind ("": either)
// under its row lock, with the event of a new status: change returns the
// problem when the outbound's state does not allow it.
func (s *Service) transition(ctx context.Context, p Principal, kind string, id int64, change func(o *store.Outbound) *problem.Problem) (OutboundView, error) {
	if _, err := s.outboundOfMerchant(ctx, p.Merchant.ID, kind, id); err != nil {
		return OutboundView{}, err
	}
	now := s.now()
	var out store.Outbound
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		cur, err := tx.GetOutboundForUpdate(ctx, id)
		if err != nil {
			return err
		}
		before := cur.Status
		if perr := change(&cur); perr != nil {
			return perr
		}
		cur.UpdatedAt = now
		if err := tx.UpdateOutbound(ctx, &cur); err != nil {
			return err
		}
		out = cur
		if cur.Status == before {
			return nil
		}
		return insertEvents(ctx, tx, cur, false, now)
	})
	if err != nil {
		return OutboundView{}, err
	}
	return s.outboundViewOf(out), nil
}

// PayoutWallet returns the merchant's payout wallet, recorded by the sweep
// role (store.ErrNotFound-coded problem until it is).
func (s *Service) PayoutWallet(ctx context.Context, merchantID int64) (PayoutWallet, error) {
	wl, err := s.st.GetPayoutWallet(ctx, merchantID)
	if errors.Is(err, store.ErrNotFound) {
		return PayoutWallet{}, problem.Of(problem.CodeNotFound, "the payout wallet is not set up yet: the sweep role records it within a block; retry shortly")
	}
	if err != nil {
		return PayoutWallet{}, err
	}
	home := s.homeChain().id
	return PayoutWallet{Address: store.ChecksumAddress(wl.Address), ChainID: home,
		PaymentURI: "ethereum:" + wl.Address.Hex() + "@" + strconv.FormatUint(home, 10), CreatedAt: wl.CreatedAt.UTC()}, nil
}

// LedgerQuery bounds a ledger export: entries with At in [From, To); zero
// bounds do not bound.
type LedgerQuery struct {
	From, To time.Time
}

// Ledger yields merchant merchantID's ledger entries in (at, id) order,
// read a page at a time (memory does not grow with the period); it stops
// at the first error, which it yields.
func (s *Service) Ledger(ctx context.Context, merchantID int64, q LedgerQuery) iter.Seq2[api.LedgerEntry, error] {
	return s.ledger(ctx, &merchantID, q)
}

// AllLedger is Ledger for the operator: every merchant's entries and the
// service's own (the sweep wallet's, the gas funder's).
func (s *Service) AllLedger(ctx context.Context, q LedgerQuery) iter.Seq2[api.LedgerEntry, error] {
	return s.ledger(ctx, nil, q)
}

func (s *Service) ledger(ctx context.Context, merchantID *int64, q LedgerQuery) iter.Seq2[api.LedgerEntry, error] {
	return func(yield func(api.LedgerEntry, error) bool) {
		f := store.LedgerFilter{MerchantID: merchantID, From: q.From, To: q.To, Limit: ledgerPage}
		assets := s.homeChain().assets.list
		for {
			page, err := s.st.ListLedgerEntries(ctx, f)
			if err != nil {
				yield(api.LedgerEntry{}, err)
				return
			}
			for _, e := range page {
				if !yield(api.NewLedgerEntry(e, assets...), nil) {
					return
				}
			}
			if len(page) < f.Limit {
				return
			}
			last := page[len(page)-1]
			f.AfterAt, f.AfterID = last.At, last.ID
		}
	}
}
