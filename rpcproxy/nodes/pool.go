package nodes

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/prometheus/client_golang/prometheus"
)

var _ http.RoundTripper = (*Pool)(nil)

// ErrNoNode is wrapped by the error of a request that no node could
// answer within Config.MaxWait: every node down, on another chain, or
// behind the head the pool has already served.
var ErrNoNode = errors.New("nodes: no usable node")

// A node's Problem in NodeStatus: why it is not usable.
const (
	ProblemUnchecked  = "unchecked"   // not checked yet
	ProblemDown       = "down"        // the health check got no valid answer
	ProblemFailed     = "failed"      // a request failed on it (transport, 5xx, timeout, invalid answer); the next check passing brings it back
	ProblemWrongChain = "wrong_chain" // answers another chain id than Config.ChainID (or the others')
	ProblemBadHead    = "bad_head"    // has no block at the head it reports
	ProblemGuard      = "guard"       // Config.Guard refused it
)

// Pool is a set of JSON-RPC nodes of one chain used as one. It implements
// http.RoundTripper for JSON-RPC over HTTP POST: reads go to one usable
// node and are sent again to the next on a failure; eth_sendRawTransaction
// goes to every usable node. It is safe for concurrent use.
type Pool struct {
	cfg      Config
	nodes    []*node
	log      *slog.Logger
	m        *metrics
	gatherer prometheus.Gatherer

	mu        sync.Mutex
	chainID   uint64 // the chain id every node must answer; 0 until known
	served    uint64 // the highest head reads were served from
	current   *node  // where reads go while it stays eligible
	changed   chan struct{}
	round     chan struct{} // non-nil while a check round runs; closed at its end
	lastRound time.Time
}

// node is one configured node.
type node struct {
	idx     int
	raw     string // as configured: may carry credentials
	name    string // redacted
	target  *url.URL
	header  http.Header
	secrets []string

	// Guarded by Pool.mu.
	up        bool
	problem   string
	err       string
	head      uint64
	headAt    time.Time // when head was observed
	verified  uint64    // the highest head the node was seen to serve the block of
	chainID   uint64
	checkedAt time.Time
	guardedAt time.Time
}

// New returns a pool of the nodes at urls (http or https; a password or an
// API key in the URL is sent as the node expects and never printed). No
// node is contacted until the first request or check: call Check to learn
// at start whether any is usable, and Run to keep checking them.
func New(urls []string, cfg Config) (*Pool, error) {
	if len(urls) == 0 {
		return nil, errors.New("nodes: no node URL")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	p := &Pool{cfg: cfg, log: cfg.Logger, chainID: cfg.ChainID, changed: make(chan struct{})}
	for i, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("nodes: node URL %s: want http://host[:port][/path] or https://…", RedactURL(raw))
		}
		if slices.ContainsFunc(p.nodes, func(n *node) bool { return n.raw == raw }) {
			return nil, fmt.Errorf("nodes: node URL %s is listed twice", RedactURL(raw))
		}
		n := &node{idx: i, raw: raw, name: RedactURL(raw), problem: ProblemUnchecked,
			header: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}, "User-Agent": {"evmpay-nodes"}}}
		t := *u
		t.User = nil
		n.target = &t
		if u.User != nil {
			pw, _ := u.User.Password()
			n.header["Authorization"] = []string{"Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw))}
			n.secrets = append(n.secrets, pw, u.User.Username())
		}
		for _, vs := range u.Query() {
			n.secrets = append(n.secrets, vs...)
		}
		for _, s := range strings.Split(u.Path, "/") {
			if looksLikeKey(s) {
				n.secrets = append(n.secrets, s)
			}
		}
		n.secrets = slices.DeleteFunc(n.secrets, func(s string) bool { return len(s) < 6 })
		p.nodes = append(p.nodes, n)
	}
	reg := cfg.Registerer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, p.gatherer = r, r
	} else if g, ok := reg.(prometheus.Gatherer); ok {
		p.gatherer = g
	}
	var err error
	if p.m, err = newMetrics(reg); err != nil {
		return nil, fmt.Errorf("nodes: registering metrics: %w", err)
	}
	for _, n := range p.nodes {
		p.m.up.WithLabelValues(n.name).Set(0)
	}
	return p, nil
}

// Gatherer returns the registry holding the pool's metrics when
// Config.Registerer was nil (or is itself a Gatherer); otherwise nil.
func (p *Pool) Gatherer() prometheus.Gatherer { return p.gatherer }

// CloseIdleConnections closes the idle keep-alive connections to the
// nodes (when Config.Transport can).
func (p *Pool) CloseIdleConnections() {
	if c, ok := p.cfg.Transport.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Client returns a go-ethereum RPC client over the pool, for ethclient
// (ethclient.NewClient), a raw JSON-RPC reader (the indexer's RPCSource)
// or anything else that takes an *rpc.Client. Close it when done (it
// holds nothing of the pool's).
func (p *Pool) Client(ctx context.Context) (*rpc.Client, error) {
	return rpc.DialOptions(ctx, "http://nodes.invalid/", rpc.WithHTTPClient(&http.Client{Transport: p}))
}

// Run checks every node every CheckInterval until ctx is cancelled; it
// returns nil then. Nodes that fail are logged and excluded, never
// returned as an error: they are checked again at the next interval.
func (p *Pool) Run(ctx context.Context) error {
	t := time.NewTicker(p.cfg.CheckInterval)
	defer t.Stop()
	for {
		p.checkNow(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check checks every node now and returns nil when at least one is
// usable, or an error wrapping ErrNoNode that says what is wrong with
// each.
func (p *Pool) Check(ctx context.Context) error {
	p.checkNow(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.nodes {
		if n.up {
			return nil
		}
	}
	return p.noNodeLocked(false)
}

// ServedHead returns the highest head the pool has served reads from: no
// read goes to a node below it.
func (p *Pool) ServedHead() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served
}

// NodeStatus is what the pool knows of one node.
type NodeStatus struct {
	URL       string    `json:"url"`               // redacted (RedactURL)
	Up        bool      `json:"up"`                // usable: answers, right chain, serves its head, passes the guard
	Problem   string    `json:"problem,omitempty"` // why not usable: a Problem… constant
	Error     string    `json:"error,omitempty"`   // the last failure, redacted
	ChainID   uint64    `json:"chain_id,omitempty"`
	Head      uint64    `json:"head"`
	Lag       uint64    `json:"lag"`     // blocks behind the highest head of the usable nodes
	Current   bool      `json:"current"` // reads go here
	CheckedAt time.Time `json:"checked_at"`
}

// Status returns every node's state, in the order the URLs were given.
func (p *Pool) Status() []NodeStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	top := p.maxHeadLocked()
	out := make([]NodeStatus, len(p.nodes))
	for i, n := range p.nodes {
		out[i] = NodeStatus{URL: n.name, Up: n.up, Problem: n.problem, Error: n.err, ChainID: n.chainID,
			Head: n.head, Current: p.current == n, CheckedAt: n.checkedAt}
		if n.up && top > n.head {
			out[i].Lag = top - n.head
		}
	}
	return out
}

// maxHeadLocked is the highest head of the usable nodes.
func (p *Pool) maxHeadLocked() uint64 {
	var top uint64
	for _, n := range p.nodes {
		if n.up {
			top = max(top, n.head)
		}
	}
	return top
}

// notifyLocked wakes the requests waiting for a usable node.
func (p *Pool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
	top := p.maxHeadLocked()
	for _, n := range p.nodes {
		up := 0.0
		if n.up {
			up = 1
		}
		p.m.up.WithLabelValues(n.name).Set(up)
		p.m.head.WithLabelValues(n.name).Set(float64(n.head))
		lag := 0.0
		if n.up && top > n.head {
			lag = float64(top - n.head)
		}
		p.m.lag.WithLabelValues(n.name).Set(lag)
	}
	p.m.served.Set(float64(p.served))
}

// ---- health checks ----

// checkNow runs a check round, or waits for the one under way.
func (p *Pool) checkNow(ctx context.Context) {
	p.mu.Lock()
	if ch := p.round; ch != nil {
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		return
	}
	ch := make(chan struct{})
	p.round = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.round = nil
		p.lastRound = time.Now()
		p.mu.Unlock()
		close(ch)
	}()
	// A round is shared by every waiter: the caller going away does not
	// cut it short (each node's check has its own timeout).
	p.checkRound(context.WithoutCancel(ctx))
}

type checkResult struct {
	started time.Time
	chainID uint64
	head    uint64
	problem string // "" when the node passed
	err     error
	guarded bool // Guard ran and passed
}

func (p *Pool) checkRound(ctx context.Context) {
	results := make([]checkResult, len(p.nodes))
	var wg sync.WaitGroup
	for i, n := range p.nodes {
		wg.Go(func() { results[i] = p.checkNode(ctx, n) })
	}
	wg.Wait()
	p.apply(results)
}

var checkBody = []byte(`[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]},{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber","params":[]}]`)

// checkNode asks the node its chain id and head, then the block at that
// head (a node must serve the head it reports: one answering a head far
// in the future is not believed), then Config.Guard when it is due.
func (p *Pool) checkNode(ctx context.Context, n *node) checkResult {
	r := checkResult{started: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CheckTimeout)
	defer cancel()
	down := func(problem string, err error) checkResult {
		r.problem, r.err = problem, err
		return r
	}
	req := parseRequest(checkBody)
	status, body, err := p.exchange(ctx, n, checkBody)
	if err != nil {
		return down(ProblemDown, err)
	}
	as, ok := parseAnswers(&req, body)
	if nodeFault(status) || !ok {
		return down(ProblemDown, badAnswer(status, body))
	}
	var got [2]bool
	for _, a := range as {
		var v uint64
		var ok bool
		if a.Error == nil {
			v, ok = quantity(a.Result)
		}
		if !ok {
			if a.Error != nil {
				return down(ProblemDown, fmt.Errorf("%s (code %d)", a.Error.Message, a.Error.Code))
			}
			return down(ProblemDown, fmt.Errorf("answer is not a quantity: %.64s", a.Result))
		}
		switch string(a.ID) {
		case "1":
			r.chainID, got[0] = v, true
		case "2":
			r.head, got[1] = v, true
		}
	}
	if !got[0] || !got[1] {
		return down(ProblemDown, errors.New("answer lacks eth_chainId or eth_blockNumber"))
	}
	served, problem, err := p.servesHead(ctx, n, r.head)
	if err != nil {
		return down(problem, err)
	}
	r.head = served
	if p.cfg.Guard == nil {
		return r
	}
	p.mu.Lock()
	want := p.chainID
	due := !n.up || time.Since(n.guardedAt) >= p.cfg.GuardInterval
	p.mu.Unlock()
	if !due || want != 0 && r.chainID != want {
		return r
	}
	c, err := rpc.DialOptions(ctx, "http://node.invalid/", rpc.WithHTTPClient(&http.Client{Transport: nodeTransport{p: p, n: n}}))
	if err != nil {
		return down(ProblemGuard, err)
	}
	defer c.Close()
	if err := p.cfg.Guard(ctx, n.raw, c); err != nil {
		return down(ProblemGuard, err)
	}
	r.guarded = true
	return r
}

// servesHead checks that n has the block at the head it reported, or the
// one below, and returns the highest of them it serves: a node may report
// a height a moment before it serves its block (evmd's JSON-RPC does, after
// CometBFT commits it), which is no reason to take it out. A node that
// serves neither is lying about its head (ProblemBadHead).
func (p *Pool) servesHead(ctx context.Context, n *node, head uint64) (uint64, string, error) {
	for h := head; ; h-- {
		ok, err := p.servesBlock(ctx, n, h)
		switch {
		case err != nil:
			return 0, ProblemDown, err
		case ok:
			return h, "", nil
		case h == 0 || h+1 == head:
			return 0, ProblemBadHead, fmt.Errorf("reports head %d but serves neither it nor block %d", head, h)
		}
	}
}

// servesBlock reports whether n answers eth_getBlockByNumber(number) with
// that block; an error is a failed exchange or a malformed answer.
func (p *Pool) servesBlock(ctx context.Context, n *node, number uint64) (bool, error) {
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":3,"method":"eth_getBlockByNumber","params":["%s",false]}`, hexutil.Uint64(number))
	req := parseRequest(body)
	status, out, err := p.exchange(ctx, n, body)
	if err != nil {
		return false, err
	}
	as, ok := parseAnswers(&req, out)
	if nodeFault(status) || !ok {
		return false, badAnswer(status, out)
	}
	var blk *struct {
		Number hexutil.Uint64 `json:"number"`
	}
	return as[0].Error == nil && json.Unmarshal(as[0].Result, &blk) == nil && blk != nil && uint64(blk.Number) == number, nil
}

// apply records a round's results.
func (p *Pool) apply(results []checkResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.chainID == 0 {
		p.chainID = pinChainID(results)
		if p.chainID != 0 {
			p.log.Info("nodes: chain id taken from the nodes (set Config.ChainID to require one)", slog.Uint64("chain_id", p.chainID))
		}
	}
	now := time.Now()
	for i, n := range p.nodes {
		r := results[i]
		wasUp, wasProblem := n.up, n.problem
		n.checkedAt = now
		switch {
		case r.problem == ProblemDown:
			n.up, n.problem, n.err = false, r.problem, n.scrub(r.err.Error())
		default:
			n.chainID = r.chainID
			if r.chainID != p.chainID {
				n.up, n.problem = false, ProblemWrongChain
				n.err = fmt.Sprintf("answers chain id %d, want %d", r.chainID, p.chainID)
				break
			}
			// A head read after the last one was observed replaces it (a
			// node that went back is seen as behind); an older one only
			// raises it.
			if r.started.After(n.headAt) {
				n.head, n.headAt = r.head, r.started
			} else {
				n.head = max(n.head, r.head)
			}
			if r.problem != "" {
				n.up, n.problem, n.err = false, r.problem, n.scrub(r.err.Error())
				break
			}
			n.up, n.problem, n.err = true, "", ""
			n.verified = max(n.verified, r.head)
			if r.guarded {
				n.guardedAt = now
			}
		}
		if !n.up && p.current == n {
			p.current = nil
		}
		switch {
		case n.problem == ProblemWrongChain && wasProblem != ProblemWrongChain:
			p.log.Error("nodes: node serves another chain: excluded; point its URL at a node of this chain",
				slog.String("node", n.name), slog.Uint64("chain_id", n.chainID), slog.Uint64("want_chain_id", p.chainID))
		case !n.up && (wasUp || wasProblem == ProblemUnchecked || n.problem != wasProblem && wasProblem != ProblemFailed):
			p.log.Warn("nodes: node not usable: excluded", slog.String("node", n.name),
				slog.String("problem", n.problem), slog.String("error", n.err))
		case n.up && !wasUp && wasProblem != ProblemUnchecked:
			p.log.Info("nodes: node usable again", slog.String("node", n.name), slog.Uint64("head", n.head))
		}
	}
	p.notifyLocked()
}

// pinChainID is the chain id most nodes answered (a tie goes to the node
// listed first); 0 when none answered.
func pinChainID(results []checkResult) uint64 {
	count := map[uint64]int{}
	var best uint64
	for _, r := range results {
		if r.problem == ProblemDown {
			continue
		}
		count[r.chainID]++
		if best == 0 || count[r.chainID] > count[best] {
			best = r.chainID
		}
	}
	return best
}

// ---- choosing nodes ----

// pickLocked returns the node a read (or, with read false, any request)
// goes to: the current node while it is eligible, else the first eligible
// node in the order given. A read is eligible on a usable node whose head
// is at or above the served head and within MaxLag of the highest.
func (p *Pool) pickLocked(tried []bool, read bool) *node {
	top := p.maxHeadLocked()
	ok := func(n *node) bool {
		return n.up && !tried[n.idx] && (!read || n.head >= p.served && n.head+p.cfg.MaxLag >= top)
	}
	n := p.current
	if n == nil || !ok(n) {
		n = nil
		for _, c := range p.nodes {
			if ok(c) {
				n = c
				break
			}
		}
		if n == nil {
			return nil
		}
		if read && p.current != n {
			p.log.Info("nodes: reads go to another node", slog.String("node", n.name), slog.Uint64("head", n.head))
			p.current = n
		}
	}
	if read && n.head > p.served {
		p.served = n.head
		p.m.served.Set(float64(p.served))
	}
	return n
}

// acquire returns the node a request goes to, waiting (and checking the
// nodes again) up to MaxWait when there is none.
func (p *Pool) acquire(ctx context.Context, tried []bool, read bool) (*node, error) {
	var deadline time.Time
	for {
		p.mu.Lock()
		n := p.pickLocked(tried, read)
		changed := p.changed
		p.mu.Unlock()
		if n != nil {
			return n, nil
		}
		if err := p.wait(ctx, &deadline, changed); err != nil {
			if errors.Is(err, ErrNoNode) {
				p.mu.Lock()
				defer p.mu.Unlock()
				return nil, p.noNodeLocked(read)
			}
			return nil, err
		}
		clear(tried) // a node that failed is usable again only after a check passed
	}
}

// usable returns every usable node, the current one first, waiting like
// acquire when there is none.
func (p *Pool) usable(ctx context.Context) ([]*node, error) {
	var deadline time.Time
	for {
		p.mu.Lock()
		var out []*node
		if p.current != nil && p.current.up {
			out = append(out, p.current)
		}
		for _, n := range p.nodes {
			if n.up && n != p.current {
				out = append(out, n)
			}
		}
		changed := p.changed
		p.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		if err := p.wait(ctx, &deadline, changed); err != nil {
			if errors.Is(err, ErrNoNode) {
				p.mu.Lock()
				defer p.mu.Unlock()
				return nil, p.noNodeLocked(false)
			}
			return nil, err
		}
	}
}

// wait is one step of waiting for a usable node: it runs a check round
// (at most one every CheckInterval/4), or waits for the states to change.
// It returns ErrNoNode once MaxWait has passed since the first step.
func (p *Pool) wait(ctx context.Context, deadline *time.Time, changed <-chan struct{}) error {
	now := time.Now()
	if deadline.IsZero() {
		*deadline = now.Add(p.cfg.MaxWait)
		p.m.waits.Inc()
	}
	if !now.Before(*deadline) {
		return ErrNoNode
	}
	p.mu.Lock()
	round := p.round
	next := p.lastRound.Add(p.cfg.CheckInterval / 4)
	p.mu.Unlock()
	if round == nil && !now.Before(next) {
		p.checkNow(ctx)
		return ctx.Err()
	}
	d := deadline.Sub(now) // while a round runs, its end is waited for
	if round == nil {
		d = min(next.Sub(now), d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-round: // a nil channel when no round runs
	case <-t.C:
	}
	return nil
}

// noNodeLocked says why no node could take a request.
func (p *Pool) noNodeLocked(read bool) error {
	var b strings.Builder
	for i, n := range p.nodes {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(n.name)
		switch {
		case !n.up && n.err != "":
			fmt.Fprintf(&b, ": %s: %s", n.problem, n.err)
		case !n.up:
			fmt.Fprintf(&b, ": %s", n.problem)
		case read && n.head < p.served:
			fmt.Fprintf(&b, ": head %d below the served head %d", n.head, p.served)
		case read:
			fmt.Fprintf(&b, ": head %d more than %d behind %d", n.head, p.cfg.MaxLag, p.maxHeadLocked())
		default:
			b.WriteString(": usable")
		}
	}
	return &unavailableError{msg: fmt.Sprintf("%s after %s (%s)", ErrNoNode.Error(), p.cfg.MaxWait, b.String())}
}

// unavailableError is ErrNoNode with the nodes' states. It is a net.Error,
// so that clients and the RPC proxy treat it as an unreachable node.
type unavailableError struct{ msg string }

func (e *unavailableError) Error() string   { return e.msg }
func (e *unavailableError) Unwrap() error   { return ErrNoNode }
func (e *unavailableError) Timeout() bool   { return false }
func (e *unavailableError) Temporary() bool { return true }

// fail marks n not usable after a request failed on it: the next check
// that passes brings it back.
func (p *Pool) fail(n *node, err error) { p.failAs(n, ProblemFailed, err) }

func (p *Pool) failAs(n *node, problem string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := n.scrub(err.Error())
	if n.up {
		p.log.Warn("nodes: request failed on node: excluded until its next check passes",
			slog.String("node", n.name), slog.String("problem", problem), slog.String("error", msg))
	}
	n.up, n.problem, n.err = false, problem, msg
	if p.current == n {
		p.current = nil
	}
	p.notifyLocked()
}

// observeHead records a head the node answered to eth_blockNumber. A
// head below the served one is refused (false): the node went back, and
// it gets no reads until a check shows it caught up. A head more than
// MaxLag above the highest the node was seen to serve is first checked
// (the block at it is read from the node): a node that answers a head it
// has no block for is excluded, and the head is refused.
func (p *Pool) observeHead(ctx context.Context, n *node, head uint64, at time.Time) bool {
	p.mu.Lock()
	verify := head > n.verified+p.cfg.MaxLag
	p.mu.Unlock()
	served := head
	if verify {
		var (
			problem string
			err     error
		)
		if served, problem, err = p.servesHead(ctx, n, head); err != nil {
			if ctx.Err() == nil {
				p.failAs(n, problem, err)
			}
			return false
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if verify {
		n.verified = max(n.verified, served)
	}
	if head < p.served {
		p.log.Warn("nodes: node answered a head below one already served: not used until it catches up",
			slog.String("node", n.name), slog.Uint64("head", head), slog.Uint64("served_head", p.served))
		n.head, n.headAt = head, at
		if p.current == n {
			p.current = nil
		}
		p.notifyLocked()
		return false
	}
	n.head, n.headAt = max(n.head, head), at
	if head > p.served {
		p.served = head
		p.m.served.Set(float64(head))
		p.m.head.WithLabelValues(n.name).Set(float64(n.head))
	}
	return true
}

// ---- talking to one node ----

var errTooLarge = errors.New("nodes: answer over MaxResponseBytes")

// exchange posts body to n and reads the whole answer, bounded by
// RequestTimeout (or ctx).
func (p *Pool) exchange(ctx context.Context, n *node, body []byte) (int, []byte, error) {
	resp, cancel, err := p.open(ctx, n, body)
	if err != nil {
		return 0, nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	if resp.ContentLength > p.cfg.MaxResponseBytes {
		return 0, nil, errTooLarge
	}
	out, err := io.ReadAll(io.LimitReader(resp.Body, p.cfg.MaxResponseBytes+1))
	if int64(len(out)) > p.cfg.MaxResponseBytes {
		return 0, nil, errTooLarge
	}
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, out, nil
}

// open posts body to n and returns the node's response; the attempt,
// bounded by RequestTimeout (or ctx), lasts until cancel is called.
func (p *Pool) open(ctx context.Context, n *node, body []byte) (*http.Response, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	req := (&http.Request{
		Method:        http.MethodPost,
		URL:           n.target,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        n.header,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Host:          n.target.Host,
		GetBody:       func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
	}).WithContext(ctx)
	resp, err := p.cfg.Transport.RoundTrip(req)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return resp, cancel, nil
}

// nodeFault reports whether an HTTP status is the node's fault (it is
// down, overloaded, misconfigured or refuses the pool), so that another
// node should be asked; other statuses (400, 413, 415…) answer the
// request itself and are passed back.
func nodeFault(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusProxyAuthRequired,
		http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	}
	return status >= 500
}

func badAnswer(status int, body []byte) error {
	if nodeFault(status) {
		return fmt.Errorf("HTTP %d", status)
	}
	return fmt.Errorf("invalid JSON-RPC answer (HTTP %d, %d bytes)", status, len(body))
}

// scrub removes the node URL's secrets from s (transport errors may quote
// the URL).
func (n *node) scrub(s string) string {
	if strings.Contains(s, "://") {
		s = strings.ReplaceAll(s, n.raw, n.name)
	}
	for _, sec := range n.secrets {
		s = strings.ReplaceAll(s, sec, redacted)
	}
	return s
}

// nodeTransport sends every request to one node (the Guard's client).
type nodeTransport struct {
	p *Pool
	n *node
}

func (t nodeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	status, out, err := t.p.exchange(req.Context(), t.n, body)
	if err != nil {
		return nil, errors.New(t.n.scrub(err.Error()))
	}
	return response(req, status, out), nil
}

// readBody reads and closes a request's body.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil {
		return nil, nil
	}
	defer req.Body.Close()
	return io.ReadAll(req.Body)
}

// response is an answer the pool gives back.
func response(req *http.Request, status int, body []byte) *http.Response {
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
