package nodes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/rpcproxy/nodes"
)

// payerKey is funded on every test chain.
var payerKey, _ = crypto.HexToECDSA("8f2a55949038a9610f50fb23b5883af3b4ecb3c3bb792cbcefbd1542c692be63")

var payer = crypto.PubkeyToAddress(payerKey.PublicKey)

// chain is go-ethereum's simulated backend serving real JSON-RPC over
// HTTP on a loopback port: one node.
type chain struct {
	t       testing.TB
	b       *simchain.Backend
	url     string
	chainID *big.Int
	nonce   uint64
}

// newChain starts a chain with the given EVM chain id (1337 is the
// simulated backend's own) and the payer funded (plus extra, which makes
// another genesis).
func newChain(t testing.TB, chainID int64, extra ...common.Address) *chain {
	t.Helper()
	balance, _ := new(big.Int).SetString("1000000000000000000000000", 10)
	alloc := types.GenesisAlloc{payer: {Balance: balance}}
	for _, a := range extra {
		alloc[a] = types.Account{Balance: balance}
	}
	b := simchain.New(t, alloc, simchain.HTTP("eth", "net", "web3"), func(_ *node.Config, ec *ethconfig.Config) {
		if chainID != 1337 {
			cfg := *ec.Genesis.Config // a copy: the default is shared
			cfg.ChainID = big.NewInt(chainID)
			ec.Genesis.Config = &cfg
			ec.NetworkId = uint64(chainID)
		}
	})
	return &chain{t: t, b: b, url: b.HTTPURL(), chainID: big.NewInt(chainID)}
}

// freePort returns a loopback port that is free now, below Linux's
// ephemeral range (32768–60999): a port 0 listener would give an ephemeral
// port, which an outgoing connection can take before the node binds it.
func freePort(t testing.TB) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(12768)
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			require.NoError(t, l.Close())
			return p
		}
	}
	t.Fatal("no free loopback port in 20000–32767")
	return 0
}

// signedTransfer signs a transfer from the payer with the next nonce
// (which it then counts as used).
func (c *chain) signedTransfer(to common.Address, wei int64) *types.Transaction {
	c.t.Helper()
	tx, err := types.SignNewTx(payerKey, types.LatestSignerForChainID(c.chainID), &types.DynamicFeeTx{
		ChainID: c.chainID, Nonce: c.nonce, To: &to, Value: big.NewInt(wei), Gas: 21000,
		GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(100 * params.GWei)})
	require.NoError(c.t, err)
	c.nonce++
	return tx
}

func (c *chain) head() uint64 {
	c.t.Helper()
	n, err := c.b.Client().BlockNumber(context.Background())
	require.NoError(c.t, err)
	return n
}

func (c *chain) hash(n uint64) common.Hash {
	c.t.Helper()
	h, err := c.b.Client().HeaderByNumber(context.Background(), new(big.Int).SetUint64(n))
	require.NoError(c.t, err)
	return h.Hash()
}

// front is a real HTTP hop in front of a node, that a test can kill
// (its listener and connections closed), bring back on the same address,
// make lag or misbehave. Several fronts of one chain are several nodes of
// the same chain.
type front struct {
	t    *testing.T
	addr string
	node *url.URL
	rp   *httputil.ReverseProxy

	// mode: "" (forward), "garbage" (a truncated JSON answer), "500",
	// "html" (a large HTML page with status 200),
	// "hang" (never answers), "future" (reports a head far in the future),
	// "ahead1" (reports a head one above the block it serves, as evmd's
	// JSON-RPC does for a moment after each commit).
	mode atomic.Value
	lag  atomic.Int64 // > 0: hides its last lag blocks (head, blocks, "latest")
	hold atomic.Int64 // >= 0: pretends its head is this block

	mu    sync.Mutex
	srv   *http.Server
	calls map[string]int // method → calls seen ("batch:" prefix inside batches of more than one)
	auth  string         // the last request's Authorization header
	path  string         // and its path and query
	// onCall, when set, is told of every call the front gets.
	onCall func(method string)
	done   chan struct{}
}

func newFront(t *testing.T, nodeURL string) *front {
	t.Helper()
	u, err := url.Parse(nodeURL)
	require.NoError(t, err)
	f := &front{t: t, node: u, rp: httputil.NewSingleHostReverseProxy(u), calls: map[string]int{}, done: make(chan struct{})}
	director := f.rp.Director
	f.rp.Director = func(r *http.Request) {
		director(r)
		r.URL.Path, r.URL.RawPath, r.URL.RawQuery = "/", "", "" // a hosted node's key is in its URL
	}
	f.rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { w.WriteHeader(http.StatusBadGateway) }
	f.mode.Store("")
	f.hold.Store(-1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f.addr = ln.Addr().String()
	f.serve(ln)
	t.Cleanup(func() {
		close(f.done)
		f.kill()
	})
	return f
}

func (f *front) URL() string { return "http://" + f.addr }

func (f *front) serve(ln net.Listener) {
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// kill closes the front's listener and every connection, requests in
// flight included: to the pool the node is gone.
func (f *front) kill() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// restart serves again on the same address.
func (f *front) restart() {
	f.t.Helper()
	var ln net.Listener
	require.Eventually(f.t, func() bool {
		var err error
		ln, err = net.Listen("tcp", f.addr)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "listen again on %s", f.addr)
	f.serve(ln)
}

// count returns how many calls of method the front saw.
func (f *front) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

type frontCall struct {
	ID     json.RawMessage   `json:"id"`
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
	raw    json.RawMessage
}

func decodeCalls(body []byte) ([]frontCall, bool) {
	var raws []json.RawMessage
	batch := bytes.HasPrefix(bytes.TrimSpace(body), []byte("["))
	if batch {
		if json.Unmarshal(body, &raws) != nil {
			return nil, true
		}
	} else {
		raws = []json.RawMessage{body}
	}
	calls := make([]frontCall, 0, len(raws))
	for _, raw := range raws {
		var c frontCall
		if json.Unmarshal(raw, &c) != nil {
			return nil, batch
		}
		c.raw = raw
		calls = append(calls, c)
	}
	return calls, batch
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	calls, batch := decodeCalls(body)
	f.mu.Lock()
	f.auth = r.Header.Get("Authorization")
	f.path = r.URL.RequestURI()
	for _, c := range calls {
		if batch && len(calls) > 1 {
			f.calls["batch:"+c.Method]++
		}
		f.calls[c.Method]++
	}
	onCall := f.onCall
	f.mu.Unlock()
	for _, c := range calls {
		if onCall != nil {
			onCall(c.Method)
		}
	}
	switch f.mode.Load().(string) {
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":"0x`)
		return
	case "500":
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	case "html": // a large page, status 200 (a captive portal, a misrouted load balancer)
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><body>"+strings.Repeat("<p>maintenance</p>", 20000)+"</body></html>")
		return
	case "hang":
		select {
		case <-r.Context().Done():
		case <-f.done:
		}
		return
	case "future":
		f.intercept(w, calls, batch, 1<<40)
		return
	case "ahead1":
		real, err := f.realHead()
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		f.intercept(w, calls, batch, real+1) // block real+1 does not exist yet: null
		return
	}
	if h := f.hold.Load(); h >= 0 {
		f.intercept(w, calls, batch, uint64(h))
		return
	}
	if lag := f.lag.Load(); lag > 0 {
		real, err := f.realHead()
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		f.intercept(w, calls, batch, uint64(max(int64(real)-lag, 0)))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	f.rp.ServeHTTP(w, r)
}

// intercept answers as a node whose head is head: eth_blockNumber says
// so, blocks above it are null, "latest" is it; other calls go to the
// node one by one.
func (f *front) intercept(w http.ResponseWriter, calls []frontCall, batch bool, head uint64) {
	var out []json.RawMessage
	for _, c := range calls {
		if c.ID == nil {
			continue
		}
		var res json.RawMessage
		switch c.Method {
		case "eth_blockNumber":
			res, _ = json.Marshal(hexutil.Uint64(head))
		case "eth_getBlockByNumber":
			var tag string
			if len(c.Params) > 0 && json.Unmarshal(c.Params[0], &tag) == nil {
				if tag == "latest" {
					tag = hexutil.Uint64(head).String()
				}
				if n, err := hexutil.DecodeUint64(tag); err == nil && n > head {
					res = json.RawMessage("null")
					break
				}
				c.Params[0], _ = json.Marshal(tag)
			}
			fallthrough
		default:
			a, err := f.forward(c)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			a["id"] = c.ID
			b, _ := json.Marshal(a)
			out = append(out, b)
			continue
		}
		b, _ := json.Marshal(map[string]json.RawMessage{"jsonrpc": json.RawMessage(`"2.0"`), "id": c.ID, "result": res})
		out = append(out, b)
	}
	w.Header().Set("Content-Type", "application/json")
	if !batch {
		if len(out) > 0 {
			w.Write(out[0])
		}
		return
	}
	b, _ := json.Marshal(out)
	w.Write(b)
}

// forward sends one call to the node and returns its answer object.
func (f *front) forward(c frontCall) (map[string]json.RawMessage, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": c.Method, "params": c.Params})
	resp, err := http.Post(f.node.String(), "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var a map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return nil, err
	}
	return a, nil
}

func (f *front) realHead() (uint64, error) {
	a, err := f.forward(frontCall{Method: "eth_blockNumber", Params: []json.RawMessage{}})
	if err != nil {
		return 0, err
	}
	var q hexutil.Uint64
	if err := json.Unmarshal(a["result"], &q); err != nil {
		return 0, errors.New("no head")
	}
	return uint64(q), nil
}

// testConfig is a pool configuration with short intervals, so that tests
// do not wait on production timings (nothing asserts on time).
func testConfig(t *testing.T) nodes.Config {
	return nodes.Config{
		CheckInterval:  50 * time.Millisecond,
		CheckTimeout:   10 * time.Second, // generous: the machine is shared and -race is slow
		RequestTimeout: 30 * time.Second,
		MaxWait:        20 * time.Second,
		Logger:         slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// newPool starts a pool of urls and runs it until the test ends.
func newPool(t *testing.T, urls []string, cfg nodes.Config) *nodes.Pool {
	t.Helper()
	p, err := nodes.New(urls, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		p.CloseIdleConnections()
	})
	return p
}

// statusOf returns the pool's status of the node at u.
func statusOf(t *testing.T, p *nodes.Pool, u string) nodes.NodeStatus {
	t.Helper()
	for _, s := range p.Status() {
		if s.URL == nodes.RedactURL(u) {
			return s
		}
	}
	t.Fatalf("no node %s", u)
	return nodes.NodeStatus{}
}

func current(p *nodes.Pool) string {
	for _, s := range p.Status() {
		if s.Current {
			return s.URL
		}
	}
	return ""
}

// testWriter sends log lines to the test's log, and keeps them.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// logBuffer collects log lines for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// metric sums the values of the pool's series of name whose labels
// include the given ones.
func metric(t *testing.T, p *nodes.Pool, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := p.Gatherer().Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for k, v := range labels {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == k && l.GetValue() == v
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}
