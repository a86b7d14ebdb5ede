package invoice_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// ledgerRig is the invoice API over PostgreSQL with one merchant whose
// ledger holds n seeded entries, one a second from t0.
type ledgerRig struct {
	srv    *httptest.Server
	apiKey string
}

func newLedgerRig(tb testing.TB, n int) *ledgerRig {
	tb.Helper()
	st := pgtest.New(tb)
	creds, err := invoice.NewCredentials(testSecretKey)
	require.NoError(tb, err)
	svc, err := invoice.New(st, creds, testDeriver(tb), chainID, invoice.Config{AdminToken: adminToken,
		Now: func() time.Time { return t0 }, BaseURL: "https://pay.example.com"})
	require.NoError(tb, err)
	mux := httpapi.NewMux()
	svc.Routes(mux)
	r := &ledgerRig{srv: httptest.NewServer(mux)}
	tb.Cleanup(r.srv.Close)
	req, err := http.NewRequest("POST", r.srv.URL+"/v1/admin/merchants", strings.NewReader(
		`{"name":"shop","webhook_url":"https://shop.example/hook","settlement_address":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}`))
	require.NoError(tb, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer res.Body.Close()
	require.Equal(tb, http.StatusCreated, res.StatusCode)
	var m struct {
		ID     int64  `json:"id"`
		APIKey string `json:"api_key"`
	}
	require.NoError(tb, json.NewDecoder(res.Body).Decode(&m))
	r.apiKey = m.APIKey
	seedLedger(tb, st, m.ID, n)
	return r
}

// seedLedger inserts n entries of the merchant: payments into deposit
// addresses and gas fees, alternately, a second apart from t0, with
// 78-digit-wide amounts as a year of real entries would have.
func seedLedger(tb testing.TB, st *postgres.Store, merchantID int64, n int) {
	tb.Helper()
	_, err := st.DB().ExecContext(ctx, `INSERT INTO ledger_entries (chain_id, kind, merchant_id, invoice_id, token_address,
			from_address, to_address, amount, tx_hash, log_index, block_number, at, recorded_at)
		SELECT 1337, CASE WHEN i % 2 = 0 THEN 'payment' ELSE 'gas_fee' END, $1, 1000 + i / 2,
			CASE WHEN i % 4 = 0 THEN decode('a0b86991c6218b36c1d19d4a2e9eb0ce3606eb48', 'hex') END,
			decode(left(md5('f' || i) || md5('g' || i), 40), 'hex'),
			CASE WHEN i % 2 = 0 THEN decode(left(md5('t' || i) || md5('u' || i), 40), 'hex') END,
			1000000000000000000 + i * 7919, decode(md5('h' || i) || md5('k' || i), 'hex'),
			CASE WHEN i % 4 = 0 THEN i % 50 END, 5000000 + i / 3, $2::timestamptz + i * interval '1 second', $2
		FROM generate_series(0::bigint, $3 - 1) AS i`, merchantID, t0, n)
	require.NoError(tb, err)
	_, err = st.DB().ExecContext(ctx, `ANALYZE ledger_entries`)
	require.NoError(tb, err)
}

// warmUp makes a first, empty export: the first request verifies the API
// key with argon2id, which holds its 19 MiB while it hashes (the key is
// then cached), and is no part of what an export keeps.
func (r *ledgerRig) warmUp(tb testing.TB) {
	tb.Helper()
	require.Zero(tb, r.export(tb, "to=2000-01-01T00:00:00Z&format=jsonl").rows)
}

// exported is what one export streamed, and the most heap it kept.
type exported struct {
	rows, bytes int64
	// peakHeap is the most live heap any garbage collection during the
	// export found, above the live heap before it: what the export kept,
	// not the garbage it made between collections.
	peakHeap uint64
}

// export streams GET /v1/ledger?query over HTTP, counting the lines, while
// a sampler records the live heap after each garbage collection (the
// server and the client are both in this process; collections are made
// frequent so that a growing heap would show).
func (r *ledgerRig) export(tb testing.TB, query string) exported {
	tb.Helper()
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	req, err := http.NewRequest("GET", r.srv.URL+"/v1/ledger?"+query, nil)
	require.NoError(tb, err)
	req.Header.Set("Authorization", "Bearer "+r.apiKey)
	res, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		require.Equal(tb, http.StatusOK, res.StatusCode, "%s", body)
	}
	var out exported
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		out.rows++
		out.bytes += int64(len(sc.Bytes())) + 1
	}
	require.NoError(tb, sc.Err())
	_, _ = io.Copy(io.Discard, res.Body)
	runtime.GC() // the last stretch's live heap, before anything is let go
	close(stop)
	wg.Wait()
	if p := peak.Load(); p > base {
		out.peakHeap = p - base
	}
	return out
}

// The ledger export streams in constant memory: exporting ten times the
// rows (100,000 against 10,000, CSV and JSON lines) holds about the same
// heap — a page of entries and the writer's buffers — far below the size
// of what it sent.
func TestLedger_ExportStreamsInConstantMemory(t *testing.T) {
	const n = 100_000
	r := newLedgerRig(t, n)
	tenth := fmt.Sprintf("from=%s&to=%s", t0.Format(time.RFC3339), t0.Add(n/10*time.Second).Format(time.RFC3339))
	r.warmUp(t)
	for _, format := range []string{"csv", "jsonl"} {
		small := r.export(t, tenth+"&format="+format)
		all := r.export(t, "format="+format)
		header := int64(0)
		if format == "csv" {
			header = 1
		}
		require.Equal(t, int64(n/10)+header, small.rows)
		require.Equal(t, int64(n)+header, all.rows)
		t.Logf("%s: %d rows (%.1f MiB) with a peak heap of %.1f MiB; %d rows (%.1f MiB) with %.1f MiB", format,
			small.rows-header, mib(small.bytes), mib(int64(small.peakHeap)), all.rows-header, mib(all.bytes), mib(int64(all.peakHeap)))
		require.Less(t, all.peakHeap, small.peakHeap+8<<20, "ten times the rows, about the same memory")
		require.Less(t, all.peakHeap, uint64(all.bytes)/4, "the export is never held whole")
	}
}

// BenchmarkLedgerExport streams the whole ledger of a merchant with 10k,
// 100k and 1M entries as CSV over HTTP from PostgreSQL, reporting rows per
// second and the peak heap (BENCHMARKS.md):
//
//	go test -run '^$' -bench LedgerExport -benchtime 1x ./invoice
func BenchmarkLedgerExport(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			r := newLedgerRig(b, n)
			r.warmUp(b)
			b.ResetTimer()
			var peak uint64
			var bytes int64
			for range b.N {
				got := r.export(b, "format=csv")
				require.Equal(b, int64(n)+1, got.rows)
				peak, bytes = max(peak, got.peakHeap), got.bytes
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(mib(int64(peak)), "peak-heap-MiB")
			b.ReportMetric(mib(bytes), "csv-MiB")
		})
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
