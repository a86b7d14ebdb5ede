package rpcproxy

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"math"
	"mime"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

var _ http.Handler = (*Proxy)(nil)

// Proxy is the JSON-RPC reverse proxy. It is an http.Handler; mount it on any
// path. It is safe for concurrent use.
type Proxy struct {
	cfg       Config
	upstream  *url.URL
	target    upstreamTarget
	tr        http.RoundTripper // the Transport, or Config.Upstream
	policy    *policy
	lim       *limiter // nil when rate limiting is off
	gate      *gate
	mem       budget
	conns     atomic.Int64 // open connections on LimitListener listeners
	m         *metrics
	gatherer  prometheus.Gatherer
	log       *slog.Logger
	keyHeader string
	seed      maphash.Seed
	retryAt   []string // Retry-After value for 429s of the rate limit

	states sync.Pool // *reqState
}

// New returns a proxy forwarding to the JSON-RPC endpoint at upstreamURL
// (http or https), for example "http://127.0.0.1:8545". With
// Config.Upstream set (a pool of nodes, rpcproxy/nodes), upstreamURL may
// be "": requests go through Config.Upstream, and the URL, when given,
// only names the upstream in logs.
func New(upstreamURL string, cfg Config) (*Proxy, error) {
	if upstreamURL == "" && cfg.Upstream != nil {
		upstreamURL = "http://upstream/"
	}
	u, err := url.Parse(upstreamURL)
	if err != nil {
		return nil, fmt.Errorf("rpcproxy: upstream URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("rpcproxy: upstream URL %q: want http://host[:port][/path] or https://…", upstreamURL)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.TrustedProxies = slices.Clone(cfg.TrustedProxies)
	var auth []string
	if u.User != nil {
		pw, _ := u.User.Password()
		auth = []string{"Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw))}
	}
	pol, err := newPolicy(cfg.AllowMethods, cfg.DenyMethods)
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		cfg:       cfg,
		upstream:  u,
		target:    newUpstreamTarget(u, auth),
		tr:        cfg.Upstream,
		policy:    pol,
		gate:      newGate(cfg.MaxConcurrentRequests, cfg.MaxConcurrentRequestsPerClient),
		mem:       budget{max: cfg.MaxBufferedBytes},
		log:       cfg.Logger,
		keyHeader: textproto.CanonicalMIMEHeaderKey(cfg.ClientKeyHeader),
		seed:      maphash.MakeSeed(),
	}
	if cfg.Rate != rate.Inf {
		p.lim = newLimiter(cfg.Rate, cfg.Burst, cfg.BucketIdleTimeout, cfg.MaxBuckets, cfg.Now())
		p.retryAt = []string{strconv.Itoa(int(math.Ceil(1 / float64(cfg.Rate))))}
	}
	reg := cfg.Registerer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, p.gatherer = r, r
	} else if g, ok := reg.(prometheus.Gatherer); ok {
		p.gatherer = g
	}
	var extra []string
	for _, m := range cfg.AllowMethods {
		if last := m[len(m)-1]; last != '_' && last != '*' {
			extra = append(extra, m)
		}
	}
	p.m, err = newMetrics(reg, extra, gauges{
		buckets: func() float64 {
			if p.lim == nil {
				return 0
			}
			return float64(p.lim.len())
		},
		inFlight: func() float64 { return float64(p.gate.inFlight()) },
		buffered: func() float64 { return float64(p.mem.used.Load()) },
		conns:    func() float64 { return float64(p.conns.Load()) },
	})
	if err != nil {
		return nil, fmt.Errorf("rpcproxy: registering metrics: %w", err)
	}
	if p.tr == nil {
		p.tr = newTransport(cfg)
	}
	p.states.New = func() any { return &reqState{calls: make([]call, 0, 8)} }
	return p, nil
}

// Gatherer returns the registry holding the proxy's metrics when
// Config.Registerer was nil (or is itself a Gatherer), for mounting with
// promhttp.HandlerFor; otherwise nil.
func (p *Proxy) Gatherer() prometheus.Gatherer { return p.gatherer }

// CloseIdleConnections closes the pooled keep-alive connections to the node
// (Config.Upstream's, when it has such a method). Call it when the proxy is
// discarded.
func (p *Proxy) CloseIdleConnections() {
	if c, ok := p.tr.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// reqState is the per-request scratch space, pooled.
type reqState struct {
	body  []byte
	out   []byte
	up    []byte
	calls []call

	reserved int64 // taken from the proxy's budget for this request
	limited  io.LimitedReader
}

const maxPooledBuf = 64 << 10

// reserve takes n bytes of the budget for this request.
func (st *reqState) reserve(b *budget, n int64) bool {
	if !b.reserve(n) {
		return false
	}
	st.reserved += n
	return true
}

func (p *Proxy) putState(st *reqState) {
	p.mem.release(st.reserved)
	st.reserved = 0
	st.limited = io.LimitedReader{}
	if cap(st.body) > maxPooledBuf {
		st.body = nil
	}
	if cap(st.out) > maxPooledBuf {
		st.out = nil
	}
	if cap(st.up) > maxPooledBuf {
		st.up = nil
	}
	if cap(st.calls) > 1024 {
		st.calls = nil
	}
	st.calls = st.calls[:0]
	p.states.Put(st)
}

var (
	headerJSON  = []string{"application/json"}
	headerAllow = []string{http.MethodPost}
	retryOne    = []string{"1"}
)

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header()["Allow"] = headerAllow
		p.writeWhole(w, errHTTPMethod)
		return
	}
	if !acceptableContentType(r.Header["Content-Type"]) {
		p.writeWhole(w, errContentType)
		return
	}
	if r.ContentLength > p.cfg.MaxBodyBytes {
		p.writeWhole(w, errBodyTooLarge)
		return
	}
	key := p.clientKeyOf(r)
	if over := p.gate.enter(key); over != "" {
		p.m.overCapacity(over)
		w.Header()["Retry-After"] = retryOne
		if over == limitPerClient {
			p.writeWhole(w, errTooManyAtOnce)
		} else {
			p.writeWhole(w, errOverCapacity)
		}
		return
	}
	defer p.gate.leave(key)
	st := p.states.Get().(*reqState)
	defer p.putState(st)

	body, err := p.readAll(st, st.body, r.Body, p.cfg.MaxBodyBytes)
	st.body = body
	switch {
	case errors.Is(err, errTooLarge):
		p.writeWhole(w, errBodyTooLarge)
		return
	case errors.Is(err, errOverBudget):
		p.m.overCapacity(limitBuffered)
		w.Header()["Retry-After"] = retryOne
		p.writeWhole(w, errOverCapacity)
		return
	case err != nil:
		p.log.LogAttrs(r.Context(), slog.LevelDebug, "rpcproxy: reading request body", slog.String("error", err.Error()))
		p.writeWhole(w, errReadBody)
		return
	}

	calls, batch, res := parseRequest(body, p.cfg.MaxBatchSize, st.calls[:0])
	st.calls = calls
	switch res {
	case parseMalformed:
		p.writeWhole(w, errParse)
		return
	case parseNotRequest:
		p.writeWhole(w, errInvalidRequest)
		return
	case parseEmptyBatch:
		p.writeWhole(w, errEmptyBatch)
		return
	case parseBatchTooLarge:
		p.writeWhole(w, errBatchTooLarge)
		return
	}

	// Method policy, then one token per call that would reach the node.
	forward := 0
	for i := range calls {
		c := &calls[i]
		if c.outcome != outcomeForwarded {
			continue
		}
		if !p.policy.allowed(c.methodName(body)) {
			c.outcome, c.err = outcomeBlocked, errBlocked
			continue
		}
		forward++
	}
	limited := 0
	if forward > 0 && p.lim != nil {
		got := p.lim.take(key, forward, p.cfg.Now())
		for i := range calls {
			c := &calls[i]
			if c.outcome != outcomeForwarded {
				continue
			}
			if got > 0 {
				got--
				continue
			}
			c.outcome, c.err = outcomeRateLimited, errRateLimited
			limited++
		}
		forward -= limited
	}

	switch {
	case forward == len(calls):
		p.forwardWhole(w, r, st, batch)
	case !batch:
		c := &calls[0]
		if c.outcome == outcomeRateLimited {
			w.Header()["Retry-After"] = p.retryAt
		}
		st.out = appendError(st.out[:0], c.id(body), c.err)
		p.writeBody(w, c.err.status, st.out)
		p.countCalls(st)
	case forward == 0:
		status := http.StatusOK
		if limited > 0 {
			status = http.StatusTooManyRequests
			w.Header()["Retry-After"] = p.retryAt
		}
		st.out = p.assemble(st.out[:0], st, nil)
		p.writeBody(w, status, st.out)
		p.countCalls(st)
	default:
		p.forwardPartial(w, r, st)
	}
}

// acceptableContentType accepts what go-ethereum's HTTP server accepts.
func acceptableContentType(v []string) bool {
	if len(v) != 1 {
		return false
	}
	if v[0] == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(v[0])
	if err != nil {
		return false
	}
	switch mt {
	case "application/json", "application/json-rpc", "application/jsonrequest":
		return true
	}
	return false
}

var (
	errTooLarge   = errors.New("rpcproxy: too large")
	errOverBudget = errors.New("rpcproxy: over the buffered-bytes budget")
)

// minBuf is the first capacity of a buffer that reads a body.
const minBuf = 512

// readAll reads r into buf (reusing its capacity) up to limit bytes. The
// buffer grows with the bytes that arrive — by doubling, never to a length
// the sender only declared — and its capacity is taken from the proxy's
// budget before it grows.
func (p *Proxy) readAll(st *reqState, buf []byte, r io.Reader, limit int64) ([]byte, error) {
	buf = buf[:0]
	if c := int64(cap(buf)); c > 0 && !st.reserve(&p.mem, c) {
		return buf, errOverBudget
	}
	for {
		if len(buf) == cap(buf) {
			n := min(max(2*cap(buf), minBuf), int(limit)+1)
			if !st.reserve(&p.mem, int64(n-cap(buf))) {
				return buf, errOverBudget
			}
			buf = append(make([]byte, 0, n), buf...)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// roundTrip sends req to the node and observes the time to its answer's
// headers.
func (p *Proxy) roundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := p.tr.RoundTrip(req)
	p.m.latency.Observe(time.Since(start).Seconds())
	return resp, err
}

// upstreamError maps a failed round trip to the proxy's answer: the client
// went away; the node took longer than UpstreamTimeout; it could not be
// reached or hung up (dial, TLS, reset, end of file); or what it sent was
// not an HTTP/1.x answer the Transport could read (malformed, headers over
// the cap).
func upstreamError(r *http.Request, err error) (*rpcError, outcome) {
	var ne net.Error
	var cv *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	var ae tls.AlertError
	switch {
	case r.Context().Err() != nil:
		return nil, outcomeCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return errUpstreamSlow, outcomeUpstreamTimeout
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.As(err, &cv), errors.As(err, &rh), errors.As(err, &ae):
		return errUpstreamDown, outcomeUpstreamUnavailable
	}
	return errUpstreamBad, outcomeUpstreamBadResponse
}

// forwardWhole sends the request body unchanged and streams the node's
// answer back, up to MaxResponseBytes.
func (p *Proxy) forwardWhole(w http.ResponseWriter, r *http.Request, st *reqState, batch bool) {
	body := st.body
	ctx, cancel := context.WithTimeout(r.Context(), p.cfg.UpstreamTimeout)
	defer cancel()
	req := p.target.request(ctx, body)
	st.body = nil // the Transport's now: it may read it after RoundTrip returns
	resp, err := p.roundTrip(req)
	if err != nil {
		p.failUpstream(w, r, st, body, batch, err)
		return
	}
	defer resp.Body.Close()
	if resp.ContentLength > p.cfg.MaxResponseBytes {
		p.failCalls(w, r, st, body, batch, errUpstreamLarge, outcomeUpstreamBadResponse,
			fmt.Errorf("answer of %d bytes, over MaxResponseBytes", resp.ContentLength))
		return
	}
	h := w.Header()
	h["Content-Type"] = headerJSON
	if ct := resp.Header["Content-Type"]; ct != nil {
		h["Content-Type"] = ct
	}
	if resp.ContentLength >= 0 {
		h["Content-Length"] = []string{strconv.FormatInt(resp.ContentLength, 10)}
	}
	w.WriteHeader(resp.StatusCode)
	st.limited = io.LimitedReader{R: resp.Body, N: p.cfg.MaxResponseBytes + 1}
	n, err := copyAnswer(w, &st.limited)
	p.m.request(resp.StatusCode)
	if n > p.cfg.MaxResponseBytes {
		// The head is out: cut the client's connection, so that it sees a
		// broken answer rather than a short one that looks whole.
		for i := range st.calls {
			if c := &st.calls[i]; c.outcome == outcomeForwarded {
				c.outcome = outcomeUpstreamBadResponse
			}
		}
		p.countCallsIn(st.calls, body)
		p.log.LogAttrs(r.Context(), slog.LevelWarn, "rpcproxy: upstream answer over MaxResponseBytes; client connection cut",
			slog.String("upstream_host", p.upstream.Host), slog.Int64("max_response_bytes", p.cfg.MaxResponseBytes))
		panic(http.ErrAbortHandler)
	}
	if err != nil {
		p.log.LogAttrs(r.Context(), slog.LevelDebug, "rpcproxy: streaming response", slog.String("error", err.Error()))
	}
	p.countCallsIn(st.calls, body)
}

// copyBufs are the buffers of copyAnswer.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyAnswer copies the node's answer to w: through net/http's own pooled
// buffer when w is the server's response writer, through one of copyBufs
// when a middleware has wrapped it (io.Copy would allocate 32 KiB).
func copyAnswer(w http.ResponseWriter, src io.Reader) (int64, error) {
	if rf, ok := w.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	return io.CopyBuffer(w, src, *buf)
}

// failUpstream answers every call of a request whose round trip failed.
func (p *Proxy) failUpstream(w http.ResponseWriter, r *http.Request, st *reqState, body []byte, batch bool, err error) {
	e, o := upstreamError(r, err)
	p.failCalls(w, r, st, body, batch, e, o, err)
}

// failCalls answers every forwarded call of a request with e (nothing, when
// the client went away).
func (p *Proxy) failCalls(w http.ResponseWriter, r *http.Request, st *reqState, body []byte, batch bool, e *rpcError, o outcome, err error) {
	for i := range st.calls {
		c := &st.calls[i]
		if c.outcome == outcomeForwarded {
			c.outcome, c.err = o, e
		}
	}
	if o == outcomeCanceled {
		p.m.request(499)
		p.countCallsIn(st.calls, body)
		return
	}
	p.log.LogAttrs(r.Context(), slog.LevelWarn, "rpcproxy: upstream request failed",
		slog.String("upstream_host", p.upstream.Host), slog.String("error", err.Error()))
	if batch {
		st.out = assembleFrom(st.out[:0], body, nil, st.calls, nil)
	} else {
		st.out = appendError(st.out[:0], st.calls[0].id(body), e)
	}
	p.writeBody(w, e.status, st.out)
	p.countCallsIn(st.calls, body)
}

// forwardPartial forwards the calls that passed policy and rate limit as a
// new batch whose ids are the calls' positions, then splices the node's
// answers and the proxy's own errors back together in the caller's order,
// with the caller's ids. Rewriting ids makes matching robust to duplicate or
// null ids in the caller's batch.
func (p *Proxy) forwardPartial(w http.ResponseWriter, r *http.Request, st *reqState) {
	body := st.body
	// The ids become positions (at most 9 digits each).
	size := len(body) + 2 + 10*len(st.calls)
	if !st.reserve(&p.mem, int64(size)) {
		p.m.overCapacity(limitBuffered)
		p.failPartial(w, st, errOverCapacity, outcomeOverCapacity)
		return
	}
	fwd := make([]byte, 0, size)
	fwd = append(fwd, '[')
	for i := range st.calls {
		c := &st.calls[i]
		if c.outcome != outcomeForwarded {
			continue
		}
		if len(fwd) > 1 {
			fwd = append(fwd, ',')
		}
		if !c.hasID { // a notification: forwarded as is, no answer expected
			fwd = append(fwd, body[c.start:c.end]...)
			continue
		}
		fwd = append(fwd, body[c.start:c.idStart]...)
		fwd = strconv.AppendInt(fwd, int64(i), 10)
		fwd = append(fwd, body[c.idEnd:c.end]...)
	}
	fwd = append(fwd, ']')

	ctx, cancel := context.WithTimeout(r.Context(), p.cfg.UpstreamTimeout)
	defer cancel()
	req := p.target.request(ctx, fwd)
	resp, err := p.roundTrip(req)
	if err != nil {
		p.failUpstream(w, r, st, body, true, err)
		return
	}
	var up []byte
	if resp.ContentLength > p.cfg.MaxResponseBytes {
		err = errTooLarge
	} else {
		up, err = p.readAll(st, st.up, resp.Body, p.cfg.MaxResponseBytes)
		st.up = up
	}
	resp.Body.Close()
	if err != nil {
		var e *rpcError
		var o outcome
		switch {
		case errors.Is(err, errTooLarge):
			e, o = errUpstreamLarge, outcomeUpstreamBadResponse
		case errors.Is(err, errOverBudget):
			p.m.overCapacity(limitBuffered)
			e, o = errOverCapacity, outcomeOverCapacity
		default:
			e, o = upstreamError(r, err)
		}
		if o == outcomeCanceled {
			p.failUpstream(w, r, st, body, true, err)
			return
		}
		p.failPartial(w, st, e, o)
		return
	}
	upErr := matchResponses(up, st.calls)
	// The answer: the node's answers with the caller's ids, and an error
	// object for each of the other calls.
	// object for each of the other calls (the node's one error for the whole
	// batch is repeated for each forwarded call). The size is an upper
	// bound, so the buffer does not grow past what was reserved.
	size = spliceBound(body, up, upErr, len(st.calls))
	if !st.reserve(&p.mem, int64(size)) {
		p.m.overCapacity(limitBuffered)
		p.failPartial(w, st, errOverCapacity, outcomeOverCapacity)
		return
	}
	st.out = p.assemble(slices.Grow(st.out[:0], size), st, upErr)
	status := http.StatusOK
	answered, bad := false, false
	for i := range st.calls {
		switch st.calls[i].outcome {
		case outcomeForwarded:
			answered = answered || st.calls[i].hasID
		case outcomeUpstreamBadResponse:
			bad = true
		}
	}
	if bad && !answered {
		status = errUpstreamBad.status // nothing usable came back
	}
	p.writeBody(w, status, st.out)
	p.countCalls(st)
}

// failPartial answers a partly refused batch whose forwarded calls all
// failed with e; the refused calls keep their own errors.
func (p *Proxy) failPartial(w http.ResponseWriter, st *reqState, e *rpcError, o outcome) {
	for i := range st.calls {
		if c := &st.calls[i]; c.outcome == outcomeForwarded {
			c.outcome, c.err = o, e
		}
	}
	if e == errOverCapacity {
		w.Header()["Retry-After"] = retryOne
	}
	st.out = p.assemble(st.out[:0], st, nil)
	p.writeBody(w, e.status, st.out)
	p.countCalls(st)
}

// spliceBound bounds the length of the answer assemble writes for a batch
// of n calls in body, given the node's answer up (and its one error for
// the whole batch, if that is what it sent).
func spliceBound(body, up, upErr []byte, n int) int {
	size := len(body) + 2 + n*maxErrorLen
	if upErr == nil {
		return size + len(up)
	}
	return size + n*(len(upErr)+maxErrorLen)
}

// matchResponses records, for each forwarded call, the node's answer to it.
// When the node answered the whole batch with one error object (say it
// refused the batch), that error's value is returned so it can be given to
// every forwarded call.
func matchResponses(up []byte, calls []call) []byte {
	if !json.Valid(up) {
		return nil
	}
	i := skipWS(up, 0)
	switch up[i] {
	case '{':
		o, _ := parseObject(up, i)
		if o.eStart >= 0 {
			return up[o.eStart:o.eEnd]
		}
		return nil
	case '[':
	default:
		return nil
	}
	i++
	for {
		i = skipWS(up, i)
		switch up[i] {
		case ']':
			return nil
		case ',':
			i++
			continue
		case '{':
		default:
			i = skipValue(up, i)
			continue
		}
		o, next := parseObject(up, i)
		i = next
		if o.idStart < 0 {
			continue
		}
		n, ok := parseDigits(up[o.idStart:o.idEnd], 9)
		if !ok || n >= len(calls) {
			continue
		}
		c := &calls[n]
		if c.outcome != outcomeForwarded || !c.hasID || c.rStart >= 0 {
			continue
		}
		c.rStart, c.rEnd, c.rIDStart, c.rIDEnd = o.start, o.end, o.idStart, o.idEnd
	}
}

// assemble writes the batch response for st.calls: the node's answers
// (matched by matchResponses) with the caller's ids put back, and errors for
// everything else. Notifications get no entry unless they were invalid.
func (p *Proxy) assemble(dst []byte, st *reqState, upErr []byte) []byte {
	return assembleFrom(dst, st.body, st.up, st.calls, upErr)
}

func assembleFrom(dst, body, up []byte, calls []call, upErr []byte) []byte {
	n := 0
	dst = append(dst, '[')
	for i := range calls {
		c := &calls[i]
		if !c.hasID && c.outcome != outcomeInvalid {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		switch {
		case c.outcome != outcomeForwarded:
			dst = appendError(dst, c.id(body), c.err)
		case c.rStart >= 0:
			dst = append(dst, up[c.rStart:c.rIDStart]...)
			dst = append(dst, c.id(body)...)
			dst = append(dst, up[c.rIDEnd:c.rEnd]...)
		case upErr != nil:
			dst = append(dst, `{"jsonrpc":"2.0","id":`...)
			dst = append(dst, c.id(body)...)
			dst = append(dst, `,"error":`...)
			dst = append(dst, upErr...)
			dst = append(dst, '}')
		default:
			c.outcome, c.err = outcomeUpstreamBadResponse, errUpstreamBad
			dst = appendError(dst, c.id(body), c.err)
		}
	}
	if n == 0 {
		return dst[:0] // only notifications: nothing to answer
	}
	return append(dst, ']')
}

// writeWhole answers the whole request with e and a null id.
func (p *Proxy) writeWhole(w http.ResponseWriter, e *rpcError) {
	p.writeBody(w, e.status, e.nullID)
}

func (p *Proxy) writeBody(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	_, _ = w.Write(b)
	p.m.request(status)
}

func (p *Proxy) countCalls(st *reqState) { p.countCallsIn(st.calls, st.body) }

func (p *Proxy) countCallsIn(calls []call, body []byte) {
	for i := range calls {
		c := &calls[i]
		p.m.call(c.methodName(body), c.outcome)
	}
}
