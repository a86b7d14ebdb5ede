package rpcproxy

import (
	"net/http"
	"strconv"
)

// JSON-RPC error codes the proxy answers with itself. The standard codes come
// from JSON-RPC 2.0 (and EIP-1474); the -320xx server codes are the ones
// Optimism's proxyd uses, so clients that already understand proxyd (or treat
// any -32000..-32099 code as a server error) need nothing new. The table in
// docs/rpcproxy.md pairs each code with its HTTP status.
const (
	// CodeParseError: the body is not valid JSON (HTTP 400).
	CodeParseError = -32700
	// CodeInvalidRequest: valid JSON that is not a JSON-RPC 2.0 request,
	// an empty batch, a wrong HTTP method or content type.
	CodeInvalidRequest = -32600
	// CodeMethodNotFound: the method is blocked by the proxy's policy or is
	// not a plausible method name (HTTP 403 for a single call).
	CodeMethodNotFound = -32601
	// CodeInternalError: the proxy could not read the request body.
	CodeInternalError = -32603
	// CodeUpstreamUnavailable: the node could not be reached (HTTP 502);
	// proxyd's "backend offline".
	CodeUpstreamUnavailable = -32010
	// CodeOverCapacity: the proxy is handling as many requests, or holds as
	// many buffered bytes, as it is configured to (HTTP 503 with
	// Retry-After); proxyd's "backend is over capacity".
	CodeOverCapacity = -32012
	// CodeUpstreamBadResponse: the node answered something the proxy could
	// not match to the forwarded calls, or not HTTP/1.x at all (HTTP 502 or
	// per element).
	CodeUpstreamBadResponse = -32013
	// CodeBatchTooLarge: more calls in one batch than Config.MaxBatchSize
	// (HTTP 413).
	CodeBatchTooLarge = -32014
	// CodeUpstreamTimeout: the node did not answer within
	// Config.UpstreamTimeout (HTTP 504); proxyd's "gateway timeout".
	CodeUpstreamTimeout = -32015
	// CodeRateLimited: the client's token bucket is empty (HTTP 429 for a
	// single call); proxyd's "over rate limit".
	CodeRateLimited = -32016
	// CodeUpstreamTooLarge: the node's answer is larger than
	// Config.MaxResponseBytes (HTTP 502 or per element); proxyd's "backend
	// response too large".
	CodeUpstreamTooLarge = -32020
	// CodeBodyTooLarge: the body is larger than Config.MaxBodyBytes
	// (HTTP 413).
	CodeBodyTooLarge = -32021
	// CodeTooManyRequests: the client has Config.MaxConcurrentRequestsPerClient
	// requests under way already (HTTP 429 with Retry-After); proxyd's
	// "too many requests".
	CodeTooManyRequests = -32024
)

// rpcError is an error the proxy answers itself: a JSON-RPC code and message
// and the HTTP status used when it is the answer to the whole request.
type rpcError struct {
	code    int
	status  int
	message string
	// member is the pre-encoded `"error":{...}` member.
	member []byte
	// nullID is the whole pre-encoded response object with a null id.
	nullID []byte
}

func newRPCError(code, status int, message string) *rpcError {
	e := &rpcError{code: code, status: status, message: message}
	e.member = append(e.member, `"error":{"code":`...)
	e.member = strconv.AppendInt(e.member, int64(code), 10)
	// Messages are constant ASCII without quotes or backslashes.
	e.member = append(e.member, `,"message":"`...)
	e.member = append(e.member, message...)
	e.member = append(e.member, `"}`...)
	e.nullID = appendError(nil, []byte("null"), e)
	return e
}

// appendError appends `{"jsonrpc":"2.0","id":<id>,"error":{...}}`.
func appendError(dst, id []byte, e *rpcError) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, ',')
	dst = append(dst, e.member...)
	return append(dst, '}')
}

var (
	errParse          = newRPCError(CodeParseError, http.StatusBadRequest, "parse error")
	errInvalidRequest = newRPCError(CodeInvalidRequest, http.StatusBadRequest, "invalid request")
	errEmptyBatch     = newRPCError(CodeInvalidRequest, http.StatusBadRequest, "empty batch")
	errHTTPMethod     = newRPCError(CodeInvalidRequest, http.StatusMethodNotAllowed, "method not allowed: use POST")
	errContentType    = newRPCError(CodeInvalidRequest, http.StatusUnsupportedMediaType, "unsupported content type: use application/json")
	errBlocked        = newRPCError(CodeMethodNotFound, http.StatusForbidden, "method not allowed by proxy")
	errBadMethodName  = newRPCError(CodeMethodNotFound, http.StatusForbidden, "method not found")
	errReadBody       = newRPCError(CodeInternalError, http.StatusBadRequest, "could not read request body")
	errRateLimited    = newRPCError(CodeRateLimited, http.StatusTooManyRequests, "over rate limit")
	errBatchTooLarge  = newRPCError(CodeBatchTooLarge, http.StatusRequestEntityTooLarge, "too many calls in batch")
	errBodyTooLarge   = newRPCError(CodeBodyTooLarge, http.StatusRequestEntityTooLarge, "request body too large")
	errUpstreamDown   = newRPCError(CodeUpstreamUnavailable, http.StatusBadGateway, "upstream unavailable")
	errUpstreamBad    = newRPCError(CodeUpstreamBadResponse, http.StatusBadGateway, "upstream returned an invalid response")
	errUpstreamSlow   = newRPCError(CodeUpstreamTimeout, http.StatusGatewayTimeout, "upstream timeout")
	errUpstreamLarge  = newRPCError(CodeUpstreamTooLarge, http.StatusBadGateway, "upstream response too large")
	errOverCapacity   = newRPCError(CodeOverCapacity, http.StatusServiceUnavailable, "proxy over capacity: try again later")
	errTooManyAtOnce  = newRPCError(CodeTooManyRequests, http.StatusTooManyRequests, "too many concurrent requests")
)

// maxErrorLen bounds what appendError adds besides the id, and a comma:
// the room an answer needs per call the proxy answers itself.
var maxErrorLen = func() int {
	n := 0
	for _, e := range []*rpcError{errParse, errInvalidRequest, errEmptyBatch, errHTTPMethod, errContentType,
		errBlocked, errBadMethodName, errReadBody, errRateLimited, errBatchTooLarge, errBodyTooLarge,
		errUpstreamDown, errUpstreamBad, errUpstreamSlow, errUpstreamLarge, errOverCapacity, errTooManyAtOnce} {
		n = max(n, len(appendError(nil, nil, e))+1)
	}
	return n
}()
