// Command invoice-load measures invoice creation through the invoice API
// against PostgreSQL, on loopback.
//
// It serves the invoice API on 127.0.0.1:0 in this process, over a fresh
// database, creates one merchant, and runs -conns clients that each POST
// /v1/invoices with a new Idempotency-Key as fast as the API answers, for
// -duration after -warmup. It prints creations per second and the p50, p99
// and maximum latency of the measured requests, then checks the database:
// as many invoices as 201s, and derivation indexes 0…n-1 with no gap.
//
// It also reports how the API grouped the creations into transactions
// (group commit: the number of commits and the mean and largest batch).
//
// The database: -db names a PostgreSQL server (a URL whose user may create
// databases); the program creates a database on it for the run and drops it
// afterwards. Without -db (and without DATABASE_URL) it starts a private
// throwaway server (initdb and pg_ctl in a temporary directory, on a free
// loopback port, with pgtest's settings: fsync and synchronous_commit off,
// or PostgreSQL's durable defaults with -durable) and stops it on exit.
// When the server runs on this machine (a private one, or one from -db on
// loopback, such as scripts/pg.sh starts) it also reports the server's CPU
// time per invoice: that of its postmaster and all its children, so on a
// server other clients use too it counts their work as well.
//
// With -fiat EUR every invoice is priced at 49.90 EUR and quoted in ETH
// and USDC from warm rates (the offline dev table): compare its p50 with a
// run without it to see what quote creation adds.
//
//	go run ./hosts/invoice-load -duration 10s
//	go run ./hosts/invoice-load -durable -conns 16 -pool 16
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/common"
	_ "github.com/lib/pq"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("invoice-load", flag.ContinueOnError)
	dbURL := fs.String("db", os.Getenv("DATABASE_URL"), "PostgreSQL server URL (a database is created on it for the run); empty: start a private server")
	duration := fs.Duration("duration", 10*time.Second, "length of the measured phase")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured load before the measured phase")
	conns := fs.Int("conns", 8, "concurrent clients, one request in flight each")
	pool := fs.Int("pool", 8, "PostgreSQL connection pool size of the API")
	params := fs.String("params", "", "extra connection parameters for the API's pool, e.g. binary_parameters=yes")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured phase to this file")
	memProfile := fs.String("memprofile", "", "write an allocation profile (warm-up and measured phase) to this file")
	durable := fs.Bool("durable", false, "without -db: run the private server with PostgreSQL's durable defaults (fsync, synchronous_commit, full_page_writes on)")
	batch := fs.Int("batch", 0, "the API's CreateBatchSize (0: its default; 1: no group commit)")
	fiat := fs.String("fiat", "", "price every invoice at 49.90 in this ISO 4217 currency (EUR, USD, …): quoted in ETH and USDC by a Pricer over the offline dev rates, warm (docs/pricing.md); empty: an amount in wei")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *conns < 1 || *pool < 1 || *duration <= 0 {
		return errors.New("-conns, -pool and -duration must be positive")
	}

	admin := *dbURL
	pgPID := 0 // the private server's postmaster, whose CPU time we count
	if admin == "" {
		var settings []string
		if !*durable {
			settings = []string{"fsync=off", "synchronous_commit=off", "full_page_writes=off"}
		}
		srv, err := pgtest.StartServer(settings...)
		if err != nil {
			return fmt.Errorf("start a private PostgreSQL: %w", err)
		}
		defer srv.Stop()
		admin = srv.URL()
		pgPID = srv.PID()
		if *durable {
			fmt.Fprintf(stdout, "database: private PostgreSQL server (durable defaults: fsync, synchronous_commit and full_page_writes on)\n")
		} else {
			fmt.Fprintf(stdout, "database: private PostgreSQL server (fsync=off, synchronous_commit=off)\n")
		}
	} else {
		fmt.Fprintf(stdout, "database: server from -db\n")
	}
	if *params != "" {
		admin = addParams(admin, *params)
	}
	dbu, drop, err := pgtest.NewDatabase(admin)
	if err != nil {
		return err
	}
	defer drop()

	st, err := postgres.Open(ctx, dbu, postgres.Config{MaxOpenConns: *pool})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	if pgPID == 0 {
		pgPID = localPostmaster(ctx, st)
	}

	batches := &batchCounter{}
	var pricer *pricing.Pricer
	body := []byte(`{"amount_wei":"1500000000000000000","order_id":"load"}`)
	if *fiat != "" {
		// Warm rates: the dev table, refreshed once before the run and
		// always fresh (its observations are made when asked).
		if pricer, err = pricing.New([]pricing.Source{pricing.Dev()}, pricing.Config{Assets: []string{"ETH", "USDC"},
			Currencies: []string{strings.ToUpper(*fiat)}, MinSources: 1, RefreshInterval: time.Hour, MaxAge: 2 * time.Hour}); err != nil {
			return err
		}
		if err := pricer.Refresh(ctx); err != nil {
			return err
		}
		body = []byte(`{"price":{"amount":"49.90","currency":"` + strings.ToUpper(*fiat) + `"},"order_id":"load"}`)
		fmt.Fprintf(stdout, "invoices: priced at 49.90 %s, quoted in ETH and USDC (warm dev rates)\n", strings.ToUpper(*fiat))
	} else {
		fmt.Fprintf(stdout, "invoices: 1.5 ETH in wei\n")
	}
	svc, err := newService(st, *batch, slog.New(batches), pricer)
	if err != nil {
		return err
	}
	merchant, err := svc.CreateMerchant(ctx, invoice.MerchantParams{Name: "load",
		SettlementAddress: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	server := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go server.Serve(ln)
	defer server.Close()
	target := "http://" + ln.Addr().String() + "/v1/invoices"

	fmt.Fprintf(stdout, "machine: %d CPUs (GOMAXPROCS %d), load average %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), loadAverage())
	fmt.Fprintf(stdout, "load: %d clients, API pool %d connections, warm-up %s, measured %s\n", *conns, *pool, *warmup, *duration)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns, DisableCompression: true}}
	warm, err := phase(ctx, client, target, merchant.APIKey, "warm", body, *conns, *warmup)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	selfBefore, pgBefore, mallocsBefore := selfCPU(), pgCPU(pgPID), mallocs()
	batches.reset()
	res, err := phase(ctx, client, target, merchant.APIKey, "run", body, *conns, *duration)
	selfUsed, pgUsed, allocs := selfCPU()-selfBefore, pgCPU(pgPID)-pgBefore, mallocs()-mallocsBefore
	commits, created, largest := batches.get()
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	if *memProfile != "" {
		if err := writeAllocs(*memProfile); err != nil {
			return err
		}
	}
	slices.Sort(res.latencies)
	n := len(res.latencies)
	if n == 0 {
		return errors.New("no invoice was created")
	}
	fmt.Fprintf(stdout, "created %d invoices in %s: %.0f invoices/s\n", n, res.elapsed.Round(time.Millisecond), float64(n)/res.elapsed.Seconds())
	fmt.Fprintf(stdout, "latency p50 %s  p99 %s  max %s\n", pct(res.latencies, 50), pct(res.latencies, 99), res.latencies[n-1].Round(10*time.Microsecond))
	perInvoice := func(d time.Duration) string { return (d / time.Duration(n)).Round(time.Microsecond).String() }
	fmt.Fprintf(stdout, "CPU per invoice: %s in this process (API and load clients)", perInvoice(selfUsed))
	if pgPID != 0 {
		fmt.Fprintf(stdout, ", %s in PostgreSQL", perInvoice(pgUsed))
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "allocations per invoice: %d in this process (API and load clients)\n", allocs/uint64(n))
	if commits > 0 {
		fmt.Fprintf(stdout, "group commit: %d transactions, %.1f invoices each on average, at most %d\n",
			commits, float64(created)/float64(commits), largest)
	}

	// The database agrees: one invoice per 201, indexes without a gap.
	counts, err := st.CountLiveInvoices(ctx)
	if err != nil {
		return err
	}
	total := warm.created + res.created
	next, err := st.NextDerivationIndex(ctx)
	if err != nil {
		return err
	}
	if counts[store.StatusPending] != total || int64(next) != total {
		return fmt.Errorf("database check failed: %d invoices and next index %d for %d created", counts[store.StatusPending], next, total)
	}
	fmt.Fprintf(stdout, "check: %d invoices in the database, derivation indexes 0…%d without a gap\n", total, total-1)
	return nil
}

// loadUSDC is the token the service accepts beside the native coin (never
// paid: only quoted).
var loadUSDC = common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")

func newService(st *postgres.Store, batch int, logger *slog.Logger, pricer *pricing.Pricer) (*invoice.Service, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	creds, err := invoice.NewCredentials(secret)
	if err != nil {
		return nil, err
	}
	m, err := hdwallet.ParseMnemonic("test test test test test test test test test test test junk")
	if err != nil {
		return nil, err
	}
	w, err := hdwallet.NewWallet(m, "")
	if err != nil {
		return nil, err
	}
	cfg := invoice.Config{CreateBatchSize: batch, Logger: logger,
		Assets: []store.Asset{{Symbol: "USDC", Address: &loadUSDC, Decimals: 6}}}
	if pricer != nil {
		cfg.Pricer = pricer
	}
	return invoice.New(st, creds, w.Deriver(), 1337, cfg)
}

// batchCounter is a slog.Handler that counts the API's debug records of
// committed creations: "invoice created" (one) and "invoices created"
// (count).
type batchCounter struct {
	mu                        sync.Mutex
	commits, created, largest int64
}

func (c *batchCounter) Enabled(_ context.Context, l slog.Level) bool { return l == slog.LevelDebug }

func (c *batchCounter) Handle(_ context.Context, r slog.Record) error {
	n := int64(0)
	switch r.Message {
	case "invoice created":
		n = 1
	case "invoices created":
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "count" {
				n = a.Value.Int64()
			}
			return true
		})
	}
	if n > 0 {
		c.mu.Lock()
		c.commits++
		c.created += n
		c.largest = max(c.largest, n)
		c.mu.Unlock()
	}
	return nil
}

func (c *batchCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *batchCounter) WithGroup(string) slog.Handler      { return c }

func (c *batchCounter) reset() {
	c.mu.Lock()
	c.commits, c.created, c.largest = 0, 0, 0
	c.mu.Unlock()
}

func (c *batchCounter) get() (commits, created, largest int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commits, c.created, c.largest
}

type phaseResult struct {
	latencies []time.Duration // of the measured phase only
	elapsed   time.Duration
	created   int64
}

var keySeq atomic.Int64

// phase runs conns clients for d. In the warm phase it counts creations
// without keeping latencies.
func phase(ctx context.Context, client *http.Client, target, apiKey, name string, body []byte, conns int, d time.Duration) (phaseResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		all      []time.Duration
		firstErr error
		created  atomic.Int64
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) {
				req, _ := http.NewRequestWithContext(ctx, "POST", target, bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+apiKey)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", name+"-"+strconv.FormatInt(keySeq.Add(1), 10))
				t := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusCreated {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				created.Add(1)
				if name != "warm" {
					mine = append(mine, time.Since(t))
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return phaseResult{}, fmt.Errorf("%s phase: %w", name, firstErr)
	}
	return phaseResult{latencies: all, elapsed: elapsed, created: created.Load()}, nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	i = min(max(i-1, 0), len(sorted)-1)
	return sorted[i].Round(10 * time.Microsecond)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) < 14 {
		return "unknown"
	}
	return string(bytes.Join(bytes.Fields(b)[:3], []byte(" ")))
}

// addParams appends query parameters to a postgres:// URL.
func addParams(u, params string) string {
	if strings.Contains(u, "?") {
		return u + "&" + params
	}
	return u + "?" + params
}

// selfCPU is this process's user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeAllocs writes the allocation profile to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// mallocs is the number of heap allocations this process has made.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// localPostmaster is the process id of the postmaster serving st when it
// runs on this machine (the parent of this session's backend), so that
// its CPU time can be counted; 0 when it cannot be seen.
func localPostmaster(ctx context.Context, st *postgres.Store) int {
	var backend int
	if err := st.DB().GetContext(ctx, &backend, `SELECT pg_backend_pid()`); err != nil {
		return 0
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(backend), "stat"))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	return ppid
}

// pgCPU sums the CPU time of the postmaster and its children (the
// backends), read from /proc; 0 when unknown.
func pgCPU(postmaster int) time.Duration {
	if postmaster == 0 {
		return 0
	}
	entries, _ := os.ReadDir("/proc")
	var ticks int64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state ppid … utime(14) stime(15).
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		if pid != postmaster && ppid != postmaster {
			continue
		}
		ut, _ := strconv.ParseInt(string(f[11]), 10, 64)
		st, _ := strconv.ParseInt(string(f[12]), 10, 64)
		ticks += ut + st
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ = 100
}
