package rpcproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// echoNode is a controlled upstream: a minimal JSON-RPC server answering every
// call with its own method name as the result. It records the bodies it gets.
type echoNode struct {
	reverse bool // answer batches in reverse order
	drop    bool // answer batches without their last element

	mu     sync.Mutex
	bodies []string
}

func (n *echoNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	n.mu.Lock()
	n.bodies = append(n.bodies, string(b))
	n.mu.Unlock()
	batch := bytes.HasPrefix(bytes.TrimSpace(b), []byte("["))
	var msgs []json.RawMessage
	if batch {
		if err := json.Unmarshal(b, &msgs); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	} else {
		msgs = []json.RawMessage{b}
	}
	var out []json.RawMessage
	for _, m := range msgs {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.Unmarshal(m, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.ID == nil {
			continue
		}
		res, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": req.Method})
		out = append(out, res)
	}
	if n.reverse {
		slices.Reverse(out)
	}
	if n.drop && len(out) > 0 {
		out = out[:len(out)-1]
	}
	w.Header().Set("Content-Type", "application/json")
	if !batch {
		if len(out) == 1 {
			w.Write(out[0])
		}
		return
	}
	res, _ := json.Marshal(out)
	w.Write(res)
}

func (n *echoNode) received() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.bodies)
}

// fixedClock is an injected clock that only moves when told to.
type fixedClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fixedClock { return &fixedClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fixedClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// noLimit turns rate limiting off for tests about something else.
const noLimit = rate.Limit(rate.Inf)

// newProxy starts node (if not nil) and a proxy in front of it, both on
// loopback, and returns the proxy, its URL and the node's URL.
func newProxy(t *testing.T, node http.Handler, cfg Config) (*Proxy, string) {
	t.Helper()
	upstream := httptest.NewServer(node)
	t.Cleanup(upstream.Close)
	return newProxyTo(t, upstream.URL, cfg)
}

func newProxyTo(t *testing.T, upstreamURL string, cfg Config) (*Proxy, string) {
	t.Helper()
	p, err := New(upstreamURL, cfg)
	require.NoError(t, err)
	front := httptest.NewServer(p)
	t.Cleanup(func() {
		front.Close()
		p.CloseIdleConnections()
	})
	return p, front.URL
}

type reply struct {
	status int
	header http.Header
	body   string
}

func post(t *testing.T, url, body string) reply {
	t.Helper()
	return do(t, http.MethodPost, url, "application/json", body)
}

func do(t *testing.T, method, url, contentType, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// serve calls the handler directly, as if from remoteAddr.
func serve(p *Proxy, remoteAddr, body string, header ...string) reply {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.RemoteAddr = remoteAddr
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, req)
	return reply{status: rec.Code, header: rec.Header(), body: rec.Body.String()}
}

// rpcErr is a decoded JSON-RPC error response.
type rpcResp struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeOne(t *testing.T, body string) rpcResp {
	t.Helper()
	var r rpcResp
	require.NoError(t, json.Unmarshal([]byte(body), &r), body)
	require.Equal(t, "2.0", r.JSONRPC)
	return r
}

func decodeBatch(t *testing.T, body string) []rpcResp {
	t.Helper()
	var rs []rpcResp
	require.NoError(t, json.Unmarshal([]byte(body), &rs), body)
	return rs
}

func requireErrorCode(t *testing.T, r rpcResp, code int) {
	t.Helper()
	require.NotNil(t, r.Error, "want error %d, got result %s", code, r.Result)
	require.Equal(t, code, r.Error.Code)
}

// counterValue reads one counter (or gauge, or a histogram's count) from
// the proxy's registry.
func counterValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			if m.GetHistogram() != nil {
				return float64(m.GetHistogram().GetSampleCount())
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func batchOf(calls ...string) string { return "[" + strings.Join(calls, ",") + "]" }

func callJSON(id, method string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":[]}`
}

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func netipMust(s string) netip.Addr { return netip.MustParseAddr(s) }
