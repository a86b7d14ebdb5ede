package rpcproxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
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
	upstreamS string
	auth      []string // Authorization from the URL's user info, if any
	up        *upstream
	policy    *policy
	lim       *limiter // nil when rate limiting is off
	m         *metrics
	gatherer  prometheus.Gatherer
	log       *slog.Logger
	keyHeader string
	seed      maphash.Seed
	retryAt   []string // Retry-After value for 429s

	states sync.Pool // *reqState
}

// New returns a proxy forwarding to the JSON-RPC endpoint at upstreamURL
// (http or https), for example "http://127.0.0.1:8545".
func New(upstreamURL string, cfg Config) (*Proxy, error) {
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
		upstreamS: u.String(),
		auth:      auth,
		policy:    pol,
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
		if m[len(m)-1] != '_' {
			extra = append(extra, m)
		}
	}
	p.m, err = newMetrics(reg, extra, func() float64 {
		if p.lim == nil {
			return 0
		}
		return float64(p.lim.len())
	})
	if err != nil {
		return nil, fmt.Errorf("rpcproxy: registering metrics: %w", err)
	}
	// Never through an environment proxy; no Accept-Encoding, so the
	// node's bytes are streamed to the client as they are.
	p.up = newUpstream(u, auth, cfg.MaxIdleUpstreamConns)
	p.states.New = func() any { return &reqState{calls: make([]call, 0, 8)} }
	return p, nil
}

// Gatherer returns the registry holding the proxy's metrics when
// Config.Registerer was nil (or is itself a Gatherer), for mounting with
// promhttp.HandlerFor; otherwise nil.
func (p *Proxy) Gatherer() prometheus.Gatherer { return p.gatherer }

// CloseIdleConnections closes the pooled keep-alive connections to the node.
// Call it when the proxy is discarded.
func (p *Proxy) CloseIdleConnections() { p.up.closeIdle() }

// reqState is the per-request scratch space, pooled.
type reqState struct {
	body  []byte
	out   []byte
	up    []byte
	calls []call
}

const maxPooledBuf = 64 << 10

func (p *Proxy) putState(st *reqState) {
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
	st := p.states.Get().(*reqState)
	defer p.putState(st)

	body, err := readBody(st.body[:0], r.Body, r.ContentLength, p.cfg.MaxBodyBytes)
	st.body = body
	switch {
	case errors.Is(err, errTooLarge):
		p.writeWhole(w, errBodyTooLarge)
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
		got := p.lim.take(p.clientKeyOf(r), forward, p.cfg.Now())
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

var errTooLarge = errors.New("body too large")

// readBody reads r into buf (reusing its capacity) up to limit bytes.
func readBody(buf []byte, r io.Reader, contentLength, limit int64) ([]byte, error) {
	if contentLength > 0 && int64(cap(buf)) < contentLength+1 {
		buf = make([]byte, 0, contentLength+1) // +1 to see EOF without growing
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
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

// roundTrip sends body to the node for r (body is written before roundTrip
// returns and may be reused afterwards). The exchange is bounded by
// UpstreamTimeout, as a deadline on the node's connection (a context with
// a timeout per request cost a timer and a cancellation registration),
// and ends early when r's client goes away.
func (p *Proxy) roundTrip(r *http.Request, body []byte) (*upResponse, error) {
	start := time.Now()
	resp, err := p.up.roundTrip(r.Context(), start.Add(p.cfg.UpstreamTimeout), body)
	p.m.latency.Observe(time.Since(start).Seconds())
	return resp, err
}

// upstreamError maps a failed round trip to the proxy's answer.
func upstreamError(r *http.Request, err error) (*rpcError, outcome) {
	switch {
	case r.Context().Err() != nil:
		return nil, outcomeCanceled
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return errUpstreamSlow, outcomeUpstreamTimeout
	}
	return errUpstreamDown, outcomeUpstreamUnavailable
}

// forwardWhole sends the request body unchanged and streams the node's
// answer back.
func (p *Proxy) forwardWhole(w http.ResponseWriter, r *http.Request, st *reqState, batch bool) {
	body := st.body
	resp, err := p.roundTrip(r, body)
	if err != nil {
		p.failUpstream(w, r, st, body, batch, err)
		return
	}
	defer resp.body.Close()
	h := w.Header()
	h["Content-Type"] = headerJSON
	if resp.contentType != nil {
		h["Content-Type"] = resp.contentType
	}
	if resp.contentLength != nil {
		h["Content-Length"] = resp.contentLength
	}
	w.WriteHeader(resp.status)
	if _, err := io.Copy(w, resp.body); err != nil {
		p.log.LogAttrs(r.Context(), slog.LevelDebug, "rpcproxy: streaming response", slog.String("error", err.Error()))
	}
	p.m.request(resp.status)
	p.countCallsIn(st.calls, body)
}

// failUpstream answers every call of a request whose round trip failed.
func (p *Proxy) failUpstream(w http.ResponseWriter, r *http.Request, st *reqState, body []byte, batch bool, err error) {
	e, o := upstreamError(r, err)
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
	fwd := make([]byte, 0, len(body)+8)
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

	resp, err := p.roundTrip(r, fwd)
	if err != nil {
		p.failUpstream(w, r, st, body, true, err)
		return
	}
	up, err := readBody(st.up[:0], resp.body, resp.length, p.cfg.MaxResponseBytes)
	resp.body.Close()
	st.up = up
	if err != nil {
		e, o := errUpstreamBad, outcomeUpstreamBadResponse
		if !errors.Is(err, errTooLarge) {
			e, o = upstreamError(r, err)
		}
		if o == outcomeCanceled {
			p.failUpstream(w, r, st, body, true, err)
			return
		}
		for i := range st.calls {
			if c := &st.calls[i]; c.outcome == outcomeForwarded {
				c.outcome, c.err = o, e
			}
		}
		st.out = p.assemble(st.out[:0], st, nil)
		p.writeBody(w, e.status, st.out)
		p.countCalls(st)
		return
	}
	upErr := matchResponses(up, st.calls)
	st.out = p.assemble(st.out[:0], st, upErr)
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
