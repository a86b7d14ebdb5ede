package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rateReplay serves an exchange's public ticker for the tests: the
// recorded answer of invoice/pricing/testdata (the exchange's documented
// example, see its README) with the price of the pair asked and, for an
// exchange that stamps its trades, the trade time the test sets. Never
// the network.
type rateReplay struct {
	t        *testing.T
	exchange string // coinbase, kraken or bitstamp
	srv      *httptest.Server

	mu     sync.Mutex
	prices map[string]string // "ETH/USD" → "2500.00"
	down   bool              // answer 503
	age    time.Duration     // how old the trade time is (coinbase, bitstamp)
	asked  int
}

func newRateReplay(t *testing.T, exchange string, prices map[string]string) *rateReplay {
	t.Helper()
	r := &rateReplay{t: t, exchange: exchange, prices: prices}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *rateReplay) setDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
}

func (r *rateReplay) setPrice(pair, price string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prices[pair] = price
}

func (r *rateReplay) setAge(age time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.age = age
}

// recording is a recorded answer, decoded.
func (r *rateReplay) recording(name string) map[string]any {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "invoice", "pricing", "testdata", r.exchange, name))
	require.NoError(r.t, err)
	var m map[string]any
	require.NoError(r.t, json.Unmarshal(b, &m))
	return m
}

func (r *rateReplay) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	down, age := r.down, r.age
	r.asked++
	r.mu.Unlock()
	if down {
		http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
		return
	}
	var base, quote string
	switch r.exchange {
	case "coinbase": // /products/ETH-USD/ticker
		market := strings.TrimSuffix(strings.TrimPrefix(req.URL.Path, "/products/"), "/ticker")
		base, quote, _ = strings.Cut(market, "-")
	case "kraken": // /0/public/Ticker?pair=ETHUSD
		pair := req.URL.Query().Get("pair")
		if len(pair) > 3 {
			base, quote = pair[:len(pair)-3], pair[len(pair)-3:]
		}
	case "bitstamp": // /api/v2/ticker/ethusd/
		pair := strings.ToUpper(strings.Trim(strings.TrimPrefix(req.URL.Path, "/api/v2/ticker/"), "/"))
		if len(pair) > 3 {
			base, quote = pair[:len(pair)-3], pair[len(pair)-3:]
		}
	}
	r.mu.Lock()
	price, ok := r.prices[base+"/"+quote]
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		switch r.exchange {
		case "kraken":
			_ = json.NewEncoder(w).Encode(r.recording("error_unknown_pair.json"))
		case "coinbase":
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(r.recording("error_notfound.json"))
		default:
			http.Error(w, `{"errors":[{"message":"not found"}]}`, http.StatusNotFound)
		}
		return
	}
	at := time.Now().Add(-age).UTC()
	ans := r.recording("ticker.json")
	switch r.exchange {
	case "coinbase":
		ans["price"], ans["time"] = price, at.Format(time.RFC3339Nano)
	case "kraken":
		res := ans["result"].(map[string]any)
		var rec map[string]any
		for k, v := range res {
			rec = v.(map[string]any)
			delete(res, k)
		}
		rec["c"] = []any{price, "0.1"}
		res["X"+base+"Z"+quote] = rec
	case "bitstamp":
		ans["last"], ans["timestamp"] = price, fmt.Sprint(at.Unix())
	}
	_ = json.NewEncoder(w).Encode(ans)
}
