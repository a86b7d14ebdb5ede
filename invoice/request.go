package invoice

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// Field limits of an invoice.
const (
	maxOrderIDLen     = 200
	maxDescriptionLen = 1000
	maxRedirectURLLen = 2048
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
		return nil, problem.Of(problem.CodeInvalidJSON, "the request body could not be read")
	}
	return body, nil
}

func tooLarge(limit int64) *problem.Problem {
	return problem.Of(problem.CodeBodyTooLarge,
		fmt.Sprintf("the request body is larger than %d bytes", limit))
}

// members parses body as exactly one JSON object whose member names are
// all in allowed, each at most once. Values are returned undecoded.
func members(body []byte, allowed ...string) (map[string]json.RawMessage, *problem.Problem) {
	invalid := func(detail string) *problem.Problem {
		return problem.Of(problem.CodeInvalidJSON, detail)
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
			return nil, problem.OfField(problem.CodeUnknownField, name, fmt.Sprintf("unknown field %q (allowed: %s)", name, strings.Join(allowed, ", ")))
		}
		if _, dup := out[name]; dup {
			return nil, problem.OfField(problem.CodeDuplicateField, name, fmt.Sprintf("field %q appears more than once", name))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, invalid("the request body is not valid JSON")
		}
		if err := checkInteroperable(raw, 1); err != nil {
			return nil, problem.OfField(problem.CodeUnsafeJSON, name, name+": "+err.Error()+"; such JSON breaks common parsers, so it is refused")
		}
		if dup := duplicateMember(raw, name); dup != "" {
			return nil, problem.OfField(problem.CodeDuplicateField, dup, fmt.Sprintf("field %q appears more than once in its object", dup))
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
		return "", problem.OfField(problem.CodeInvalidField, name, name+" must be a string")
	}
	if len(s) > max {
		return "", problem.OfField(problem.CodeInvalidField, name, fmt.Sprintf("%s must be at most %d bytes", name, max))
	}
	if strings.ContainsRune(s, 0) {
		return "", problem.OfField(problem.CodeInvalidField, name, name+" must not contain NUL characters")
	}
	return s, nil
}

// textMember reads an optional string member of text a merchant writes for
// people (an order id, a description, a name), refusing what could
// disguise it (textProblem).
func textMember(ms map[string]json.RawMessage, name string, max int, newlines bool) (string, *problem.Problem) {
	s, perr := stringMember(ms, name, max)
	if perr != nil {
		return "", perr
	}
	if reason := textProblem(s, newlines); reason != "" {
		return "", problem.OfField(problem.CodeInvalidField, name, name+" "+reason)
	}
	return s, nil
}

// textProblem says why s is not text a merchant may show people, or "":
// control characters (a line break only where newlines allows it) and the
// bidirectional overrides, embeddings, isolates and marks (U+202A–U+202E,
// U+2066–U+2069, U+200E, U+200F, U+061C) are refused — rendered as text
// they are harmless on the checkout page, but in a merchant's own tools,
// logs and spreadsheets they can reorder or hide what is around them, an
// amount or an address.
func textProblem(s string, newlines bool) string {
	for _, r := range s {
		switch {
		case r == '\n' && newlines:
		case unicode.IsControl(r):
			return fmt.Sprintf("must not contain control characters (found U+%04X)", r)
		case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
			return fmt.Sprintf("must not contain bidirectional control characters (found U+%04X)", r)
		}
	}
	return ""
}

// parseInvoiceRequest validates a POST /v1/invoices body.
func (s *Service) parseInvoiceRequest(body []byte) (invoiceRequest, *problem.Problem) {
	ms, perr := members(body, "amount_wei", "expires_in_seconds", "order_id", "description", "metadata",
		"asset", "amount", "amount_formatted", "redirect_url", "price", "accept", "chain_id")
	if perr != nil {
		return invoiceRequest{}, perr
	}
	req := invoiceRequest{expiresIn: s.cfg.DefaultExpiry}
	if req.chain, perr = s.parseChain(ms["chain_id"]); perr != nil {
		return invoiceRequest{}, perr
	}
	switch {
	case !isNull(ms["price"]):
		// Priced in a fiat currency: the quotes make the amounts.
		if req.fiat, perr = s.parseFiat(req.chain, ms); perr != nil {
			return invoiceRequest{}, perr
		}
	case !isNull(ms["accept"]):
		return invoiceRequest{}, problem.OfField(problem.CodeInvalidField, "accept",
			"accept is for an invoice with a price in a fiat currency (price); an invoice priced in an asset names it in asset")
	default:
		if req.asset, perr = s.parseAsset(req.chain, ms["asset"]); perr != nil {
			return invoiceRequest{}, perr
		}
		if req.asset.IsNative() && isNull(ms["amount"]) && isNull(ms["amount_formatted"]) {
			req.amount, perr = s.parseAmount(ms["amount_wei"]) // today's request, unchanged
		} else {
			req.amount, perr = s.parseAssetAmount(req.chain, req.asset, ms)
		}
		if perr != nil {
			return invoiceRequest{}, perr
		}
	}
	if raw := ms["expires_in_seconds"]; !isNull(raw) {
		min, max := int64(s.cfg.MinExpiry/time.Second), int64(s.cfg.MaxExpiry/time.Second)
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n < min || n > max {
			return invoiceRequest{}, problem.OfField(problem.CodeInvalidField, "expires_in_seconds",
				fmt.Sprintf("expires_in_seconds must be an integer from %d to %d", min, max))
		}
		req.expiresIn = time.Duration(n) * time.Second
	}
	if req.orderID, perr = textMember(ms, "order_id", maxOrderIDLen, false); perr != nil {
		return invoiceRequest{}, perr
	}
	if req.description, perr = textMember(ms, "description", maxDescriptionLen, true); perr != nil {
		return invoiceRequest{}, perr
	}
	if raw := ms["metadata"]; !isNull(raw) {
		var buf bytes.Buffer
		if raw[0] != '{' || json.Compact(&buf, raw) != nil {
			return invoiceRequest{}, problem.OfField(problem.CodeInvalidField, "metadata", "metadata must be a JSON object")
		}
		if buf.Len() > s.cfg.MaxMetadataBytes {
			return invoiceRequest{}, problem.OfField(problem.CodeInvalidField, "metadata",
				fmt.Sprintf("metadata must be at most %d bytes of compact JSON", s.cfg.MaxMetadataBytes))
		}
		req.metadata = buf.Bytes()
	}
	if req.redirectURL, perr = stringMember(ms, "redirect_url", maxRedirectURLLen); perr != nil {
		return invoiceRequest{}, perr
	}
	if req.redirectURL != "" && !validRedirectURL(req.redirectURL, s.cfg.AllowLoopbackHTTPRedirect) {
		detail := "redirect_url must be an absolute https URL without user info"
		if s.cfg.AllowLoopbackHTTPRedirect {
			detail += " (or http on a loopback host)"
		}
		return invoiceRequest{}, problem.OfField(problem.CodeInvalidField, "redirect_url", detail)
	}
	return req, nil
}

// validRedirectURL tells whether s may be where the checkout page sends the
// payer back: an absolute https URL with a host and no user info (the page
// shows it as a link, and http would let a network attacker swap the
// merchant's page), or http on a loopback host when loopback is allowed.
func validRedirectURL(s string, loopback bool) bool {
	u, err := url.Parse(s)
	// Hostname, not Host: "https://:443/" has a Host (":443") and no host.
	if err != nil || u.Hostname() == "" || u.User != nil || u.Opaque != "" {
		return false
	}
	for _, r := range s {
		if r < 0x21 || r == 0x7f { // spaces and controls: url.Parse lets some through
			return false
		}
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		if !loopback {
			return false
		}
		h := u.Hostname()
		if h == "localhost" {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
	return false
}

// parseAmount reads amount_wei: a JSON string of decimal digits, > 0,
// at most MaxAmount. Numbers are refused: clients would round them.
func (s *Service) parseAmount(raw json.RawMessage) (store.Amount, *problem.Problem) {
	const name = "amount_wei"
	if isNull(raw) {
		return store.Amount{}, problem.OfField(problem.CodeMissingField, name, "amount_wei is required")
	}
	var str string
	if raw[0] != '"' || json.Unmarshal(raw, &str) != nil {
		return store.Amount{}, problem.OfField(problem.CodeInvalidAmount, name,
			`amount_wei must be a JSON string of decimal digits (wei), e.g. "1500000000000000000"`)
	}
	a, err := store.ParseAmount(str)
	if err != nil {
		return store.Amount{}, problem.OfField(problem.CodeInvalidAmount, name,
			"amount_wei must be a whole number of wei in decimal digits, without sign, point, exponent or leading zeros")
	}
	if a.IsZero() {
		return store.Amount{}, problem.OfField(problem.CodeInvalidAmount, name, "amount_wei must be greater than 0")
	}
	if a.Cmp(*s.cfg.MaxAmount) > 0 {
		return store.Amount{}, problem.OfField(problem.CodeInvalidAmount, name, "amount_wei must be at most "+s.cfg.MaxAmount.String())
	}
	return a, nil
}

// parseAddress reads a 0x-prefixed hex address. Mixed case must be a valid
// EIP-55 checksum, which catches typos in an address that receives money.
func parseAddressMember(name string, raw json.RawMessage) (common.Address, *problem.Problem) {
	bad := problem.OfField(problem.CodeInvalidAddress, name,
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
		return problem.Of(problem.CodeInvalidField, "invalid merchant")
	}
	if im.detail != "" {
		return problem.OfField(im.code, im.field, im.detail)
	}
	code := problem.CodeInvalidField
	if im.field == "settlement_address" {
		code = problem.CodeInvalidAddress
	}
	return problem.OfField(code, im.field, im.field+" must be "+im.reason)
}

// parseTxHashMember reads a required transaction hash: a JSON string of
// "0x" and 64 hexadecimal digits, in any case.
func parseTxHashMember(field string, raw json.RawMessage) (common.Hash, *problem.Problem) {
	var str string
	if isNull(raw) {
		return common.Hash{}, problem.OfField(problem.CodeMissingField, field, field+" is required")
	}
	if raw[0] != '"' || json.Unmarshal(raw, &str) != nil || len(str) != 66 || (str[:2] != "0x" && str[:2] != "0X") {
		return common.Hash{}, problem.OfField(problem.CodeInvalidHash, field, field+` must be a transaction hash: "0x" and 64 hexadecimal digits`)
	}
	for _, c := range str[2:] {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return common.Hash{}, problem.OfField(problem.CodeInvalidHash, field, field+` must be a transaction hash: "0x" and 64 hexadecimal digits`)
		}
	}
	return common.HexToHash(str), nil
}
