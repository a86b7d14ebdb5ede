package rpcproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkServeHTTP_SingleCall measures the proxy's handler (parse, policy,
// rate limit, forward, stream back) against an instant upstream on loopback.
func BenchmarkServeHTTP_SingleCall(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = headerJSON
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":"0x4b7"}`)
	}))
	defer up.Close()
	p, err := New(up.URL, Config{Rate: 1e9, Burst: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer p.CloseIdleConnections()
	const body = `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`
	rd := strings.NewReader(body)
	req := httptest.NewRequest(http.MethodPost, "/", rd)
	req.Header.Set("Content-Type", "application/json")
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		w := httptest.NewRecorder()
		p.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

// BenchmarkParseRequest measures the parser alone on a typical call.
func BenchmarkParseRequest(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000000","latest"]}`)
	calls := make([]call, 0, 8)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		calls, _, _ = parseRequest(body, 100, calls[:0])
	}
}
