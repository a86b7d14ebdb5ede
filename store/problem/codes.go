package problem

import (
	"context"
	"errors"
	"net/http"
	"sort"

	"github.com/evmpay/evmpay/store"
)

// The codes every evmpay API answers with: one table, with the HTTP status
// of each (statuses below), shared by the invoice API, the webhook
// deliveries API, the read API, the sweep admin API, the checkout page and
// payd's own endpoints. Clients branch on the code; a code keeps its
// meaning and status for good, and new ones may be added within /v1
// (docs/versioning.md). The OpenAPI document's Problem.code enum lists
// exactly these (a test checks it).
const (
	// 400: the request is malformed.
	CodeInvalidJSON         = "invalid_json"         // the body is not JSON, or not an object
	CodeUnknownField        = "unknown_field"        // a member the endpoint does not take
	CodeDuplicateField      = "duplicate_field"      // a member given twice
	CodeMissingField        = "missing_field"        // a required member is absent
	CodeInvalidField        = "invalid_field"        // a member's value is not acceptable
	CodeInvalidAmount       = "invalid_amount"       // an amount that is not an exact positive integer in range
	CodeInvalidAddress      = "invalid_address"      // not an address, or a wrong EIP-55 checksum
	CodeUnsafeJSON          = "unsafe_json"          // valid JSON that common parsers break on
	CodeInvalidLogo         = "invalid_logo"         // a merchant logo that is not a PNG, JPEG or WebP within the size limit
	CodeUnknownAsset        = "unknown_asset"        // an asset the service does not accept
	CodeUnknownChain        = "unknown_chain"        // a chain the service creates no invoice on
	CodeUnsupportedCurrency = "unsupported_currency" // a price in a currency the service does not quote (or no fiat pricing at all)
	CodeUnknownParameter    = "unknown_parameter"    // a query parameter the endpoint does not take
	CodeInvalidParameter    = "invalid_parameter"    // a query parameter's value is not acceptable
	CodeInvalidCursor       = "invalid_cursor"       // a pagination cursor this API did not hand out
	CodeInvalidQuery        = "invalid_query"        // a query string that does not parse
	CodeInvalidRequest      = "invalid_request"      // a request the endpoint cannot take (for example a bad replay range)
	CodeKeyMissing          = "idempotency_key_missing"
	CodeKeyInvalid          = "idempotency_key_invalid"
	CodeInvalidBlockID      = "invalid_block_id" // read API: not a block number, hash or "latest"
	CodeInvalidHash         = "invalid_hash"     // read API: not a 32-byte hash
	CodeInvalidLimit        = "invalid_limit"    // read API: limit out of range
	CodeUnauthorized        = "unauthorized"     // 401: a missing, wrong, rotated or revoked credential (never says which)
	CodeNotFound            = "not_found"        // 404: no such resource (or another merchant's)
	CodeBlockNotFound       = "block_not_found"  // 404: read API
	CodeTxNotFound          = "transaction_not_found"
	CodeMethodNotAllowed    = "method_not_allowed" // 405, with Allow
	CodeKeyInFlight         = "idempotency_key_in_flight"
	CodeDeliveryPending     = "delivery_pending" // 409: a webhook delivery still on its ladder
	CodeBodyTooLarge        = "body_too_large"   // 413
	CodeUnsupportedMedia    = "unsupported_media_type"
	CodeKeyReused           = "idempotency_key_reused"
	CodeWebhookNotPublic    = "webhook_url_not_public"
	CodeSettlementService   = "settlement_address_reserved"
	CodeSettlementIsCode    = "settlement_address_contract"
	CodeRateLimited         = "rate_limited"      // 429, with Retry-After
	CodeInternal            = "internal"          // 500: a failure on our side, logged
	CodeUnavailable         = "unavailable"       // 503: the database (or a dependency) did not answer; retry
	CodeChainUnavailable    = "chain_unavailable" // 503: the chain node did not answer; retry
	CodeAdminDisabled       = "admin_disabled"    // 503: no operator token is configured
	CodeIndexStale          = "index_stale"       // 503: read API: the index stopped being written
	CodeRateUnavailable     = "rate_unavailable"  // 503, with Retry-After: no exchange rate fresh and agreed enough to quote with; nothing was created

	// Refunds and payouts (docs/refunds.md).
	CodeInsufficientScope   = "insufficient_scope"      // 403: the API key lacks the scope the route needs
	CodeApprovalSameKey     = "approval_same_key"       // 403: the key that made a refund or payout cannot approve it
	CodeStateConflict       = "state_conflict"          // 409: the refund or payout is not in a state that allows this
	CodeRefundExceeds       = "refund_exceeds_received" // 422: more than was received (and confirmed) for the invoice
	CodeNothingToRefund     = "nothing_to_refund"       // 422: the shortcut found nothing to refund
	CodeLimitExceeded       = "limit_exceeded"          // 422: over the merchant's daily limit for the asset
	CodeDestinationRefused  = "destination_not_allowed" // 422: not on the merchant's payout allowlist
	CodeDestinationReserved = "destination_reserved"    // 422: an address of this service
	CodeDestinationContract = "destination_contract"    // 422: a contract (native transfers are plain 21,000-gas sends)
	CodeFiatUnavailable     = "fiat_unavailable"        // 422: no locked quote or current rate to convert a fiat amount
	CodeTransferMismatch    = "transfer_mismatch"       // 422: the named transaction does not pay the merchant-paid request
)

// statuses is the table: every code and its HTTP status.
var statuses = map[string]int{
	CodeInvalidJSON: http.StatusBadRequest, CodeUnknownField: http.StatusBadRequest,
	CodeDuplicateField: http.StatusBadRequest, CodeMissingField: http.StatusBadRequest,
	CodeInvalidField: http.StatusBadRequest, CodeInvalidAmount: http.StatusBadRequest,
	CodeInvalidAddress: http.StatusBadRequest, CodeUnsafeJSON: http.StatusBadRequest,
	CodeUnknownAsset: http.StatusBadRequest, CodeUnknownParameter: http.StatusBadRequest,
	CodeUnsupportedCurrency: http.StatusBadRequest, CodeUnknownChain: http.StatusBadRequest,
	CodeInvalidParameter: http.StatusBadRequest, CodeInvalidCursor: http.StatusBadRequest,
	CodeInvalidQuery: http.StatusBadRequest, CodeInvalidRequest: http.StatusBadRequest,
	CodeKeyMissing: http.StatusBadRequest, CodeKeyInvalid: http.StatusBadRequest,
	CodeInvalidBlockID: http.StatusBadRequest, CodeInvalidHash: http.StatusBadRequest,
	CodeInvalidLimit: http.StatusBadRequest, CodeInvalidLogo: http.StatusBadRequest,
	CodeUnauthorized: http.StatusUnauthorized,
	CodeNotFound:     http.StatusNotFound, CodeBlockNotFound: http.StatusNotFound, CodeTxNotFound: http.StatusNotFound,
	CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	CodeKeyInFlight:      http.StatusConflict, CodeDeliveryPending: http.StatusConflict,
	CodeBodyTooLarge:     http.StatusRequestEntityTooLarge,
	CodeUnsupportedMedia: http.StatusUnsupportedMediaType,
	CodeKeyReused:        http.StatusUnprocessableEntity, CodeWebhookNotPublic: http.StatusUnprocessableEntity,
	CodeSettlementService: http.StatusUnprocessableEntity, CodeSettlementIsCode: http.StatusUnprocessableEntity,
	CodeRateLimited: http.StatusTooManyRequests,
	CodeInternal:    http.StatusInternalServerError,
	CodeUnavailable: http.StatusServiceUnavailable, CodeChainUnavailable: http.StatusServiceUnavailable,
	CodeAdminDisabled: http.StatusServiceUnavailable, CodeIndexStale: http.StatusServiceUnavailable,
	CodeRateUnavailable:   http.StatusServiceUnavailable,
	CodeInsufficientScope: http.StatusForbidden, CodeApprovalSameKey: http.StatusForbidden,
	CodeStateConflict: http.StatusConflict,
	CodeRefundExceeds: http.StatusUnprocessableEntity, CodeNothingToRefund: http.StatusUnprocessableEntity,
	CodeLimitExceeded: http.StatusUnprocessableEntity, CodeDestinationRefused: http.StatusUnprocessableEntity,
	CodeDestinationReserved: http.StatusUnprocessableEntity, CodeDestinationContract: http.StatusUnprocessableEntity,
	CodeFiatUnavailable: http.StatusUnprocessableEntity, CodeTransferMismatch: http.StatusUnprocessableEntity,
}

// Status returns a code's HTTP status: 500 for a code not in the table
// (a bug: every code a package answers with is a constant above).
func Status(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Codes returns every code of the table, sorted.
func Codes() []string {
	out := make([]string, 0, len(statuses))
	for c := range statuses {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Of returns the problem of a code, with the table's status.
func Of(code, detail string) *Problem {
	return &Problem{Status: Status(code), Code: code, Detail: detail}
}

// OfField returns the problem of a code about one request member or
// parameter, with the table's status.
func OfField(code, field, detail string) *Problem {
	return &Problem{Status: Status(code), Code: code, Detail: detail, Field: field}
}

// Reply writes the problem of a code: a shorthand for Write(w, Of(code, detail)).
func Reply(w http.ResponseWriter, code, detail string) { Write(w, Of(code, detail)) }

// FromError maps an error to the problem a client sees — the errors every
// API shares, in one place (a package maps its own domain errors before
// falling back to this):
//
//   - a *Problem anywhere in the chain: itself;
//   - store.ErrNotFound: 404 not_found;
//   - store.ErrUnavailable, a deadline: 503 unavailable (retry);
//   - anything else: 500 internal, whose detail says nothing of the cause
//     (the caller logs it).
//
// internal reports whether err was an unexpected failure to log.
func FromError(err error) (p *Problem, internal bool) {
	var pe *Problem
	switch {
	case errors.As(err, &pe):
		return pe, false
	case errors.Is(err, store.ErrNotFound):
		return Of(CodeNotFound, "no such resource"), false
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return Of(CodeUnavailable, "the database is unavailable; retry later"), false
	default:
		return Of(CodeInternal, "internal error"), true
	}
}
