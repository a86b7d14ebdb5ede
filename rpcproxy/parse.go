package rpcproxy

import (
	"bytes"
	"encoding/json"
)

// The parser reads only what the proxy decides on — "jsonrpc", "id" and
// "method" of each call — and records byte offsets into the body; params are
// skipped, never decoded. The body is first checked with json.Valid, so the
// scanning helpers below may assume well-formed JSON.
//
// Keys are matched the way encoding/json (and therefore go-ethereum's RPC
// server) matches them: case-insensitively and after unescaping, so
// {"METHOD":"debug_x"} or {"\u006dethod":"debug_x"} cannot slip past the
// method policy. A call naming one of those keys twice is refused as an
// invalid request, because encoding/json would silently take the last one.

// outcome is what happened to one call; it is also the "outcome" label of
// the calls metric.
type outcome uint8

const (
	outcomeForwarded outcome = iota
	outcomeInvalid
	outcomeBlocked
	outcomeRateLimited
	outcomeUpstreamUnavailable
	outcomeUpstreamTimeout
	outcomeUpstreamBadResponse
	outcomeCanceled
	outcomeOverCapacity
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"forwarded", "invalid", "blocked", "rate_limited",
	"upstream_unavailable", "upstream_timeout", "upstream_bad_response", "canceled", "over_capacity",
}

// call is one JSON-RPC call of a request (the request itself when it is not
// a batch). Offsets index the request body; -1 means absent.
type call struct {
	start, end     int // the element
	idStart, idEnd int // the id value, when present and usable in a response
	mStart, mEnd   int // the method string's raw contents, without quotes
	method         []byte
	hasID          bool // an "id" member is present: not a notification
	outcome        outcome
	err            *rpcError // the proxy's own answer when outcome != forwarded

	// Partial path: the upstream's response object for this call.
	rStart, rEnd, rIDStart, rIDEnd int
}

// methodName returns the decoded method, or nil when there is none.
func (c *call) methodName(body []byte) []byte {
	if c.method != nil {
		return c.method
	}
	if c.mStart < 0 {
		return nil
	}
	return body[c.mStart:c.mEnd]
}

// id returns the raw id to echo in a response made by the proxy.
func (c *call) id(body []byte) []byte {
	if c.idStart < 0 {
		return nullJSON
	}
	return body[c.idStart:c.idEnd]
}

var nullJSON = []byte("null")

type parseResult uint8

const (
	parseOK parseResult = iota
	parseMalformed
	parseNotRequest
	parseEmptyBatch
	parseBatchTooLarge
)

// parseRequest splits body into calls, appending to calls. It reports
// whether the body is a batch. Calls that are not valid JSON-RPC 2.0 requests
// come back with outcome invalid; all others with outcome forwarded and a
// method name that is still to be checked against the policy.
func parseRequest(body []byte, maxBatch int, calls []call) ([]call, bool, parseResult) {
	if !json.Valid(body) {
		return calls, false, parseMalformed
	}
	i := skipWS(body, 0)
	switch body[i] {
	case '{':
		o, _ := parseObject(body, i)
		return append(calls, newCall(body, &o)), false, parseOK
	case '[':
		i++
		for {
			i = skipWS(body, i)
			switch body[i] {
			case ']':
				if len(calls) == 0 {
					return calls, true, parseEmptyBatch
				}
				return calls, true, parseOK
			case ',':
				i++
				continue
			}
			if len(calls) >= maxBatch {
				return calls, true, parseBatchTooLarge
			}
			if body[i] == '{' {
				o, next := parseObject(body, i)
				calls = append(calls, newCall(body, &o))
				i = next
				continue
			}
			end := skipValue(body, i)
			calls = append(calls, call{
				start: i, end: end, idStart: -1, idEnd: -1, mStart: -1, mEnd: -1,
				rStart: -1, outcome: outcomeInvalid, err: errInvalidRequest,
			})
			i = end
		}
	default:
		return calls, false, parseNotRequest
	}
}

// newCall validates a parsed object as a JSON-RPC 2.0 request.
func newCall(body []byte, o *object) call {
	c := call{
		start: o.start, end: o.end,
		idStart: -1, idEnd: -1, mStart: -1, mEnd: -1, rStart: -1,
		hasID: o.idStart >= 0,
	}
	invalid := func() call {
		c.outcome, c.err = outcomeInvalid, errInvalidRequest
		return c
	}
	if o.idStart >= 0 {
		switch body[o.idStart] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'n':
			c.idStart, c.idEnd = o.idStart, o.idEnd
		default: // true, false, objects and arrays are not ids
			return invalid()
		}
	}
	if o.dup || o.mStart < 0 || o.vStart < 0 {
		return invalid()
	}
	if o.vEsc {
		var v string
		if json.Unmarshal(body[o.vStart-1:o.vEnd+1], &v) != nil || v != "2.0" {
			return invalid()
		}
	} else if string(body[o.vStart:o.vEnd]) != "2.0" {
		return invalid()
	}
	c.mStart, c.mEnd = o.mStart, o.mEnd
	if o.mEsc {
		var m string
		if json.Unmarshal(body[o.mStart-1:o.mEnd+1], &m) != nil {
			return invalid()
		}
		c.method = []byte(m)
	}
	name := c.methodName(body)
	if len(name) == 0 {
		return invalid()
	}
	if !validMethodName(name) {
		c.outcome, c.err = outcomeBlocked, errBadMethodName
	}
	return c
}

// maxMethodLen bounds method names; longer ones are refused.
const maxMethodLen = 128

// validMethodName reports whether m can name a node method: ASCII letters,
// digits and underscores. go-ethereum (and the Cosmos EVM servers built on its
// RPC package) register nothing else, so anything else cannot be served and
// is refused before it reaches the node or a metric label.
func validMethodName(m []byte) bool {
	if len(m) == 0 || len(m) > maxMethodLen {
		return false
	}
	for _, c := range m {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// object holds the offsets of the members of one JSON object that the proxy
// cares about. -1 means absent.
type object struct {
	start, end     int
	idStart, idEnd int // value
	mStart, mEnd   int // method string contents (without quotes)
	mEsc           bool
	vStart, vEnd   int // jsonrpc string contents
	vEsc           bool
	eStart, eEnd   int // "error" value (upstream responses)
	dup            bool
	badType        bool // method or jsonrpc is not a string
}

type keyKind uint8

const (
	keyOther keyKind = iota
	keyID
	keyMethod
	keyVersion
	keyError
)

// parseObject reads the object starting at body[i] == '{' and returns it and
// the offset just past it.
func parseObject(body []byte, i int) (object, int) {
	o := object{start: i, idStart: -1, idEnd: -1, mStart: -1, mEnd: -1, vStart: -1, vEnd: -1, eStart: -1, eEnd: -1}
	var seen uint8
	i++
	for {
		i = skipWS(body, i)
		switch body[i] {
		case '}':
			o.end = i + 1
			if o.badType {
				o.mStart, o.vStart = -1, -1
			}
			return o, o.end
		case ',':
			i++
			continue
		}
		ks := i
		ke, kesc := skipString(body, i)
		i = skipWS(body, ke) + 1 // past ':'
		vs := skipWS(body, i)
		var ve int
		var vesc bool
		if body[vs] == '"' {
			ve, vesc = skipString(body, vs)
		} else {
			ve = skipValue(body, vs)
		}
		i = ve
		k := classifyKey(body[ks:ke], kesc)
		if k == keyOther {
			continue
		}
		if seen&(1<<k) != 0 {
			o.dup = true
		}
		seen |= 1 << k
		switch k {
		case keyID:
			o.idStart, o.idEnd = vs, ve
		case keyError:
			o.eStart, o.eEnd = vs, ve
		case keyMethod:
			if body[vs] != '"' {
				o.badType = true
				continue
			}
			o.mStart, o.mEnd, o.mEsc = vs+1, ve-1, vesc
		case keyVersion:
			if body[vs] != '"' {
				o.badType = true
				continue
			}
			o.vStart, o.vEnd, o.vEsc = vs+1, ve-1, vesc
		}
	}
}

// classifyKey matches a quoted key against the members the proxy reads, with
// encoding/json's rules: unescaped, then compared with bytes.EqualFold (which
// also folds U+017F to 's', so "jſonrpc" is "jsonrpc").
func classifyKey(quoted []byte, esc bool) keyKind {
	k := quoted[1 : len(quoted)-1]
	if esc {
		var s string
		if json.Unmarshal(quoted, &s) != nil {
			return keyOther
		}
		k = []byte(s)
	}
	if len(k) < 2 || len(k) > 16 {
		return keyOther
	}
	switch {
	case bytes.EqualFold(k, keyNameID):
		return keyID
	case bytes.EqualFold(k, keyNameMethod):
		return keyMethod
	case bytes.EqualFold(k, keyNameVersion):
		return keyVersion
	case bytes.EqualFold(k, keyNameError):
		return keyError
	}
	return keyOther
}

var (
	keyNameID      = []byte("id")
	keyNameMethod  = []byte("method")
	keyNameVersion = []byte("jsonrpc")
	keyNameError   = []byte("error")
)

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the offset just past the string starting at b[i] == '"'
// and whether it contains escapes.
func skipString(b []byte, i int) (int, bool) {
	esc := false
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			esc = true
			i++
		case '"':
			return i + 1, esc
		}
	}
	return len(b), esc
}

// skipValue returns the offset just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		end, _ := skipString(b, i)
		return end
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i, _ = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return len(b)
	}
}

// parseDigits parses a non-negative decimal integer of at most maxDigits
// digits (no sign, no leading space): an id the proxy wrote, a status code,
// a Content-Length.
func parseDigits(b []byte, maxDigits int) (int, bool) {
	if len(b) == 0 || len(b) > maxDigits {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
