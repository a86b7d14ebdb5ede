package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store/postgres"
)

// The deriver of the generated data: go-ethereum's test mnemonic (public).
const mnemonic = "test test test test test test test test test test test junk"

// runLoad serves the invoice API and the read API on the generated
// database (in this process, over loopback HTTP) and measures p50/p99 of
// n sequential requests per case.
func runLoad(ctx context.Context, dbURL, keyfile string, n int) error {
	key, err := os.ReadFile(keyfile)
	if err != nil {
		return err
	}
	apiKey := strings.TrimSpace(string(key))
	st, err := postgres.Open(ctx, dbURL, postgres.Config{})
	if err != nil {
		return err
	}
	defer st.Close()
	sz, err := sizesIn(ctx, st)
	if err != nil {
		return err
	}
	creds, err := invoice.NewCredentials(secretKey)
	if err != nil {
		return err
	}
	mn, err := hdwallet.ParseMnemonic(mnemonic)
	if err != nil {
		return err
	}
	w, err := hdwallet.NewWallet(mn, "")
	if err != nil {
		return err
	}
	svc, err := invoice.New(st, creds, w.Deriver(), chainID, invoice.Config{})
	if err != nil {
		return err
	}
	reads, err := indexer.NewReadAPI(st, indexer.ReadAPIConfig{StaleAfter: -1})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	svc.Routes(mux)
	reads.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	r := rand.New(rand.NewPCG(3, 4))
	// Invoices of merchant 1, the one the api_key belongs to.
	mine := func(lo, hi int) int {
		for {
			id := lo + r.IntN(hi-lo)
			if merchantOfInvoice(id, sz) == 1 {
				return id
			}
		}
	}
	now := time.Now().UTC()
	cursor := func(id int) string {
		return base64.RawURLEncoding.EncodeToString([]byte("v1:" + strconv.Itoa(id)))
	}
	var blocks int64
	if err := st.DB().QueryRowContext(ctx, `SELECT COALESCE(MAX(block_number), 1) FROM transactions`).Scan(&blocks); err != nil {
		return err
	}
	hot := fmt.Sprintf("0x%x", hash("addr", 0)[:20])    // the busiest address
	warm := fmt.Sprintf("0x%x", hash("addr", 200)[:20]) // a middling one
	pageCursor := func() string {
		b := 1 + r.Int64N(blocks)
		return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(b, 10) + ":0"))
	}
	day := func(d int) string { return escapeTime(now.AddDate(0, 0, -d).Format(time.RFC3339)) }
	cases := []struct {
		name   string
		auth   bool
		bearer func() string
		path   func() string
	}{
		{"GET /v1/invoices/{id}", true, nil, func() string { return "/v1/invoices/" + strconv.Itoa(mine(1, sz.invoices+1)) }},
		{"list, first page", true, nil, func() string { return "/v1/invoices" }},
		{"list status=SETTLED", true, nil, func() string { return "/v1/invoices?status=SETTLED" }},
		{"list status=EXPIRED", true, nil, func() string { return "/v1/invoices?status=EXPIRED" }},
		{"list status=PENDING", true, nil, func() string { return "/v1/invoices?status=PENDING" }},
		{"list status=CONFIRMED", true, nil, func() string { return "/v1/invoices?status=CONFIRMED" }},
		{"list created in the last 7 days", true, nil, func() string { return "/v1/invoices?created_after=" + day(7) }},
		{"list created 300-299 days ago", true, nil, func() string {
			return "/v1/invoices?created_after=" + day(300) + "&created_before=" + day(299)
		}},
		{"list, deep cursor (random page)", true, nil, func() string { return "/v1/invoices?cursor=" + cursor(mine(1, sz.invoices+1)) }},
		{"list status=SETTLED, deep cursor", true, nil, func() string {
			return "/v1/invoices?status=SETTLED&cursor=" + cursor(mine(1, sz.invoices+1))
		}},
		{"list status=PENDING, deep cursor", true, nil, func() string {
			return "/v1/invoices?status=PENDING&cursor=" + cursor(mine(1, sz.invoices+1))
		}},
		{"public read", false, func() string { return lookupToken(1 + r.IntN(sz.invoices)) }, func() string { return "/v1/public/invoice" }},
		{"address txs, busiest address", false, nil, func() string { return "/v1/addresses/" + hot + "/transactions" }},
		{"address txs, busiest, deep cursor", false, nil, func() string {
			return "/v1/addresses/" + hot + "/transactions?cursor=" + pageCursor()
		}},
		{"address txs, middling address", false, nil, func() string { return "/v1/addresses/" + warm + "/transactions" }},
		{"address txs, middling, deep cursor", false, nil, func() string {
			return "/v1/addresses/" + warm + "/transactions?cursor=" + pageCursor()
		}},
	}
	fmt.Printf("database: %d invoices, %d merchants; %d sequential requests per case\n\n", sz.invoices, sz.merchants, n)
	fmt.Printf("| request | p50 | p99 |\n|---|---|---|\n")
	for _, c := range cases {
		var took []time.Duration
		for i := 0; i < n+n/10; i++ { // the first tenth warms up
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+c.path(), nil)
			if err != nil {
				return err
			}
			switch {
			case c.auth:
				req.Header.Set("Authorization", "Bearer "+apiKey)
			case c.bearer != nil:
				req.Header.Set("Authorization", "Bearer "+c.bearer())
			}
			t := time.Now()
			resp, err := srv.Client().Do(req)
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			d := time.Since(t)
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s: %d %s", c.name, req.URL.Path, resp.StatusCode, body)
			}
			if i >= n/10 {
				took = append(took, d)
			}
		}
		slices.Sort(took)
		fmt.Printf("| %s | %s | %s |\n", c.name, ms(took[len(took)/2]), ms(took[len(took)*99/100]))
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func escapeTime(s string) string { return strings.ReplaceAll(s, "+", "%2B") }

// sizesIn reads the generated sizes back.
func sizesIn(ctx context.Context, st *postgres.Store) (sizes, error) {
	var sz sizes
	err := st.DB().QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM merchants), (SELECT COALESCE(MAX(id), 0) FROM invoices)`).
		Scan(&sz.merchants, &sz.invoices)
	if err == nil && sz.invoices == 0 {
		err = fmt.Errorf("scalegen: no invoices; generate first")
	}
	return sz, err
}

// explains are the hot queries, as the store sends them, with typical
// arguments ($1 = merchant 1).
var explains = []struct{ name, sql string }{
	{"invoice by id", `SELECT * FROM invoices WHERE id = 4242`},
	{"public read (lookup token)", `SELECT * FROM invoices WHERE lookup_token_hash = sha256('x'::bytea)`},
	{"list, first page", `SELECT * FROM invoices WHERE merchant_id = 1 ORDER BY id DESC LIMIT 101`},
	{"list status=PENDING", `SELECT * FROM invoices WHERE merchant_id = 1 AND status IN ('PENDING') ORDER BY id DESC LIMIT 101`},
	{"list status=CONFIRMED", `SELECT * FROM invoices WHERE merchant_id = 1 AND status IN ('CONFIRMED') ORDER BY id DESC LIMIT 101`},
	{"list status=PENDING, deep cursor", `SELECT * FROM invoices WHERE merchant_id = 1 AND status IN ('PENDING')
		AND id < (SELECT MAX(id) / 2 FROM invoices) ORDER BY id DESC LIMIT 101`},
	{"list status=SETTLED, deep cursor", `SELECT * FROM invoices WHERE merchant_id = 1 AND status IN ('SETTLED')
		AND id < (SELECT MAX(id) / 2 FROM invoices) ORDER BY id DESC LIMIT 101`},
	{"list created 300-299 days ago", `SELECT * FROM invoices WHERE merchant_id = 1
		AND created_at >= now() - interval '300 days' AND created_at < now() - interval '299 days'
		ORDER BY id DESC LIMIT 101`},
	{"address txs, busiest, first page", addrTxs(0, math.MaxInt64)},
	{"address txs, busiest, deep cursor", addrTxs(0, -2)},
	{"deliveries due (claim candidates)", `SELECT id, merchant_id, next_attempt_at FROM webhook_deliveries
		WHERE status = 'PENDING' AND next_attempt_at <= now() AND (locked_until IS NULL OR locked_until <= now())
		ORDER BY next_attempt_at, id LIMIT 100 FOR UPDATE SKIP LOCKED`},
	{"deliveries list, status=FAILED", `SELECT * FROM webhook_deliveries WHERE merchant_id = 1 AND status = 'FAILED'
		ORDER BY id DESC LIMIT 101`},
	{"expiring invoices", `SELECT * FROM invoices WHERE status = 'PENDING' AND expires_at <= now() ORDER BY expires_at LIMIT 100`},
}

// addrTxs is ListTxsByAddress's query for pool address i before block
// (-2: half-way through the chain).
func addrTxs(i int, before int64) string {
	b := strconv.FormatInt(before, 10)
	if before == -2 {
		b = `(SELECT MAX(block_number) / 2 FROM transactions)`
	}
	addr := fmt.Sprintf(`'\x%x'::bytea`, hash("addr", i)[:20])
	page := func(col string) string {
		return `SELECT * FROM transactions WHERE ` + col + ` = ` + addr + `
		AND (block_number, tx_index) < (` + b + `, 0)
		ORDER BY block_number DESC, tx_index DESC LIMIT 51`
	}
	return `SELECT * FROM (SELECT * FROM (` + page("to_address") + `) t_to UNION SELECT * FROM (` +
		page("from_address") + `) t_from) t ORDER BY block_number DESC, tx_index DESC LIMIT 51`
}

func runExplain(ctx context.Context, dbURL string) error {
	st, err := postgres.Open(ctx, dbURL, postgres.Config{})
	if err != nil {
		return err
	}
	defer st.Close()
	for _, e := range explains {
		rows, err := st.DB().QueryContext(ctx, `EXPLAIN (ANALYZE, BUFFERS) `+e.sql)
		if err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		fmt.Printf("### %s\n\n```\n", e.name)
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			fmt.Println(line)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		fmt.Print("```\n\n")
	}
	return nil
}

// runMigrate applies the pending migrations (what `payd migrate` does)
// while another connection updates random invoices one at a time, and
// reports how long the migration took and the longest single write
// meanwhile: a migration that locks invoices shows as a write as long as
// the lock.
func runMigrate(ctx context.Context, dbURL string) error {
	st, err := postgres.Open(ctx, dbURL, postgres.Config{})
	if err != nil {
		return err
	}
	defer st.Close()
	sz, err := sizesIn(ctx, st)
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	type result struct {
		writes  int
		longest time.Duration
		err     error
	}
	done := make(chan result)
	go func() {
		var res result
		r := rand.New(rand.NewPCG(5, 6))
		for {
			select {
			case <-stop:
				done <- res
				return
			default:
			}
			t := time.Now()
			_, err := st.DB().ExecContext(ctx, `UPDATE invoices SET updated_at = now() WHERE id = $1`, 1+r.IntN(sz.invoices))
			if err != nil {
				res.err = err
			}
			res.writes++
			res.longest = max(res.longest, time.Since(t))
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	t := time.Now()
	err = st.Migrate(ctx)
	took := time.Since(t)
	time.Sleep(200 * time.Millisecond)
	close(stop)
	res := <-done
	if err != nil {
		return err
	}
	if res.err != nil {
		return res.err
	}
	fmt.Printf("migrate: %s; %d single-row writes to invoices meanwhile, the longest %s\n", took.Round(time.Millisecond),
		res.writes, ms(res.longest))
	return nil
}
