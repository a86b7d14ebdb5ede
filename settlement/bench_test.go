package settlement

import (
	"crypto/md5"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// benchPending are the pending-invoice counts BenchmarkBlock runs at, one
// sub-benchmark each (pending=N). A size is seeded only when its
// sub-benchmark is selected, so one size runs alone with
//
//	go test -run '^$' -bench '^BenchmarkBlock$/pending=1000000$' -benchtime 200x ./settlement
var benchPending = []int{10_000, 100_000, 1_000_000}

// BenchmarkBlock measures one settlement round per new block on
// PostgreSQL: a block of 1,000 transactions, 50 of which pay pending
// invoices, with 10,000, 100,000 or 1,000,000 pending invoices in the
// table. The round is what Run does per poll: read the head and cursor,
// check the cursor is canonical, settle the block in one transaction, then
// the confirmation pass (after 12 blocks, 50 invoices confirm per block
// too) and the expiry pass.
//
// Besides the wall time per block (mean, p50, p95) it reports the CPU
// time per block of the benchmark process (go-cpu-ms, settlement and the
// driver) and of the database sessions it used (db-cpu-ms, read from
// /proc, Linux only; 0 elsewhere), which the load of a shared machine
// disturbs much less than the wall time.
//
//	go test -run '^$' -bench '^BenchmarkBlock$' -benchtime 200x -timeout 30m ./settlement
func BenchmarkBlock(b *testing.B) {
	for _, pending := range benchPending {
		// Seeded on the first call (b.Run calls the function for N=1, then
		// for N); the database lives as long as the parent benchmark.
		var r *blockBench
		parent := b
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			if r == nil {
				r = newBlockBench(b, pgtest.New(parent), pending)
			}
			r.f.t = b
			r.run(b)
		})
	}
}

// BenchmarkBlockPayments is BenchmarkBlock at 100,000 pending invoices
// with fewer or more of the block's 1,000 transactions paying one
// (paying=N; BenchmarkBlock's is 50; paying=-1 is none), so that the
// round's cost splits into what every block costs and what each payment
// (and its confirmation, 12 blocks later) adds.
//
//	go test -run '^$' -bench '^BenchmarkBlockPayments$' -benchtime 200x -timeout 30m ./settlement
func BenchmarkBlockPayments(b *testing.B) {
	var r *blockBench
	parent := b
	for _, paying := range []int{-1, 5, 20, 50} {
		b.Run(fmt.Sprintf("paying=%d", max(paying, 0)), func(b *testing.B) {
			if r == nil {
				r = newBlockBench(b, pgtest.New(parent), 100_000)
			}
			r.f.t = b
			if r.paying != paying {
				// Confirmations follow payments 12 blocks later: run the
				// new rate that long before timing it.
				r.paying = paying
				for range 13 {
					r.mine()
					require.NoError(b, r.s.sync(ctx, nil))
				}
			}
			r.run(b)
		})
	}
}

// blockBench is one database with pending PENDING invoices and a Settler
// caught up with its indexed chain.
type blockBench struct {
	st      *postgres.Store
	f       *fixture
	s       *Settler
	pending int
	// paying is how many of a block's 1,000 transactions pay an invoice
	// (BenchmarkBlock's: 50); 0 is taken as 50.
	paying int
	next   int    // the next pending invoice to pay
	prefix string // the seeded addresses' prefix (seededAddressOf)
}

func newBlockBench(b *testing.B, st *postgres.Store, pending int) *blockBench {
	f := newFixture(b, st)
	start := time.Now()
	seedPending(b, st, f.merchant.ID, pending)
	b.Logf("seeded %d pending invoices in %v", pending, time.Since(start).Round(time.Millisecond))
	s, err := New(st, Config{Now: f.clock.Now})
	require.NoError(b, err)
	f.mine() // block 0
	require.NoError(b, s.sync(ctx, nil))
	for !s.depositsReady { // the deposit filter loads a page a block
		f.mine()
		require.NoError(b, s.sync(ctx, nil))
	}
	return &blockBench{st: st, f: f, s: s, pending: pending}
}

// run settles b.N blocks, timing each round.
func (r *blockBench) run(b *testing.B) {
	var (
		total, goCPU time.Duration
		dbTicks      int64
		each         []time.Duration
	)
	paidBefore := r.next
	pids := r.sessionPIDs(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r.mine()
		cpu0, db0 := processCPU(), ticks(pids)
		b.StartTimer()
		start := time.Now()
		if err := r.s.sync(ctx, nil); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		b.StopTimer()
		goCPU += processCPU() - cpu0
		dbTicks += ticks(pids) - db0
		total += d
		each = append(each, d)
	}
	slices.Sort(each)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(total)/float64(b.N), "ms/block")
	b.ReportMetric(ms(each[len(each)/2]), "p50-ms")
	b.ReportMetric(ms(each[len(each)*95/100]), "p95-ms")
	b.ReportMetric(ms(goCPU)/float64(b.N), "go-cpu-ms")
	b.ReportMetric(ms(time.Duration(dbTicks)*time.Second/userHZ)/float64(b.N), "db-cpu-ms")
	b.ReportMetric(0, "ns/op")

	// Every payment was matched.
	var paid int
	require.NoError(b, r.st.DB().GetContext(ctx, &paid, `SELECT count(*) FROM payments WHERE block_number > 0`))
	require.Equal(b, r.next, paid)
	if r.payments() > 0 {
		require.Greater(b, r.next, paidBefore)
	}
}

// payments is how many transactions of a block pay an invoice.
func (r *blockBench) payments() int {
	if r.paying == 0 {
		return 50
	}
	return max(r.paying, 0)
}

// mine indexes the next block: 1,000 transactions, of which payments()
// (evenly spread) each pay the next seeded invoice in full.
func (r *blockBench) mine() {
	txs := make([]store.Transaction, 0, 1000)
	paying := r.payments()
	for j := 0; j < 1000; j++ {
		to := randAddr()
		if paying > 0 && j%(1000/paying) == 0 {
			to = seededAddressOf(r.prefix, r.next%r.pending)
			r.next++
		}
		txs = append(txs, pay(to, eth(1000)))
	}
	r.f.mine(txs...)
}

// sessionPIDs are the server processes of the sessions open on the
// store's database (its pool is warm after the first round).
func (r *blockBench) sessionPIDs(b *testing.B) []int {
	var pids []int
	require.NoError(b, r.st.DB().SelectContext(ctx, &pids,
		`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`))
	return pids
}

// seededAddress is the deposit address of the i-th seeded invoice: as
// random as a derived address, so that lookups and updates touch the
// deposit-address index where a real one would.
func seededAddress(i int) common.Address { return seededAddressOf("", i) }

// seededAddressOf is the deposit address of the i-th invoice seedChain
// seeded with prefix.
func seededAddressOf(prefix string, i int) common.Address {
	a := md5.Sum([]byte(fmt.Sprintf("%sd%d", prefix, i)))
	b := md5.Sum([]byte(fmt.Sprintf("%se%d", prefix, i)))
	return common.BytesToAddress(append(a[:], b[:4]...))
}

// seedPending inserts n PENDING invoices and, as the history beside them,
// n SETTLED invoices with one payment each, then analyzes the tables (as
// autovacuum would have on a database that grew to this size).
func seedPending(b *testing.B, st *postgres.Store, merchantID int64, n int) {
	seedChain(b, st, merchantID, n, 1337, "", 0)
	analyze(b, st)
}

// seedChain inserts n PENDING and n SETTLED invoices of chain (with a
// payment each for the SETTLED ones), deposit addresses md5(prefix+"d"+i),
// derivation indexes from 1,000,000 + first, and moves the counter past
// them.
func seedChain(b *testing.B, st *postgres.Store, merchantID int64, n int, chain uint64, prefix string, first int) {
	_, err := st.DB().ExecContext(ctx, `INSERT INTO invoices (merchant_id, status, amount_wei, paid_wei, chain_id, deposit_address,
			derivation_index, payment_uri, lookup_token_hash, expires_at, created_at, updated_at)
		SELECT $1, CASE WHEN i < $4 THEN 'PENDING' ELSE 'SETTLED' END, 1000000000000000000,
			CASE WHEN i < $4 THEN 0 ELSE 1000000000000000000 END, $5,
			decode(md5($6 || 'd' || i) || left(md5($6 || 'e' || i), 8), 'hex'), 1000000 + $7 + i, 'ethereum:x',
			decode(md5($6 || i::text), 'hex'), $2, $3, $3
		FROM generate_series(0, 2 * $4 - 1) AS i`, merchantID, t0.Add(24*time.Hour), t0, n, chain, prefix, first)
	require.NoError(b, err)
	_, err = st.DB().ExecContext(ctx, `INSERT INTO payments (invoice_id, tx_hash, log_index, block_number, block_hash, from_address,
			amount_wei, created_at, chain_id)
		SELECT id, decode(md5('t' || id) || md5('u' || id), 'hex'), -1, 0, decode(md5('b') || md5('c'), 'hex'),
			decode(left(md5('f' || id), 40), 'hex'), amount_wei, $2, chain_id
		FROM invoices WHERE merchant_id = $1 AND status = 'SETTLED' AND chain_id = $3`, merchantID, t0, chain)
	require.NoError(b, err)
	// As the invoice API leaves it: the counter past every index given.
	_, err = st.DB().ExecContext(ctx, `UPDATE counters SET value = GREATEST(value, 1000000 + $2 + 2 * $1)
		WHERE name = 'derivation_index'`, n, first)
	require.NoError(b, err)
}

// analyze updates the planner's statistics, as autovacuum would have on a
// database that grew to this size.
func analyze(b *testing.B, st *postgres.Store) {
	_, err := st.DB().ExecContext(ctx, `ANALYZE`)
	require.NoError(b, err)
}
