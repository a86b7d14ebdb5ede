package main

import (
	"errors"

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

	"github.com/lib/pq"

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
	st, err := openStore(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	env, err := newLoadEnv(ctx, st, keyfile)
	if err != nil {
		return err
	}
	defer env.close()
	lo, err := lowestInvoice(ctx, st)
	if err != nil {
		return err
	}
	fmt.Printf("database: %d invoices, %d merchants; %d sequential requests per case\n\n", env.sz.invoices, env.sz.merchants, n)
	fmt.Printf("| request | p50 | p99 |\n|---|---|---|\n")
	for _, c := range env.cases(rand.New(rand.NewPCG(3, 4)), lo) {
		var took []time.Duration
		for i := 0; i < n+n/10; i++ { // the first tenth warms up
			d, err := env.do(ctx, c)
			if err != nil {
				return err
			}
			if i >= n/10 {
				took = append(took, d)
			}
		}
		p50, p99 := percentiles(took)
		fmt.Printf("| %s | %s | %s |\n", c.name, ms(p50), ms(p99))
	}
	return nil
}

// loadEnv is the invoice API and the read API served on the generated
// database, in this process over loopback HTTP, with merchant 1's api_key.
type loadEnv struct {
	srv    *httptest.Server
	apiKey string
	sz     sizes
	blocks int64 // the highest indexed block
}

func newLoadEnv(ctx context.Context, st *postgres.Store, keyfile string) (*loadEnv, error) {
	key, err := os.ReadFile(keyfile)
	if err != nil {
		return nil, err
	}
	sz, err := sizesIn(ctx, st)
	if err != nil {
		return nil, err
	}
	creds, err := invoice.NewCredentials(secretKey)
	if err != nil {
		return nil, err
	}
	mn, err := hdwallet.ParseMnemonic(mnemonic)
	if err != nil {
		return nil, err
	}
	w, err := hdwallet.NewWallet(mn, "")
	if err != nil {
		return nil, err
	}
	svc, err := invoice.New(st, creds, w.Deriver(), chainID, invoice.Config{})
	if err != nil {
		return nil, err
	}
	reads, err := indexer.NewReadAPI(st, indexer.ReadAPIConfig{StaleAfter: -1})
	if err != nil {
		return nil, err
	}
	env := &loadEnv{apiKey: strings.TrimSpace(string(key)), sz: sz}
	if err := st.DB().QueryRowContext(ctx, `SELECT COALESCE(MAX(block_number), 1) FROM transactions`).Scan(&env.blocks); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	svc.Routes(mux)
	reads.Register(mux)
	env.srv = httptest.NewServer(mux)
	return env, nil
}

func (e *loadEnv) close() { e.srv.Close() }

// loadCase is one measured request: path makes its URL path (random
// arguments drawn anew each time); auth sends merchant 1's api_key, bearer
// another bearer token.
type loadCase struct {
	name   string
	auth   bool
	bearer func() string
	path   func() string
}

// cases are the measured requests. Invoices are drawn from ids lo and up
// (the archive mode reads only what it does not move).
func (e *loadEnv) cases(r *rand.Rand, lo int) []loadCase {
	sz := e.sz
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
	hot := fmt.Sprintf("0x%x", hash("addr", 0)[:20])    // the busiest address
	warm := fmt.Sprintf("0x%x", hash("addr", 200)[:20]) // a middling one
	pageCursor := func() string {
		b := 1 + r.Int64N(e.blocks)
		return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(b, 10) + ":0"))
	}
	day := func(d int) string { return escapeTime(now.AddDate(0, 0, -d).Format(time.RFC3339)) }
	return []loadCase{
		{"GET /v1/invoices/{id}", true, nil, func() string { return "/v1/invoices/" + strconv.Itoa(mine(lo, sz.invoices+1)) }},
		{"list, first page", true, nil, func() string { return "/v1/invoices" }},
		{"list status=SETTLED", true, nil, func() string { return "/v1/invoices?status=SETTLED" }},
		{"list status=EXPIRED", true, nil, func() string { return "/v1/invoices?status=EXPIRED" }},
		{"list status=PENDING", true, nil, func() string { return "/v1/invoices?status=PENDING" }},
		{"list status=CONFIRMED", true, nil, func() string { return "/v1/invoices?status=CONFIRMED" }},
		{"list created in the last 7 days", true, nil, func() string { return "/v1/invoices?created_after=" + day(7) }},
		{"list created 300-299 days ago", true, nil, func() string {
			return "/v1/invoices?created_after=" + day(300) + "&created_before=" + day(299)
		}},
		{"list, deep cursor (random page)", true, nil, func() string { return "/v1/invoices?cursor=" + cursor(mine(lo, sz.invoices+1)) }},
		{"list status=SETTLED, deep cursor", true, nil, func() string {
			return "/v1/invoices?status=SETTLED&cursor=" + cursor(mine(lo, sz.invoices+1))
		}},
		{"list status=PENDING, deep cursor", true, nil, func() string {
			return "/v1/invoices?status=PENDING&cursor=" + cursor(mine(lo, sz.invoices+1))
		}},
		{"public read", false, func() string { return lookupToken(lo + r.IntN(sz.invoices+1-lo)) }, func() string { return "/v1/public/invoice" }},
		{"address txs, busiest address", false, nil, func() string { return "/v1/addresses/" + hot + "/transactions" }},
		{"address txs, busiest, deep cursor", false, nil, func() string {
			return "/v1/addresses/" + hot + "/transactions?cursor=" + pageCursor()
		}},
		{"address txs, middling address", false, nil, func() string { return "/v1/addresses/" + warm + "/transactions" }},
		{"address txs, middling, deep cursor", false, nil, func() string {
			return "/v1/addresses/" + warm + "/transactions?cursor=" + pageCursor()
		}},
	}
}

// do sends one request of c and returns how long the answer took; an
// answer other than 200 is an error.
func (e *loadEnv) do(ctx context.Context, c loadCase) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+c.path(), nil)
	if err != nil {
		return 0, err
	}
	switch {
	case c.auth:
		req.Header.Set("Authorization", "Bearer "+e.apiKey)
	case c.bearer != nil:
		req.Header.Set("Authorization", "Bearer "+c.bearer())
	}
	t := time.Now()
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return 0, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s: %d %s", c.name, req.URL.Path, resp.StatusCode, body)
	}
	return d, nil
}

// percentiles sorts took and returns its p50 and p99.
func percentiles(took []time.Duration) (p50, p99 time.Duration) {
	if len(took) == 0 {
		return 0, 0
	}
	slices.Sort(took)
	return took[len(took)/2], took[len(took)*99/100]
}

// lowestInvoice is the first invoice id above every archived one (1
// until the archive mode ran): the archive moves the oldest first, so every
// id from there on is still in invoices.
func lowestInvoice(ctx context.Context, st *postgres.Store) (int, error) {
	var lo int
	err := st.DB().QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) + 1 FROM invoices_archive`).Scan(&lo)
	return lo, err
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

// listPage is ListInvoices' query for one range (a deferred join: the
// page's ids, then their rows).
func listPage(where string) string {
	return `SELECT * FROM invoices WHERE id IN (SELECT id FROM invoices WHERE ` + where +
		` ORDER BY id DESC LIMIT 101) ORDER BY id DESC`
}

// explains are the hot queries, as the store sends them, with typical
// arguments ($1 = merchant 1).
var explains = []struct{ name, sql string }{
	{"invoice by id", `SELECT * FROM invoices WHERE id = 4242`},
	{"public read (lookup token)", `SELECT * FROM invoices WHERE lookup_token_hash = sha256('x'::bytea)`},
	{"list, first page", listPage(`merchant_id = 1`)},
	{"list status=PENDING", listPage(`merchant_id = 1 AND status = 'PENDING'`)},
	{"list status=CONFIRMED", listPage(`merchant_id = 1 AND status = 'CONFIRMED'`)},
	{"list status=SETTLED", listPage(`merchant_id = 1 AND status = 'SETTLED'`)},
	{"list status=SETTLED or EXPIRED", `SELECT * FROM invoices WHERE id IN (SELECT id FROM (
		SELECT id FROM (SELECT id FROM invoices WHERE merchant_id = 1 AND status = 'EXPIRED' ORDER BY id DESC LIMIT 101) s0
		UNION ALL SELECT id FROM (SELECT id FROM invoices WHERE merchant_id = 1 AND status = 'SETTLED' ORDER BY id DESC LIMIT 101) s1
		) u ORDER BY id DESC LIMIT 101) ORDER BY id DESC`},
	{"list status=PENDING, deep cursor", listPage(`merchant_id = 1 AND status = 'PENDING'
		AND id < (SELECT MAX(id) / 2 FROM invoices)`)},
	{"list status=SETTLED, deep cursor", listPage(`merchant_id = 1 AND status = 'SETTLED'
		AND id < (SELECT MAX(id) / 2 FROM invoices)`)},
	{"list created 300-299 days ago", listPage(`merchant_id = 1
		AND created_at >= now() - interval '300 days' AND created_at < now() - interval '299 days'`)},
	{"address txs, busiest, first page", addrTxs(0, math.MaxInt64)},
	{"address txs, busiest, deep cursor", addrTxs(0, -2)},
	{"deliveries due (claim candidates)", `SELECT id, merchant_id, next_attempt_at FROM webhook_deliveries
		WHERE status = 'PENDING' AND next_attempt_at <= now() AND (locked_until IS NULL OR locked_until <= now())
		ORDER BY next_attempt_at, id LIMIT 100 FOR UPDATE SKIP LOCKED`},
	{"deliveries list, status=FAILED", `SELECT * FROM webhook_deliveries WHERE merchant_id = 1 AND status = 'FAILED'
		ORDER BY id DESC LIMIT 101`},
	{"expiring invoices", `SELECT * FROM invoices WHERE status = 'PENDING' AND expires_at <= now() ORDER BY expires_at LIMIT 100`},
	{"settlement: invoice transactions in a block (ListInvoiceTxsInBlock)", `SELECT * FROM (
			SELECT t.*, (SELECT i.id FROM invoices i WHERE i.deposit_address = t.to_address) AS invoice_id
			FROM transactions t WHERE t.block_number = (SELECT MAX(block_number) FROM transactions) AND t.to_address IS NOT NULL
			  AND NOT EXISTS (SELECT 1 FROM sweep_txs s WHERE s.tx_hash = t.hash)
		) AS x WHERE invoice_id IS NOT NULL ORDER BY tx_index`},
	{"settlement: confirmable, full pass (ListConfirmable)", `SELECT i.id FROM invoices i WHERE i.status = 'PAID'
		AND COALESCE((SELECT max(q.block_number) FROM payments q WHERE q.invoice_id = i.id AND q.chain_id = i.chain_id AND q.wrong_asset = false AND q.wrong_network = false), 0)
			<= (SELECT MAX(block_number) - 12 FROM transactions)
		ORDER BY i.id LIMIT 200`},
	{"settlement: confirmable, one block reached depth (ListConfirmableSince)", `SELECT r.id FROM (
			SELECT DISTINCT p.invoice_id AS id FROM payments p
			WHERE p.block_number > (SELECT MAX(block_number) - 13 FROM transactions)
			  AND p.block_number <= (SELECT MAX(block_number) - 12 FROM transactions) AND p.wrong_asset = false AND p.wrong_network = false) r
		WHERE (SELECT i.status FROM invoices i WHERE i.id = r.id) = 'PAID'
		  AND COALESCE((SELECT max(q.block_number) FROM payments q WHERE q.invoice_id = r.id AND q.wrong_asset = false AND q.wrong_network = false), 0)
			<= (SELECT MAX(block_number) - 12 FROM transactions)
		ORDER BY r.id LIMIT 200`},
	{"archive: a batch of the oldest month (ArchiveInvoices)", archiveBatchSQL("30 days", "created_at, id")},
	{"archive: the last call of a run, none left (ArchiveInvoices)", archiveBatchSQL("0 days", "created_at, id")},
	{"archive: the last call of a run, none left, before (ORDER BY id)", archiveBatchSQL("0 days", "id")},
}

// archiveBatchSQL is ArchiveInvoices' query for the invoices created up to
// span after the oldest one, in order.
func archiveBatchSQL(span, order string) string {
	return `SELECT id FROM invoices
		WHERE created_at < (SELECT MIN(created_at) FROM invoices) + interval '` + span + `' AND needs_attention = false
		  AND (status = 'SETTLED' OR (status = 'EXPIRED' AND paid_wei = '0'))
		ORDER BY ` + order + ` LIMIT 1000 FOR UPDATE`
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
	st, err := openStore(ctx, dbURL)
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
// while other connections write, one at a time with 5 ms pauses: one
// updates random invoices, one inserts a transaction (rolled back, leaving
// the data as it was) as the indexer would, and one each updates random
// sweep transactions and webhook deliveries (when there are any). It
// reports how long the
// migration took and the longest single write to each table meanwhile: a
// migration that locks a table shows as a write as long as the lock.
func runMigrate(ctx context.Context, dbURL string) error {
	st, err := openStore(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := sizesIn(ctx, st); err != nil {
		return err
	}
	db := st.DB().DB
	type writer struct {
		table string
		write func() error
	}
	// touch updates the updated_at of a random row of table, ids 1 to its
	// highest (no writer for an empty table).
	touch := func(table string, seed uint64) ([]writer, error) {
		var hi int
		if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM `+table).Scan(&hi); err != nil || hi == 0 {
			return nil, err
		}
		r := rand.New(rand.NewPCG(seed, seed+1))
		return []writer{{table, func() error {
			_, err := db.ExecContext(ctx, `UPDATE `+table+` SET updated_at = now() WHERE id = $1`, 1+r.IntN(hi))
			return err
		}}}, nil
	}
	writers, err := touch("invoices", 5)
	if err != nil {
		return err
	}
	writers = append(writers, writer{"transactions", func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		// With the chain's column once migration 0190 added it, without
		// it before (column 42703: undefined).
		args := []any{randomBytes(32), randomBytes(32), randomBytes(20), randomBytes(20)}
		if _, err = tx.ExecContext(ctx, `SAVEPOINT w`); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO transactions (chain_id, hash, block_number, block_hash, tx_index,
				from_address, to_address, value_wei, nonce, gas, type, input)
				VALUES (`+fmt.Sprint(chainID)+`, $1, 0, $2, 0, $3, $4, 0, 0, 21000, 2, '')`, args...)
		if pe := (*pq.Error)(nil); errors.As(err, &pe) && pe.Code == "42703" {
			if _, err = tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT w`); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO transactions (hash, block_number, block_hash, tx_index,
				from_address, to_address, value_wei, nonce, gas, type, input)
				VALUES ($1, 0, $2, 0, $3, $4, 0, 0, 21000, 2, '')`, args...)
		}
		return err
	}})
	for i, table := range []string{"sweep_txs", "webhook_deliveries"} {
		w, err := touch(table, uint64(7+2*i))
		if err != nil {
			return err
		}
		writers = append(writers, w...)
	}
	type result struct {
		writes  int
		longest time.Duration
		err     error
	}
	stop := make(chan struct{})
	done := make([]chan result, len(writers))
	for i, w := range writers {
		done[i] = make(chan result, 1)
		go func() {
			var res result
			for {
				select {
				case <-stop:
					done[i] <- res
					return
				default:
				}
				t := time.Now()
				if err := w.write(); err != nil {
					res.err = err
				}
				res.writes++
				res.longest = max(res.longest, time.Since(t))
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	t := time.Now()
	err = st.Migrate(ctx)
	took := time.Since(t)
	time.Sleep(200 * time.Millisecond)
	close(stop)
	if err != nil {
		return err
	}
	fmt.Printf("migrate: %s\n", took.Round(time.Millisecond))
	for i, w := range writers {
		res := <-done[i]
		if res.err != nil {
			return res.err
		}
		fmt.Printf("  %d single-row writes to %s meanwhile, the longest %s\n", res.writes, w.table, ms(res.longest))
	}
	return nil
}
