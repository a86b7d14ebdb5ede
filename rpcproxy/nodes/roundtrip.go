package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// RoundTrip implements http.RoundTripper for JSON-RPC 2.0 over HTTP POST
// (the request's URL is ignored: the pool picks the node). Reads (every
// call but eth_sendRawTransaction, batches included) go to one usable
// node and, when it fails (no answer, a timeout, HTTP 5xx or 429, an
// answer that is not JSON-RPC), to the next. A request carrying
// eth_sendRawTransaction is sent to every usable node at once (docs/chains.md,
// "Node failover", has the rule that merges their answers). An answer up
// to 256 KiB is read whole and checked before it is returned; a larger one
// is checked by its start and streamed (close its body).
func (p *Pool) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	ctx := req.Context()
	r := parseRequest(body)
	sends := r.sends()
	switch {
	case sends == 0:
		res, err := p.read(ctx, &r, false)
		if err != nil {
			return nil, err
		}
		resp := response(req, res.status, res.body)
		if res.stream != nil {
			resp.Body, resp.ContentLength = res.stream, res.length
		}
		return resp, nil
	case sends == len(r.calls):
		out, err := p.sendAll(ctx, &r)
		if err != nil {
			return nil, err
		}
		return response(req, http.StatusOK, out), nil
	default:
		out, err := p.mixed(ctx, &r)
		if err != nil {
			return nil, err
		}
		return response(req, http.StatusOK, out), nil
	}
}

// checkedBytes: a read's answer up to this size is read whole and checked
// before it is passed on, so that a node answering garbage is failed over;
// a larger one is checked by its first checkedBytes and then streamed, so
// that the pool holds no more than this of any answer (the RPC proxy's
// callers must not make it hold memory they did not send).
const checkedBytes = 256 << 10

// readResult is a node's answer to a read: whole (body) or, when larger
// than checkedBytes, its first bytes in body and all of it in stream.
type readResult struct {
	status int
	body   []byte
	as     []answer
	stream io.ReadCloser
	length int64
}

// read sends a read to one node, and to the next when it fails. An
// eth_blockNumber answer below the served head, or above any block the
// node serves, is not passed on: another node is asked. With whole, the
// answer is read whole and its answers returned.
func (p *Pool) read(ctx context.Context, r *request, whole bool) (readResult, error) {
	tried := make([]bool, len(p.nodes))
	whole = whole || r.has("eth_blockNumber")
	var last error
	for attempt := 0; ; attempt++ {
		if attempt == 2*len(p.nodes) {
			// Every node failed it twice: the request, not the nodes, is
			// the likelier fault (a call no node can answer in time).
			return readResult{}, &unavailableError{msg: fmt.Sprintf("%s: the read failed %d times (last: %v)", ErrNoNode, attempt, last)}
		}
		n, err := p.acquire(ctx, tried, true)
		if err != nil {
			return readResult{}, err
		}
		res, err := p.take(ctx, n, r, whole)
		if ctx.Err() != nil {
			return readResult{}, ctx.Err()
		}
		if errors.Is(err, errTooLarge) {
			return readResult{}, err
		}
		if err != nil {
			p.m.requests.WithLabelValues(n.name, "failed").Inc()
			p.m.failovers.Inc()
			p.fail(n, err)
			tried[n.idx] = true
			last = errors.New(n.name + ": " + n.scrub(err.Error()))
			continue
		}
		if head, ok := headIn(r, res.as); ok && !p.observeHead(ctx, n, head, time.Now()) {
			if ctx.Err() != nil {
				return readResult{}, ctx.Err()
			}
			p.m.requests.WithLabelValues(n.name, "head_refused").Inc()
			p.m.failovers.Inc()
			tried[n.idx] = true
			continue
		}
		p.m.requests.WithLabelValues(n.name, "ok").Inc()
		return res, nil
	}
}

// take sends the read to n and checks the answer: a fault of the node
// (HTTP status, not JSON-RPC) is an error.
func (p *Pool) take(ctx context.Context, n *node, r *request, whole bool) (readResult, error) {
	resp, cancel, err := p.open(ctx, n, r.body)
	if err != nil {
		return readResult{}, err
	}
	done := func() {
		resp.Body.Close()
		cancel()
	}
	if resp.ContentLength > p.cfg.MaxResponseBytes {
		done()
		return readResult{}, errTooLarge
	}
	if nodeFault(resp.StatusCode) {
		done()
		return readResult{}, badAnswer(resp.StatusCode, nil)
	}
	limit := p.cfg.MaxResponseBytes
	if !whole {
		limit = min(limit, checkedBytes)
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		done()
		return readResult{}, err
	}
	res := readResult{status: resp.StatusCode, body: buf}
	if int64(len(buf)) <= limit {
		done()
		var ok bool
		if res.as, ok = parseAnswers(r, buf); !ok {
			return readResult{}, badAnswer(resp.StatusCode, buf)
		}
		return res, nil
	}
	if whole {
		done()
		return readResult{}, errTooLarge
	}
	// A large answer: its start must be that of a JSON-RPC answer.
	trimmed := bytes.TrimLeft(buf, " \t\r\n")
	want := byte('{')
	if r.batch {
		want = '['
	}
	if len(trimmed) == 0 || trimmed[0] != want || !bytes.Contains(buf, []byte(`"jsonrpc"`)) {
		done()
		return readResult{}, badAnswer(resp.StatusCode, buf)
	}
	res.stream = &streamBody{r: io.MultiReader(bytes.NewReader(buf), resp.Body), left: p.cfg.MaxResponseBytes, done: done}
	res.length = resp.ContentLength
	return res, nil
}

// streamBody passes a large answer on, up to MaxResponseBytes, and ends
// the attempt when closed.
type streamBody struct {
	r    io.Reader
	left int64
	done func()
	once sync.Once
}

func (s *streamBody) Read(b []byte) (int, error) {
	if int64(len(b)) > s.left+1 {
		b = b[:s.left+1]
	}
	n, err := s.r.Read(b)
	s.left -= int64(n)
	if s.left < 0 {
		return n - 1, errTooLarge
	}
	return n, err
}

func (s *streamBody) Close() error {
	s.once.Do(s.done)
	return nil
}

// headIn returns the highest head answered to the request's
// eth_blockNumber calls.
func headIn(r *request, as []answer) (uint64, bool) {
	var head uint64
	found := false
	for i := range r.calls {
		c := &r.calls[i]
		if c.Method != "eth_blockNumber" || c.notification() {
			continue
		}
		a := answerFor(as, r.batch, c.ID)
		if a == nil || a.Error != nil {
			continue
		}
		if h, ok := quantity(a.Result); ok {
			head, found = max(head, h), true
		}
	}
	return head, found
}

// sendAll answers a request whose calls are all eth_sendRawTransaction.
func (p *Pool) sendAll(ctx context.Context, r *request) ([]byte, error) {
	calls := make([]*call, len(r.calls))
	for i := range r.calls {
		calls[i] = &r.calls[i]
	}
	as, err := p.broadcast(ctx, calls)
	if err != nil {
		return nil, err
	}
	return encodeAnswers(r, as)
}

// mixed answers a batch of reads and eth_sendRawTransaction calls: the
// reads go to one node as a batch (ids replaced by positions), the
// transactions to every node, and the answers are put back in the
// caller's order with the caller's ids.
func (p *Pool) mixed(ctx context.Context, r *request) ([]byte, error) {
	var reads, sends []*call
	var readPos []int
	for i := range r.calls {
		c := &r.calls[i]
		if c.Method == methodSendRaw {
			sends = append(sends, c)
		} else {
			reads = append(reads, c)
			readPos = append(readPos, i)
		}
	}
	sub, err := renumbered(reads)
	if err != nil {
		return nil, err
	}
	type answered struct {
		as  []answer
		err error
	}
	done := make(chan answered, 1)
	go func() {
		res, err := p.read(ctx, &sub, true)
		done <- answered{as: res.as, err: err}
	}()
	sent, err := p.broadcast(ctx, sends)
	rr := <-done
	if err != nil {
		return nil, err
	}
	if rr.err != nil {
		return nil, rr.err
	}
	out := make([]*answer, len(r.calls))
	for j, i := range readPos {
		if reads[j].notification() {
			continue
		}
		a := answerFor(rr.as, true, json.RawMessage(strconv.Itoa(j)))
		if a == nil {
			return nil, fmt.Errorf("nodes: the node's answer lacks call %d", i)
		}
		out[i] = a
	}
	k := 0
	for i := range r.calls {
		if r.calls[i].Method == methodSendRaw {
			out[i] = sent[k]
			k++
		}
	}
	return encodeAnswers(r, out)
}

// renumbered is a batch of the calls with their ids replaced by their
// positions (notifications stay notifications).
func renumbered(calls []*call) (request, error) {
	raws := make([]json.RawMessage, len(calls))
	for i, c := range calls {
		if c.notification() {
			raws[i] = c.raw
			continue
		}
		var err error
		if raws[i], err = withID(c, i); err != nil {
			return request{}, err
		}
	}
	body, err := json.Marshal(raws)
	if err != nil {
		return request{}, err
	}
	return parseRequest(body), nil
}

// encodeAnswers writes the answers (one per call; nil for notifications)
// with the caller's ids.
func encodeAnswers(r *request, as []*answer) ([]byte, error) {
	out := make([]answer, 0, len(as))
	for i, a := range as {
		if a == nil || r.calls[i].notification() {
			continue
		}
		out = append(out, answer{JSONRPC: "2.0", ID: r.calls[i].ID, Result: a.Result, Error: a.Error})
	}
	if !r.batch {
		if len(out) == 0 {
			return nil, nil
		}
		return json.Marshal(out[0])
	}
	return json.Marshal(out)
}

// ---- broadcast ----

// broadcast sends the eth_sendRawTransaction calls to every usable node at
// once and merges their answers per call:
//
//  1. a node accepted it (a result): that result;
//  2. else a node already has it ("already known", "known transaction",
//     "already in mempool", "tx already exists in cache"): success, with
//     the transaction's hash as the result;
//  3. else a node answered "nonce too low" (or a Cosmos SDK sequence
//     error) and some usable node knows the transaction by its hash
//     (eth_getTransactionByHash: pending or mined): success with the hash —
//     it is this transaction that used the nonce;
//  4. else the refusal of the first node that refused it, the current
//     read node first: the caller decides on a node's own words;
//  5. else (no node answered) the whole request fails with an error, as
//     a transport failure does: nothing says the transaction was refused.
func (p *Pool) broadcast(ctx context.Context, calls []*call) ([]*answer, error) {
	sub, err := renumbered(calls)
	if err != nil {
		return nil, err
	}
	body := sub.body
	if len(calls) == 1 {
		// One call is sent as one call (some nodes refuse batches).
		sub.batch = false
		body = sub.calls[0].raw
		sub.body = body
	}
	targets, err := p.usable(ctx)
	if err != nil {
		return nil, err
	}
	p.m.fanout.Observe(float64(len(targets)))

	// Every node gets the transaction even when the caller stops waiting:
	// once one node accepted every call the answer goes back, and the
	// other sends finish on their own (each bounded by RequestTimeout).
	type result struct {
		node int
		as   []*answer // per call; nil when the node gave no answer to it
		err  error
	}
	results := make(chan result, len(targets))
	sendCtx := context.WithoutCancel(ctx)
	for i, n := range targets {
		go func() {
			res := result{node: i, as: make([]*answer, len(calls))}
			status, out, err := p.exchange(sendCtx, n, body)
			var as []answer
			if err == nil {
				var ok bool
				if as, ok = parseAnswers(&sub, out); nodeFault(status) || !ok {
					err = badAnswer(status, out)
				}
			}
			if err != nil && !errors.Is(err, errTooLarge) {
				p.fail(n, err)
			}
			res.err = err
			for j, c := range calls {
				if c.notification() {
					continue
				}
				var a *answer
				if err == nil {
					a = answerFor(as, sub.batch, json.RawMessage(strconv.Itoa(j)))
				}
				res.as[j] = a
				outcome := "failed"
				switch {
				case a == nil:
				case a.Error == nil:
					outcome = "accepted"
				case alreadyKnown(a.Error.Message):
					outcome = "known"
				default:
					outcome = "refused"
				}
				p.m.broadcasts.WithLabelValues(n.name, outcome).Inc()
			}
			results <- res
		}()
	}
	got := make([]result, 0, len(targets))
	acceptedAll := func() bool {
		for j, c := range calls {
			if c.notification() {
				continue
			}
			if !slices.ContainsFunc(got, func(r result) bool { return r.as[j] != nil && r.as[j].Error == nil }) {
				return false
			}
		}
		return true
	}
	for len(got) < len(targets) && (len(got) == 0 || !acceptedAll()) {
		select {
		case r := <-results:
			got = append(got, r)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// The nodes' answers in the targets' order: the current node first.
	slices.SortFunc(got, func(a, b result) int { return a.node - b.node })

	out := make([]*answer, len(calls))
	var failed []string
	for _, r := range got {
		if r.err != nil {
			n := targets[r.node]
			failed = append(failed, n.name+": "+n.scrub(r.err.Error()))
		}
	}
	for j, c := range calls {
		if c.notification() {
			continue
		}
		var accepted, known, refused *answer
		nonceLow := false
		for _, r := range got {
			a := r.as[j]
			switch {
			case a == nil:
			case a.Error == nil:
				accepted = cmpOr(accepted, a)
			case alreadyKnown(a.Error.Message):
				known = cmpOr(known, a)
			default:
				nonceLow = nonceLow || nonceTooLow(a.Error.Message)
				refused = cmpOr(refused, a)
			}
		}
		hash, hashOK := txHash(c)
		switch {
		case accepted != nil:
			out[j] = accepted
		case known != nil && hashOK:
			out[j] = hashAnswer(hash)
		case nonceLow && hashOK && p.knows(ctx, hash):
			out[j] = hashAnswer(hash)
		case known != nil:
			out[j] = known
		case refused != nil:
			out[j] = refused
		default:
			return nil, &unavailableError{msg: "nodes: no node answered eth_sendRawTransaction (" + strings.Join(failed, "; ") + ")"}
		}
	}
	if len(failed) > 0 {
		p.log.Warn("nodes: a transaction did not reach every node", slog.Int("nodes", len(targets)),
			slog.String("failed", strings.Join(failed, "; ")))
	}
	return out, nil
}

func cmpOr(a, b *answer) *answer {
	if a != nil {
		return a
	}
	return b
}

func hashAnswer(h common.Hash) *answer {
	b, _ := json.Marshal(h)
	return &answer{Result: b}
}

// alreadyKnown: the node has the transaction (go-ethereum, Erigon,
// Nethermind, Cosmos EVM wordings).
func alreadyKnown(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"already known", "known transaction", "already in mempool", "tx already exists in cache", "alreadyknown", "already imported"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// nonceTooLow: the sender's nonce is used — by this transaction or another.
func nonceTooLow(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"nonce too low", "invalid nonce", "invalid sequence", "account sequence mismatch", "oldnonce"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// knows reports whether a usable node has the transaction (pending or
// mined).
func (p *Pool) knows(ctx context.Context, hash common.Hash) bool {
	p.mu.Lock()
	var targets []*node
	for _, n := range p.nodes {
		if n.up {
			targets = append(targets, n)
		}
	}
	p.mu.Unlock()
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionByHash","params":["%s"]}`, hash.Hex())
	req := parseRequest(body)
	found := make(chan bool, len(targets))
	for _, n := range targets {
		go func() {
			status, out, err := p.exchange(ctx, n, body)
			if err != nil || nodeFault(status) {
				found <- false
				return
			}
			as, ok := parseAnswers(&req, out)
			found <- ok && as[0].Error == nil && string(as[0].Result) != "null"
		}()
	}
	known := false
	for range targets {
		known = <-found || known
	}
	return known
}
