package settlement

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// benchChains are the chains BenchmarkBlockThreeChains settles at once:
// two dev chains and evmd's id, as issue #36's scale target names them.
var benchChains = []uint64{1337, 1338, 262144}

// BenchmarkBlockThreeChains is BenchmarkBlock for three chains in one
// PostgreSQL database (issue #36): pending PENDING invoices per chain
// (and as many SETTLED ones with their payments), and per round one new
// 1,000-transaction block on every chain (50 payments each), which the
// three chains' Settlers settle at once, each through its chain's handle.
// ms/block is the mean of each chain's round (as BenchmarkBlock's),
// p95-ms its 95th percentile over every chain's rounds, round-ms the wall
// time until all three are done: at one block per second per chain,
// settlement keeps up while round-ms stays well below 1,000.
//
//	go test -run '^$' -bench BenchmarkBlockThreeChains -benchtime 100x -timeout 60m ./settlement
func BenchmarkBlockThreeChains(b *testing.B) {
	for _, pending := range []int{10_000, 100_000} {
		var chains []*blockBench
		parent := b
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			if chains == nil {
				chains = newChainsBench(b, parent, pending)
			}
			runChains(b, chains)
		})
	}
}

func newChainsBench(b *testing.B, parent *testing.B, pending int) []*blockBench {
	db := pgtest.New(parent)
	var chains []*blockBench
	start := time.Now()
	for i, id := range benchChains {
		st := db.Chain(id)
		f := newFixture(b, st)
		prefix := fmt.Sprintf("c%d-", id)
		seedChain(b, db, f.merchant.ID, pending, id, prefix, 2*i*pending)
		s, err := New(st, Config{Now: f.clock.Now})
		require.NoError(b, err)
		chains = append(chains, &blockBench{st: db, f: f, s: s, pending: pending, prefix: prefix})
	}
	analyze(b, db)
	b.Logf("seeded %d chains × %d pending invoices in %v", len(benchChains), pending, time.Since(start).Round(time.Millisecond))
	for _, r := range chains {
		r.f.mine() // block 0
		require.NoError(b, r.s.sync(ctx, nil))
		for !r.s.depositsReady {
			r.f.mine()
			require.NoError(b, r.s.sync(ctx, nil))
		}
	}
	return chains
}

// runChains settles b.N blocks on every chain, the chains' rounds at once.
func runChains(b *testing.B, chains []*blockBench) {
	var (
		each, rounds []time.Duration
		total        time.Duration
		mu           sync.Mutex
	)
	before := make([]int, len(chains))
	for i, r := range chains {
		r.f.t = b
		before[i] = r.next
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for _, r := range chains {
			r.mine()
		}
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(chains))
		for c, r := range chains {
			wg.Go(func() {
				t0 := time.Now()
				errs[c] = r.s.sync(ctx, nil)
				d := time.Since(t0)
				mu.Lock()
				each = append(each, d)
				total += d
				mu.Unlock()
			})
		}
		wg.Wait()
		rounds = append(rounds, time.Since(start))
		b.StopTimer()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	slices.Sort(each)
	slices.Sort(rounds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(total)/float64(len(each)), "ms/block")
	b.ReportMetric(ms(each[len(each)*95/100]), "p95-ms")
	b.ReportMetric(ms(rounds[len(rounds)/2]), "round-ms")
	b.ReportMetric(ms(rounds[len(rounds)*95/100]), "round-p95-ms")
	b.ReportMetric(0, "ns/op")

	// Every payment matched, each to an invoice of its own chain.
	for i, r := range chains {
		var paid int
		require.NoError(b, r.st.DB().GetContext(ctx, &paid, `SELECT count(*) FROM payments p
			JOIN invoices i ON i.id = p.invoice_id WHERE p.block_number > 0 AND i.chain_id = $1
			AND p.chain_id = $1 AND NOT p.wrong_network`, benchChains[i]))
		require.Equal(b, r.next, paid, "chain %d", benchChains[i])
		require.Greater(b, r.next, before[i])
	}
}
