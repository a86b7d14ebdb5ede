package invoice

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// maxBatchItems bounds the payouts of one batch request.
const maxBatchItems = 100

// batchKeyPrefix namespaces a batch item's idempotency key among the
// merchant's keys.
const batchKeyPrefix = "payouts/item/"

// parsePayout reads one payout: asset, amount | amount_formatted,
// destination (required), paid_by, reference; in a batch also its own
// idempotency_key.
func (s *Service) parsePayout(raw []byte, inBatch bool) (outboundRequest, string, *problem.Problem) {
	names := []string{"asset", "amount", "amount_formatted", "destination", "paid_by", "reference"}
	if inBatch {
		names = append(names, "idempotency_key")
	}
	ms, perr := members(raw, names...)
	if perr != nil {
		return outboundRequest{}, "", perr
	}
	req := outboundRequest{kind: store.OutboundPayout, paidBy: store.PaidByService}
	if req.asset, perr = s.parseAsset(s.homeChain(), ms["asset"]); perr != nil {
		return req, "", perr
	}
	if req.amount, perr = s.parseAssetAmount(s.homeChain(), req.asset, ms); perr != nil {
		return req, "", perr
	}
	if isNull(ms["destination"]) {
		return req, "", problem.OfField(problem.CodeMissingField, "destination", "a payout needs its destination")
	}
	if perr = s.parseOutboundCommon(ms, &req); perr != nil {
		return req, "", perr
	}
	var key string
	if inBatch {
		var k string
		if raw := ms["idempotency_key"]; isNull(raw) || json.Unmarshal(raw, &k) != nil {
			return req, "", problem.OfField(problem.CodeKeyMissing, "idempotency_key", "every batch item needs its idempotency_key")
		}
		if k == "" || len(k) > maxKeyLen-len(batchKeyPrefix) {
			return req, "", problem.OfField(problem.CodeKeyInvalid, "idempotency_key", "idempotency_key must be 1 to 240 printable ASCII characters")
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x20 || k[i] > 0x7e {
				return req, "", problem.OfField(problem.CodeKeyInvalid, "idempotency_key", "idempotency_key must be printable ASCII")
			}
		}
		key = batchKeyPrefix + k
	}
	return req, key, nil
}

// createPayout records one payout under its idempotency key (the merchant
// row locked: its daily limit counted against every concurrent one).
func (s *Service) createPayout(ctx context.Context, p Principal, key string, fp []byte, req outboundRequest, batch string) (response, error) {
	if err := s.checkDestination(ctx, "destination", *req.dest); err != nil {
		return response{}, err
	}
	return s.idempotent(ctx, s.homeChain(), p.Merchant.ID, key, fp, func(tx store.Tx) (int, []byte, error) {
		o := s.newOutbound(p, req)
		o.BatchID = batch
		return s.recordOutbound(ctx, tx, &o)
	})
}

// handleCreatePayout answers POST /v1/payouts: one payout (the request's
// Idempotency-Key) or a batch, {"items": [...]}, each item with its own
// idempotency_key and its own answer, made (or replayed) independently.
func (s *Service) handleCreatePayout(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	if !httpapi.CheckJSON(w, r) {
		return
	}
	body, perr := readBody(w, r, s.cfg.MaxBodyBytes)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	if ms, perr := members(body, "items"); perr == nil && !isNull(ms["items"]) {
		s.createBatch(w, r, p, ms["items"])
		return
	}
	key, perr := idempotencyKey(r)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	req, _, perr := s.parsePayout(body, false)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	resp, err := s.createPayout(r.Context(), p, key, requestFingerprint(r.Method, "/v1/payouts", body), req, "")
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

// batchItem is one item's answer in a batch response: its payout, or its
// problem.
type batchItem struct {
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Status         int             `json:"status"`
	Replayed       bool            `json:"replayed,omitempty"`
	Payout         json.RawMessage `json:"payout,omitempty"`
	Problem        *itemProblem    `json:"problem,omitempty"`
}

// itemProblem is a batch item's failure, as a problem document's members.
type itemProblem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	Field  string `json:"field,omitempty"`
}

func (s *Service) createBatch(w http.ResponseWriter, r *http.Request, p Principal, raw json.RawMessage) {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil || len(items) == 0 || len(items) > maxBatchItems {
		problem.Write(w, problem.OfField(problem.CodeInvalidField, "items", fmt.Sprintf("items must be an array of 1 to %d payouts", maxBatchItems)))
		return
	}
	batch, err := newBatchID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		BatchID string      `json:"batch_id"`
		Items   []batchItem `json:"items"`
	}{BatchID: batch, Items: make([]batchItem, len(items))}
	for i, item := range items {
		req, key, perr := s.parsePayout(item, true)
		bi := batchItem{}
		if key != "" {
			bi.IdempotencyKey = key[len(batchKeyPrefix):]
		}
		if perr == nil {
			resp, err := s.createPayout(r.Context(), p, key, requestFingerprint(r.Method, r.URL.EscapedPath()+"#item", item), req, batch)
			if err == nil {
				bi.Status, bi.Replayed, bi.Payout = resp.status, resp.replayed, resp.body
				out.Items[i] = bi
				continue
			}
			var ok bool
			if perr, ok = asProblem(err); !ok {
				s.fail(w, r, err) // the database: the items before stand, each idempotent
				return
			}
		}
		bi.Status = perr.Status
		bi.Problem = &itemProblem{Type: problem.TypePrefix + perr.Code, Title: http.StatusText(perr.Status), Status: perr.Status,
			Detail: perr.Detail, Code: perr.Code, Field: perr.Field}
		out.Items[i] = bi
	}
	writeJSON(w, http.StatusOK, out)
}

// asProblem is the problem an error is to a client, when it is one of the
// request's (not a failure of the service).
func asProblem(err error) (*problem.Problem, bool) {
	var pe *problem.Problem
	if errors.As(err, &pe) {
		return pe, true
	}
	return nil, false
}

// newBatchID is a batch's id: "pb_" and 96 random bits.
func newBatchID() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "pb_" + base64.RawURLEncoding.EncodeToString(b), nil
}

func (s *Service) handleListPayouts(w http.ResponseWriter, r *http.Request) {
	mid := principal(r).Merchant.ID
	s.listOutboundsHTTP(w, r, store.OutboundPayout, func(ctx context.Context, q OutboundQuery) (OutboundPage, error) {
		return s.ListPayouts(ctx, mid, q)
	})
}

func (s *Service) handleListRefunds(w http.ResponseWriter, r *http.Request) {
	mid := principal(r).Merchant.ID
	s.listOutboundsHTTP(w, r, store.OutboundRefund, func(ctx context.Context, q OutboundQuery) (OutboundPage, error) {
		return s.ListRefunds(ctx, mid, q)
	})
}

func (s *Service) handleListInvoiceRefunds(w http.ResponseWriter, r *http.Request) {
	mid, invoiceID := principal(r).Merchant.ID, pathID(r)
	if invoiceID == 0 {
		problem.Write(w, errNotFound)
		return
	}
	s.listOutboundsHTTP(w, r, store.OutboundRefund, func(ctx context.Context, q OutboundQuery) (OutboundPage, error) {
		q.InvoiceID = invoiceID
		return s.ListRefunds(ctx, mid, q)
	})
}

func getOutbound(kind string) func(*Service, http.ResponseWriter, *http.Request) {
	return func(s *Service, w http.ResponseWriter, r *http.Request) {
		v, err := s.outboundViewOfMerchant(r.Context(), principal(r).Merchant.ID, kind, pathID(r))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// outboundQR serves the QR code of a merchant-paid outbound's
// payment request.
func outboundQR(kind string) func(*Service, http.ResponseWriter, *http.Request) {
	return func(s *Service, w http.ResponseWriter, r *http.Request) {
		o, ok := s.outboundOf(w, r, kind)
		if !ok {
			return
		}
		if o.PaymentURI == "" {
			problem.Write(w, problem.Of(problem.CodeNotFound, "no payment request: it is not merchant-paid, or has no destination yet"))
			return
		}
		svg, err := QRSVG(o.PaymentURI)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeImage(w, "image/svg+xml", svg)
	}
}

// submitPaymentOf binds POST …/{id}/payment to refunds or payouts.
func submitPaymentOf(kind string) func(*Service, http.ResponseWriter, *http.Request) {
	return func(s *Service, w http.ResponseWriter, r *http.Request) { s.submitPayment(w, r, kind) }
}

// outboundRoutes are the endpoints of refunds, payouts, API keys, payout
// settings, the ledger and the claim page's reads, with their scopes.
var outboundRoutes = []route{
	{"POST", "/v1/invoices/{id}/refunds", store.ScopeRefunds, (*Service).handleCreateRefund},
	{"GET", "/v1/invoices/{id}/refunds", store.ScopeRead, (*Service).handleListInvoiceRefunds},
	{"GET", "/v1/refunds", store.ScopeRead, (*Service).handleListRefunds},
	{"GET", "/v1/refunds/{id}", store.ScopeRead, getOutbound(store.OutboundRefund)},
	{"GET", "/v1/refunds/{id}/qr.svg", store.ScopeRead, outboundQR(store.OutboundRefund)},
	{"POST", "/v1/refunds/{id}/approve", store.ScopeApprove, outboundAction((*Service).approve, store.OutboundRefund)},
	{"POST", "/v1/refunds/{id}/reject", store.ScopeApprove, outboundAction((*Service).reject, store.OutboundRefund)},
	{"POST", "/v1/refunds/{id}/cancel", store.ScopeRefunds, outboundAction((*Service).cancel, store.OutboundRefund)},
	{"POST", "/v1/refunds/{id}/payment", store.ScopeRefunds, submitPaymentOf(store.OutboundRefund)},
	{"POST", "/v1/payouts", store.ScopePayouts, (*Service).handleCreatePayout},
	{"GET", "/v1/payouts", store.ScopeRead, (*Service).handleListPayouts},
	{"GET", "/v1/payouts/{id}", store.ScopeRead, getOutbound(store.OutboundPayout)},
	{"GET", "/v1/payouts/{id}/qr.svg", store.ScopeRead, outboundQR(store.OutboundPayout)},
	{"POST", "/v1/payouts/{id}/approve", store.ScopeApprove, outboundAction((*Service).approve, store.OutboundPayout)},
	{"POST", "/v1/payouts/{id}/reject", store.ScopeApprove, outboundAction((*Service).reject, store.OutboundPayout)},
	{"POST", "/v1/payouts/{id}/cancel", store.ScopePayouts, outboundAction((*Service).cancel, store.OutboundPayout)},
	{"POST", "/v1/payouts/{id}/payment", store.ScopePayouts, submitPaymentOf(store.OutboundPayout)},
	{"GET", "/v1/merchant/api-keys", store.ScopeRead, (*Service).handleListAPIKeys},
	{"POST", "/v1/merchant/api-keys", scopeOwner, (*Service).handleCreateAPIKey},
	{"DELETE", "/v1/merchant/api-keys/{id}", scopeOwner, (*Service).handleRevokeAPIKey},
	{"GET", "/v1/merchant/payout-settings", store.ScopeRead, (*Service).handleGetPayoutSettings},
	{"PUT", "/v1/merchant/payout-settings", scopeOwner, (*Service).handlePutPayoutSettings},
	{"GET", "/v1/merchant/payout-wallet", store.ScopeRead, (*Service).handleGetPayoutWallet},
	{"GET", "/v1/ledger", store.ScopeRead, (*Service).handleLedger},
	{"GET", "/v1/admin/ledger", scopeOperator, (*Service).handleAdminLedger},
	{"GET", "/v1/public/refund", scopePublic, (*Service).handlePublicRefund},
	{"POST", "/v1/public/refund/destination", scopePublic, (*Service).handleClaimDestination},
}
