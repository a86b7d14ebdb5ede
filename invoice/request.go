package invoice

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// Stable problem codes. They are part of the API: clients switch on them.
const (
	codeInvalidJSON      = "invalid_json"
	codeUnknownField     = "unknown_field"
	codeDuplicateField   = "duplicate_field"
	codeMissingField     = "missing_field"
	codeInvalidField     = "invalid_field"
	codeInvalidAmount    = "invalid_amount"
	codeInvalidAddress   = "invalid_address"
	codeUnknownParameter = "unknown_parameter"
	codeInvalidParameter = "invalid_parameter"
	codeInvalidCursor    = "invalid_cursor"
	codeKeyMissing       = "idempotency_key_missing"
	codeKeyInvalid       = "idempotency_key_invalid"
	codeKeyReused        = "idempotency_key_reused"
	codeKeyInFlight      = "idempotency_key_in_flight"
	codeUnauthorized     = "unauthorized"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeBodyTooLarge     = "body_too_large"
	codeUnavailable      = "unavailable"
	codeInternal         = "internal"
)

// problemCodes lists every code above (the OpenAPI document's enum must
// match it).
var problemCodes = []string{codeInvalidJSON, codeUnknownField, codeDuplicateField, codeMissingField,
	codeInvalidField, codeInvalidAmount, codeInvalidAddress, codeUnknownParameter, codeInvalidParameter,
	codeInvalidCursor, codeKeyMissing, codeKeyInvalid, codeKeyReused, codeKeyInFlight, codeUnauthorized,
	codeNotFound, codeMethodNotAllowed, codeBodyTooLarge, codeUnavailable, codeInternal,
	codeUnsafeJSON, codeWebhookNotPublic, codeSettlementReserved, codeSettlementIsContract, codeChainUnavailable}

// Field limits of an invoice.
const (
	maxOrderIDLen     = 200
	maxDescriptionLen = 1000
	maxKeyLen         = 255
)

// readBody reads the whole body, at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *problem.Problem) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		return nil, problem.New(http.StatusBadRequest, codeInvalidJSON, "the request body could not be read")
	}
	return body, nil
}

func tooLarge(limit int64) *problem.Problem {
	return problem.New(http.StatusRequestEntityTooLarge, codeBodyTooLarge,
		fmt.Sprintf("the request body is larger than %d bytes", limit))
}

// members parses body as exactly one JSON object whose member names are
// all in allowed, each at most once. Values are returned undecoded.
func members(body []byte, allowed ...string) (map[string]json.RawMessage, *problem.Problem) {
	invalid := func(detail string) *problem.Problem {
		return problem.New(http.StatusBadRequest, codeInvalidJSON, detail)
	}
	if !utf8.Valid(body) {
		return nil, invalid("the request body must be UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, invalid("the request body must be one JSON object")
	}
	out := make(map[string]json.RawMessage, len(allowed))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalid("the request body is not valid JSON")
		}
		name, _ := tok.(string)
		if !slices.Contains(allowed, name) {
			return nil, problem.Field(codeUnknownField, name, fmt.Sprintf("unknown field %q (allowed: %s)", name, strings.Join(allowed, ", ")))
		}
		if _, dup := out[name]; dup {
			return nil, problem.Field(codeDuplicateField, name, fmt.Sprintf("field %q appears more than once", name))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, invalid("the request body is not valid JSON")
		}
		if err := checkInteroperable(raw, 1); err != nil {
			return nil, problem.Field(codeUnsafeJSON, name, name+": "+err.Error()+"; such JSON breaks common parsers, so it is refused")
		}
		out[name] = raw
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, invalid("the request body is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("the request body has data after the JSON object")
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool { return raw == nil || string(raw) == "null" }

// stringMember decodes an optional string member (absent or null: "").
func stringMember(ms map[string]json.RawMessage, name string, max int) (string, *problem.Problem) {
	raw := ms[name]
	if isNull(raw) {
		return "", nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", problem.Field(codeInvalidField, name, name+" must be a string")
	}
	if len(s) > max {
		return "", problem.Field(codeInvalidField, name, fmt.Sprintf("%s must be at most %d bytes", name, max))
	}
	if strings.ContainsRune(s, 0) {
		return "", problem.Field(codeInvalidField, name, name+" must not contain NUL characters")
	}
	return s, nil
}

// parseInvoiceRequest validates a POST /v1/invoices body.
func (s *Service) parseInvoiceRequest(body []byte) (invoiceRequest, *problem.Problem) {
	ms, perr := members(body, "amount_wei", "expires_in_seconds", "order_id", "description", "metadata")
	if perr != nil {
		return invoiceRequest{}, perr
	}
	req := invoiceRequest{expiresIn: s.cfg.DefaultExpiry}
	if req.amount, perr = s.parseAmount(ms["amount_wei"]); perr != nil {
		return invoiceRequest{}, perr
	}
	if raw := ms["expires_in_seconds"]; !isNull(raw) {
		min, max := int64(s.cfg.MinExpiry/time.Second), int64(s.cfg.MaxExpiry/time.Second)
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n < min || n > max {
			return invoiceRequest{}, problem.Field(codeInvalidField, "expires_in_seconds",
				fmt.Sprintf("expires_in_seconds must be an integer from %d to %d", min, max))
		}
		req.expiresIn = time.Duration(n) * time.Second
	}
	if req.orderID, perr = stringMember(ms, "order_id", maxOrderIDLen); perr != nil {
		return invoiceRequest{}, perr
	}
	if req.description, perr = stringMember(ms, "description", maxDescriptionLen); perr != nil {
		return invoiceRequest{}, perr
	}
	if raw := ms["metadata"]; !isNull(raw) {
		var buf bytes.Buffer
		if raw[0] != '{' || json.Compact(&buf, raw) != nil {
			return invoiceRequest{}, problem.Field(codeInvalidField, "metadata", "metadata must be a JSON object")
		}
		if buf.Len() > s.cfg.MaxMetadataBytes {
			return invoiceRequest{}, problem.Field(codeInvalidField, "metadata",
				fmt.Sprintf("metadata must be at most %d bytes of compact JSON", s.cfg.MaxMetadataBytes))
		}
		req.metadata = buf.Bytes()
	}
	return req, nil
}

// parseAmount reads amount_wei: a JSON string of decimal digits, > 0,
// at most MaxAmount. Numbers are refused: clients would round them.
func (s *Service) parseAmount(raw json.RawMessage) (store.Amount, *problem.Problem) {
	const name = "amount_wei"
	if isNull(raw) {
		return store.Amount{}, problem.Field(codeMissingField, name, "amount_wei is required")
	}
	var str string
	if raw[0] != '"' || json.Unmarshal(raw, &str) != nil {
		return store.Amount{}, problem.Field(codeInvalidAmount, name,
			`amount_wei must be a JSON string of decimal digits (wei), e.g. "1500000000000000000"`)
	}
	a, err := store.ParseAmount(str)
	if err != nil {
		return store.Amount{}, problem.Field(codeInvalidAmount, name,
			"amount_wei must be a whole number of wei in decimal digits, without sign, point, exponent or leading zeros")
	}
	if a.IsZero() {
		return store.Amount{}, problem.Field(codeInvalidAmount, name, "amount_wei must be greater than 0")
	}
	if a.Cmp(*s.cfg.MaxAmount) > 0 {
		return store.Amount{}, problem.Field(codeInvalidAmount, name, "amount_wei must be at most "+s.cfg.MaxAmount.String())
	}
	return a, nil
}

// parseAddress reads a 0x-prefixed hex address. Mixed case must be a valid
// EIP-55 checksum, which catches typos in an address that receives money.
func parseAddressMember(name string, raw json.RawMessage) (common.Address, *problem.Problem) {
	bad := problem.Field(codeInvalidAddress, name,
		name+" must be a 0x-prefixed 20-byte hex address (EIP-55 checksum when mixed case), not the zero address")
	var str string
	if isNull(raw) || raw[0] != '"' || json.Unmarshal(raw, &str) != nil {
		return common.Address{}, bad
	}
	if len(str) != 42 || !strings.HasPrefix(str, "0x") || !common.IsHexAddress(str) {
		return common.Address{}, bad
	}
	a := common.HexToAddress(str)
	hex := str[2:]
	if hex != strings.ToLower(hex) && hex != strings.ToUpper(hex) && a.Hex() != str {
		return common.Address{}, bad
	}
	if a == (common.Address{}) {
		return common.Address{}, bad
	}
	return a, nil
}

// merchantError turns a merchant validation failure into a 400 naming the
// field, or a MerchantRules refusal into its 422.
func merchantError(err error) *problem.Problem {
	var im *invalidMerchant
	if !errors.As(err, &im) {
		return problem.New(http.StatusBadRequest, codeInvalidField, "invalid merchant")
	}
	if im.detail != "" {
		return &problem.Problem{Status: im.status, Code: im.code, Detail: im.detail, Field: im.field}
	}
	code := codeInvalidField
	if im.field == "settlement_address" {
		code = codeInvalidAddress
	}
	return problem.Field(code, im.field, im.field+" must be "+im.reason)
}
