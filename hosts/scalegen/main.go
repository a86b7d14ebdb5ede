// Command scalegen fills a PostgreSQL database with a year of a busy
// merchant base, and measures the hot read paths on it.
//
//	scalegen -db postgres://postgres@127.0.0.1:5432/scale?sslmode=disable -scale 0.1
//	scalegen -db … -load            # p50/p99 of the API reads, over HTTP
//	scalegen -db … -explain         # EXPLAIN (ANALYZE, BUFFERS) of the hot queries
//	scalegen -db … -migrate         # apply new migrations under writes; the longest write
//	scalegen -db … -settle          # settlement per block (1,000 transactions) on the big tables
//	scalegen -db … -archive         # archive the oldest month as payd does, reads meanwhile
//
// At -scale 1: 1,000 merchants, 10 M invoices in every status (most
// SETTLED, a tail EXPIRED, PENDING, PAID and CONFIRMED), 50 M indexed
// transactions, 5 M events with their webhook deliveries, and a MINED
// sweep transaction per SETTLED invoice (8 M). Rows are written
// with COPY into the migrated schema; the generator refuses a database
// that is not on the loopback interface (or a Unix socket), and refuses
// one that already holds invoices.
//
// Merchant 1 is created through invoice.CreateMerchant with a real api_key
// (printed, and written to -keyfile) so that the load program can call the
// API as it; the others get random credentials. Invoice i's public lookup
// token is derived from i (see lookupToken), so the load program can read
// any invoice publicly. See docs/scale.md.
package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store/postgres"
)

// The credentials secret of the generated database (PAY_SECRET_KEY): a
// fixed, public value — this is test data.
var secretKey = []byte("scalegen: not a secret, test data")

const chainID = 1337

// openStore opens the database at dbURL bound to the generated chain
// (store.Store.Chain); closing it closes the pool.
func openStore(ctx context.Context, dbURL string) (*postgres.Store, error) {
	st, err := postgres.Open(ctx, dbURL, postgres.Config{})
	if err != nil {
		return nil, err
	}
	return st.Chain(chainID).(*postgres.Store), nil
}

func main() {
	dbURL := flag.String("db", os.Getenv("DATABASE_URL"), "PostgreSQL URL (loopback only)")
	scale := flag.Float64("scale", 1, "fraction of a year of data to generate (1 = 10 M invoices)")
	resume := flag.Bool("resume", false, "finish an interrupted generation: fill only the tables still empty")
	keyfile := flag.String("keyfile", "scalegen.key", "where the api_key of merchant 1 is written (or read, with -load)")
	load := flag.Bool("load", false, "measure the API reads instead of generating")
	explain := flag.Bool("explain", false, "print EXPLAIN (ANALYZE, BUFFERS) of the hot queries instead of generating")
	n := flag.Int("n", 300, "requests per measured endpoint (-load)")
	migrate := flag.Bool("migrate", false, "apply pending migrations while writing to invoices and transactions, and report the longest write")
	settle := flag.Bool("settle", false, "append blocks after the generated chain and time the settlement of each")
	blocks := flag.Int("blocks", 100, "blocks to settle (-settle)")
	archive := flag.Bool("archive", false, "archive the oldest month of invoices as payd does, measuring reads before and during")
	sweeps := flag.Bool("sweeps", false, "add the sweep history (one MINED sweep per SETTLED invoice) to a database generated without it")
	before := flag.Duration("before", time.Minute, "how long the reads are measured before the archive starts (-archive)")
	flag.BoolVar(&skipChain, "skip-chain", false, "generate no transactions nor sweep transactions (the merchant dashboard's measurements need neither)")
	dash := flag.Bool("dashboard", false, "measure the merchant dashboard's pages (hosts/dashboard) instead of generating")
	flag.IntVar(&migrateTo, "migrate-to", 0, "generate on the schema as of this migration version (0: the latest), so that -migrate then times the later ones on the data")
	flag.Parse()
	if err := loopback(*dbURL); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	var err error
	switch {
	case *load:
		err = runLoad(ctx, *dbURL, *keyfile, *n)
	case *dash:
		err = runDashboardLoad(ctx, *dbURL, *n)
	case *explain:
		err = runExplain(ctx, *dbURL)
	case *migrate:
		err = runMigrate(ctx, *dbURL)
	case *settle:
		err = runSettle(ctx, *dbURL, *blocks, 1000, 50)
	case *archive:
		err = runArchive(ctx, *dbURL, *keyfile, *before)
	case *sweeps:
		err = runSweeps(ctx, *dbURL)
	default:
		err = generate(ctx, *dbURL, *scale, *keyfile, *resume)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// skipChain leaves the transactions and sweep transactions out (-skip-chain).
var skipChain bool

// migrateTo is the schema version generate migrates to (-migrate-to; 0:
// the latest).
var migrateTo int

// loopback refuses a database that is not on this machine.
func loopback(dsn string) error {
	if dsn == "" {
		return fmt.Errorf("scalegen: -db or DATABASE_URL is required")
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Errorf("scalegen: -db must be a postgres:// URL")
	}
	host := u.Hostname()
	if h := u.Query().Get("host"); host == "" && h != "" {
		host = h
	}
	if host == "" || host == "localhost" || strings.HasPrefix(host, "/") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("scalegen: refusing %q: the generator writes only to a loopback database", host)
}

// sizes at a scale.
type sizes struct {
	merchants, invoices, txs, events int
}

func sizesAt(scale float64) sizes {
	at := func(n float64, least int) int { return max(least, int(math.Round(n*scale))) }
	return sizes{merchants: at(1000, 10), invoices: at(10e6, 1000), txs: at(50e6, 5000), events: at(5e6, 500)}
}

// loadWorkers is how many connections COPY the big tables at once.
const loadWorkers = 2

// year is the generated period: it ends now.
const year = 365 * 24 * time.Hour

func generate(ctx context.Context, dbURL string, scale float64, keyfile string, resume bool) error {
	sz := sizesAt(scale)
	st, err := openStore(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	migrate := st.Migrate
	if migrateTo > 0 {
		migrate = func(ctx context.Context) error { return st.MigrateTo(ctx, migrateTo) }
	}
	if err := migrate(ctx); err != nil {
		return err
	}
	db := st.DB().DB
	var existing int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM invoices`).Scan(&existing); err != nil {
		return err
	}
	if existing > 0 && !resume {
		return fmt.Errorf("scalegen: the database already holds %d invoices; use an empty one", existing)
	}
	// Indexes an interrupted run dropped for its bulk load (bulk.go).
	if err := restoreIndexes(ctx, db); err != nil {
		return err
	}
	log.Printf("scale %g: %d merchants, %d invoices, %d transactions, %d events and deliveries",
		scale, sz.merchants, sz.invoices, sz.txs, sz.events)
	began := time.Now()
	now := time.Now().UTC().Truncate(time.Microsecond)
	start := now.Add(-year)
	r := rand.New(rand.NewPCG(1, 2))

	// step runs fn, which fills table; resuming, it skips a table that
	// already holds rows (an interrupted generation keeps what it wrote;
	// a table cut short stays short).
	step := func(what, table string, rows int, fn func() error) error {
		if existing > 0 && table != "" {
			var filled bool
			if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+`)`).Scan(&filled); err != nil {
				return err
			}
			if filled {
				log.Printf("%-22s already filled, kept", what)
				return nil
			}
		}
		t := time.Now()
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		d := time.Since(t)
		if rows == 0 { // a step that counts its own rows (sweep_txs) or has none (ANALYZE)
			log.Printf("%-22s done in %s", what, d.Round(time.Millisecond))
			return nil
		}
		log.Printf("%-22s %10d rows in %8s (%.0f rows/s)", what, rows, d.Round(time.Millisecond), float64(rows)/d.Seconds())
		return nil
	}
	if existing > 0 {
		// The generated year ends where the first run's did.
		if err := db.QueryRowContext(ctx, `SELECT MIN(created_at) FROM invoices`).Scan(&start); err != nil {
			return err
		}
		start = start.UTC()
		now = start.Add(year)
	} else {
		// Merchant 1: a real one, for the load program.
		creds, err := invoice.NewCredentials(secretKey)
		if err != nil {
			return err
		}
		first, err := invoice.CreateMerchant(ctx, st, creds, invoice.MerchantRules{}, invoice.MerchantParams{
			Name: "scalegen busy merchant", WebhookURL: "https://merchant.example/webhooks",
			SettlementAddress: common.HexToAddress("0x00000000000000000000000000000000000000aa"),
		})
		if err != nil {
			return err
		}
		if err := os.WriteFile(keyfile, []byte(first.APIKey+"\n"), 0o600); err != nil {
			return err
		}
	}
	if err := step("merchants", "merchants WHERE id > 1", sz.merchants-1, func() error {
		return copyRows(ctx, db, "merchants", []string{"name", "api_key_digest", "api_key_hash", "api_key_prefix",
			"webhook_url", "webhook_secret_ciphertext", "settlement_address", "created_at", "updated_at"},
			sz.merchants-1, func(i int) []any {
				id := i + 2
				return []any{fmt.Sprintf("merchant %d", id), hash("digest", id), "$argon2id$scalegen", "pay_gen",
					"https://merchant.example/webhooks", hash("secret", id), hash("settle", id)[:20], start, start}
			})
	}); err != nil {
		return err
	}

	// Invoices: evenly over the year, oldest first (ids grow with time).
	span := float64(year) / float64(sz.invoices)
	if err := step("invoices", "invoices", sz.invoices, func() error {
		return withoutIndexes(ctx, db, "invoices", func() error {
			return copyParallel(ctx, db, "invoices", []string{"id", "merchant_id", "status", "amount_wei", "paid_wei",
				"chain_id", "deposit_address", "derivation_index", "payment_uri", "order_id", "description",
				"lookup_token_hash", "expires_at", "paid_at", "confirmed_at", "settled_at", "created_at", "updated_at",
				"sweep_status"}, sz.invoices, loadWorkers, 1, func(r *rand.Rand, i int) []any {
				id := i + 1
				created := start.Add(time.Duration(float64(i) * span))
				expires := created.Add(time.Hour)
				amount := fmt.Sprintf("%d000000000000", 1000+r.IntN(1_000_000))
				status, paid := invoiceStatus(r, created, now)
				var paidAt, confirmedAt, settledAt *time.Time
				paidWei := "0"
				if paid {
					p := created.Add(time.Duration(r.IntN(1800)) * time.Second)
					paidAt, paidWei = &p, amount
					if status == "CONFIRMED" || status == "SETTLED" {
						c := p.Add(3 * time.Minute)
						confirmedAt = &c
					}
					if status == "SETTLED" {
						s := p.Add(15 * time.Minute)
						settledAt = &s
					}
				}
				sweep := "NONE"
				if status == "SETTLED" {
					sweep = "SWEPT"
				}
				addr := depositAddress(id)
				return []any{id, merchantOfInvoice(id, sz), status, amount, paidWei, chainID, addr, id,
					fmt.Sprintf("ethereum:0x%x@%d?value=%s", addr, chainID, amount), fmt.Sprintf("order-%d", id), "",
					invoice.LookupTokenHash(lookupToken(id)), expires, paidAt, confirmedAt, settledAt, created,
					created, sweep}
			})
		})
	}); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `SELECT setval('invoices_id_seq', $1)`, sz.invoices); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `UPDATE counters SET value = $1 WHERE name = 'derivation_index'`, sz.invoices+1); err != nil {
		return err
	}

	// Transactions: a year of blocks (12 s), ~19 per block. A tenth pays
	// an invoice's deposit address; the rest move between a pool of
	// addresses with a heavy skew (exchange hot wallets: a few addresses
	// in a large share of all transactions).
	blocks := max(1, int(float64(year/(12*time.Second))*float64(sz.txs)/50e6))
	pool := max(1000, sz.txs/50)
	poolAddr := func(r *rand.Rand) []byte {
		return hash("addr", int(math.Floor(math.Pow(r.Float64(), 3)*float64(pool))))[:20]
	}
	txRows := sz.txs
	if skipChain {
		txRows = 0 // "done", no rows/s of rows never written
	}
	if err := step("transactions", "transactions", txRows, func() error {
		if skipChain {
			return nil
		}
		return withoutIndexes(ctx, db, "transactions", func() error {
			return copyParallel(ctx, db, "transactions", []string{"chain_id", "hash", "block_number", "block_hash", "tx_index",
				"from_address", "to_address", "value_wei", "nonce", "gas", "type", "max_fee_wei",
				"max_priority_fee_wei", "input"}, sz.txs, loadWorkers, 2, func(r *rand.Rand, i int) []any {
				block := 1 + int(int64(i)*int64(blocks)/int64(sz.txs))
				first := int(int64(block-1) * int64(sz.txs) / int64(blocks))
				to := poolAddr(r)
				if r.IntN(10) == 0 {
					to = depositAddress(1 + r.IntN(sz.invoices))
				}
				return []any{chainID, hash("tx", i), block, hash("block", block), i - first, poolAddr(r), to,
					fmt.Sprintf("%d000000000", r.IntN(10_000_000)), r.IntN(100_000), 21000, 2, "30000000000",
					"1000000000", []byte{}}
			})
		})
	}); err != nil {
		return err
	}

	// Events and their deliveries: most delivered, a few failed, a few
	// pending (a backlog retrying, due within the day).
	evSpan := float64(year) / float64(sz.events)
	if err := step("events", "events", sz.events, func() error {
		return copyRows(ctx, db, "events", []string{"id", "type", "merchant_id", "invoice_id", "data",
			"created_at", "dispatched_at"}, sz.events, func(i int) []any {
			id := i + 1
			inv := 1 + int(int64(i)*int64(sz.invoices)/int64(sz.events))
			at := start.Add(time.Duration(float64(i) * evSpan))
			return []any{id, "invoice.settled", merchantOfInvoice(inv, sz), inv,
				fmt.Sprintf(`{"invoice_id":%d,"status":"SETTLED"}`, inv), at, at}
		})
	}); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `SELECT setval('events_id_seq', $1)`, sz.events); err != nil {
		return err
	}
	if err := step("webhook_deliveries", "webhook_deliveries", sz.events, func() error {
		return copyRows(ctx, db, "webhook_deliveries", []string{"id", "event_id", "merchant_id", "invoice_id",
			"event_type", "status", "delivered", "response_status", "attempt", "last_attempt_at",
			"next_attempt_at", "last_error", "created_at", "updated_at"}, sz.events, func(i int) []any {
			id := i + 1
			inv := 1 + int(int64(i)*int64(sz.invoices)/int64(sz.events))
			at := start.Add(time.Duration(float64(i) * evSpan))
			status, delivered, code, attempt, lastErr := "DELIVERED", true, any(204), 1, ""
			var next any
			switch x := r.IntN(1000); {
			case x < 15:
				status, delivered, code, attempt, lastErr = "FAILED", false, 500, 8, "HTTP 500"
			case x < 20:
				status, delivered, code, attempt, lastErr = "PENDING", false, nil, 3, "timeout after 15s"
				next = now.Add(time.Duration(r.IntN(86400)) * time.Second)
			}
			return []any{id, id, merchantOfInvoice(inv, sz), inv, "invoice.settled", status, delivered, code,
				attempt, at, next, lastErr, at, at}
		})
	}); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `SELECT setval('webhook_deliveries_id_seq', $1)`, sz.events); err != nil {
		return err
	}
	if err := step("sweep_txs", "", 0, func() error {
		if skipChain {
			return nil
		}
		return withoutIndexes(ctx, db, "sweep_txs", func() error { return fillSweeps(ctx, db) })
	}); err != nil {
		return err
	}
	if err := step("ANALYZE", "", 0, func() error {
		_, err := db.ExecContext(ctx, `ANALYZE`)
		return err
	}); err != nil {
		return err
	}
	log.Printf("done in %s; api_key of merchant 1 in %s", time.Since(began).Round(time.Second), keyfile)
	return nil
}

// merchantOfInvoice is invoice inv's merchant, a function of its id so
// that events find it without reading the invoices back. Merchant 1 is the
// busiest (a tenth of everything); the rest share the remainder with a
// skew (a few big merchants, a long tail).
func merchantOfInvoice(inv int, sz sizes) int64 {
	h := hash("merchant", inv)
	if h[0] < 26 { // ~10%
		return 1
	}
	u := float64(binary.BigEndian.Uint64(h[8:16])) / float64(math.MaxUint64)
	return 2 + int64(math.Floor(u*u*float64(sz.merchants-1)))
}

// invoiceStatus draws a status for an invoice created at created: anything
// older than a day is final (most SETTLED, a fifth EXPIRED, a sliver
// CONFIRMED waiting for a sweep), the last day mixes in PAID, CONFIRMED
// and, for the last hour, PENDING.
func invoiceStatus(r *rand.Rand, created, now time.Time) (status string, paid bool) {
	age := now.Sub(created)
	x := r.IntN(1000)
	switch {
	case age < time.Hour && x < 600:
		return "PENDING", false
	case age < 24*time.Hour && x < 650:
		return "PAID", true
	case age < 24*time.Hour && x < 700:
		return "CONFIRMED", true
	case x < 200:
		return "EXPIRED", false
	case x < 203:
		return "CONFIRMED", true
	default:
		return "SETTLED", true
	}
}

// lookupToken is invoice id's public lookup token: 16 bytes, base64url,
// derived from the id (test data).
func lookupToken(id int) string {
	return base64.RawURLEncoding.EncodeToString(hash("token", id)[:16])
}

func depositAddress(id int) []byte { return hash("deposit", id)[:20] }

func hash(label string, n int) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	h := sha256.Sum256(append([]byte(label), b[:]...))
	return h[:]
}

// copyRows COPYs n rows made by row into table, in transactions of 100k
// rows so that progress survives an interruption.
func copyRows(ctx context.Context, db *sql.DB, table string, cols []string, n int, row func(i int) []any) error {
	const chunk = 100_000
	for from := 0; from < n; from += chunk {
		if err := copyChunk(ctx, db, table, cols, from, min(from+chunk, n), row); err != nil {
			return err
		}
		if done := min(from+chunk, n); done%1_000_000 == 0 || done == n {
			log.Printf("  %s: %d / %d rows", table, done, n)
		}
	}
	return nil
}

// runSweeps adds the sweep history to a database generated before the
// generator wrote it.
func runSweeps(ctx context.Context, dbURL string) error {
	st, err := openStore(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	t := time.Now()
	if err := fillSweeps(ctx, st.DB().DB); err != nil {
		return err
	}
	if _, err := st.DB().ExecContext(ctx, `ANALYZE sweep_txs`); err != nil {
		return err
	}
	log.Printf("sweep_txs filled in %s", time.Since(t).Round(time.Second))
	return nil
}

// fillSweeps writes the sweep history of a year: one MINED sweep
// transaction per SETTLED invoice (deposit address → settlement address,
// nonce 0), by id ranges of 1 M invoices, one transaction each. Funding
// transactions are left out (a sweep of a native-coin invoice pays its own
// gas). It starts after the last invoice that has a sweep row, so it can
// run again after an interruption.
func fillSweeps(ctx context.Context, db *sql.DB) error {
	var lo, hi int64
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(invoice_id), 0) + 1, (SELECT COALESCE(MAX(id), 0) FROM invoices)
		FROM sweep_txs`).Scan(&lo, &hi); err != nil {
		return err
	}
	const chunk = 1_000_000
	total := int64(0)
	for from := lo; from <= hi; from += chunk {
		res, err := db.ExecContext(ctx, `INSERT INTO sweep_txs (invoice_id, kind, from_address, to_address, nonce,
				value_wei, gas_limit, max_fee_wei, max_priority_fee_wei, tx_hash, raw_tx, status, block_number,
				gas_used, fee_wei, created_at, updated_at, sent_at, mined_at, sent_block)
			SELECT i.id, 'SWEEP', i.deposit_address, m.settlement_address, 0,
				i.amount_wei - 630000000000000, 21000, 30000000000, 1000000000,
				sha256('sweep'::bytea || int8send(i.id)), sha256('raw'::bytea || int8send(i.id)) || decode(repeat('00', 80), 'hex'),
				'MINED', 1, 21000, 630000000000000, i.settled_at, i.settled_at, i.settled_at, i.settled_at, 1
			FROM invoices i JOIN merchants m ON m.id = i.merchant_id
			WHERE i.id >= $1 AND i.id < $2 AND i.status = 'SETTLED'`, from, from+chunk)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		total += n
		log.Printf("  sweep_txs: invoices up to %d of %d, %d rows", min(from+chunk-1, hi), hi, total)
	}
	return nil
}
