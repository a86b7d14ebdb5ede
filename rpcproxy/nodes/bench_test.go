package nodes_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/evmpay/evmpay/rpcproxy/nodes"
)

// instantNode answers at once: the chain id, head 0x10 and its block, and
// any other call with "0x1". It measures the pool's own cost, not a node's.
func instantNode() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		calls, batch := decodeCalls(body)
		out := make([]json.RawMessage, 0, len(calls))
		for _, c := range calls {
			res := `"0x1"`
			switch c.Method {
			case "eth_chainId":
				res = `"0x539"`
			case "eth_blockNumber":
				res = `"0x10"`
			case "eth_getBlockByNumber":
				res = `{"number":"0x10","hash":"0x0000000000000000000000000000000000000000000000000000000000000010"}`
			}
			out = append(out, json.RawMessage(`{"jsonrpc":"2.0","id":`+string(c.ID)+`,"result":`+res+`}`))
		}
		w.Header().Set("Content-Type", "application/json")
		if !batch {
			w.Write(out[0])
			return
		}
		b, _ := json.Marshal(out)
		w.Write(b)
	}))
}

// benchClients returns go-ethereum clients to the node at url: direct,
// over a Transport like the pool's (no gzip: go-ethereum's own HTTP
// client asks for it and its server compresses, which costs more than
// the pool on loopback), and through a pool of that one node.
func benchClients(b *testing.B, url string) (direct, pooled *rpc.Client) {
	direct, err := rpc.DialOptions(context.Background(), url,
		rpc.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(direct.Close)
	p, err := nodes.New([]string{url}, nodes.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Check(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.CloseIdleConnections)
	pooled, err = p.Client(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pooled.Close)
	return direct, pooled
}

func benchBlockNumber(b *testing.B, c *rpc.Client) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var head hexutil.Uint64
		if err := c.CallContext(ctx, &head, "eth_blockNumber"); err != nil {
			b.Fatal(err)
		}
	}
}

func benchBlocks(b *testing.B, c *rpc.Client) {
	ctx := context.Background()
	batch := make([]rpc.BatchElem, 10)
	b.ReportAllocs()
	for b.Loop() {
		hs := make([]*header, len(batch))
		for i := range batch {
			batch[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(i), true}, Result: &hs[i]}
		}
		if err := c.BatchCallContext(ctx, batch); err != nil {
			b.Fatal(err)
		}
		for _, e := range batch {
			if e.Error != nil {
				b.Fatal(e.Error)
			}
		}
	}
}

// eth_blockNumber through go-ethereum's client, straight to an instantly
// answering node and through the pool: the difference is the pool's cost
// per request.
func BenchmarkBlockNumber_InstantNode(b *testing.B) {
	node := instantNode()
	defer node.Close()
	direct, pooled := benchClients(b, node.URL)
	b.Run("direct", func(b *testing.B) { benchBlockNumber(b, direct) })
	b.Run("pool", func(b *testing.B) { benchBlockNumber(b, pooled) })
}

// The same against go-ethereum's simulated backend serving JSON-RPC over
// HTTP, and the indexer's read: ten full blocks in one batch.
func BenchmarkSimulatedNode(b *testing.B) {
	c := newChain(b, 1337)
	for range 10 {
		c.b.Commit()
	}
	direct, pooled := benchClients(b, c.url)
	b.Run("blockNumber/direct", func(b *testing.B) { benchBlockNumber(b, direct) })
	b.Run("blockNumber/pool", func(b *testing.B) { benchBlockNumber(b, pooled) })
	b.Run("blocks10/direct", func(b *testing.B) { benchBlocks(b, direct) })
	b.Run("blocks10/pool", func(b *testing.B) { benchBlocks(b, pooled) })
}

// One JSON-RPC request as an http.RoundTripper sees it, answered by an
// instant node and read whole: a tuned http.Transport straight to the
// node, and the pool (parse the call, pick the node, check the answer, and
// for eth_blockNumber track the head). The difference is the pool's own
// cost; go-ethereum's client is left out (it costs the same either way).
func BenchmarkRoundTrip_InstantNode(b *testing.B) {
	node := instantNode()
	defer node.Close()
	tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	p, err := nodes.New([]string{node.URL}, nodes.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Check(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer p.CloseIdleConnections()
	for _, body := range []struct{ name, body string }{
		{"blockNumber", `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`},
		{"getBalance", `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000000","latest"]}`},
	} {
		for _, rt := range []struct {
			name string
			rt   http.RoundTripper
		}{{"transport", tr}, {"pool", p}} {
			b.Run(body.name+"/"+rt.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					req, _ := http.NewRequest(http.MethodPost, node.URL, strings.NewReader(body.body))
					req.Header.Set("Content-Type", "application/json")
					resp, err := rt.rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadAll(resp.Body); err != nil {
						b.Fatal(err)
					}
					resp.Body.Close()
				}
			})
		}
	}
}
