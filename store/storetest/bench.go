package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/evmpay/evmpay/store"
)

// BenchmarkInsertInvoices measures invoice inserts, each in its own
// transaction with its derivation index (the invoice API's write), and
// reports invoices/s.
func BenchmarkInsertInvoices(b *testing.B, st store.Store) {
	m := newMerchant(b, st)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		err := st.InTx(ctx, func(tx store.Tx) error {
			idx, err := tx.NextDerivationIndex(ctx)
			if err != nil {
				return err
			}
			inv := store.Invoice{MerchantID: m.ID, Status: store.StatusPending, AmountWei: store.NewAmount(1e18),
				ChainID: 1337, DepositAddress: randAddr(), DerivationIndex: idx, PaymentURI: "ethereum:0x0@1337?value=1",
				LookupTokenHash: randBytes(32), ExpiresAt: now(), CreatedAt: now(), UpdatedAt: now(),
				SweepStatus: store.SweepNone}
			return tx.CreateInvoice(ctx, &inv)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "invoices/s")
}

// BenchmarkInsertBlock measures InsertBlocks with one block of 1,000
// transactions (COPY on PostgreSQL) and reports transaction rows/s.
func BenchmarkInsertBlock(b *testing.B, st store.Store) {
	const txsPerBlock = 1000
	parent := randHash()
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		blocks, txs := chainOf(uint64(i), 1, txsPerBlock, parent)
		parent = blocks[0].Hash
		b.StartTimer()
		start := time.Now()
		if err := st.InsertBlocks(ctx, blocks, txs); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(b.N*txsPerBlock)/elapsed.Seconds(), "txrows/s")
}

// BenchmarkInsertBlockThreeChains is BenchmarkInsertBlock for three chains
// writing into one database at once, as three chains' indexers do (issue
// #36): each goroutine inserts b.N blocks of 1,000 transactions through
// its chain's handle. It reports the mean and p95 time of one block's
// insert (ms/block, p95-ms) over every chain's blocks, and the rows
// written per second by the three together: at one block per second per
// chain, the indexers keep up while ms/block stays well below 1,000.
func BenchmarkInsertBlockThreeChains(b *testing.B, st store.Store) {
	const txsPerBlock = 1000
	chains := []uint64{1337, 1338, 262144}
	var (
		mu    sync.Mutex
		each  []time.Duration
		total time.Duration
		wg    sync.WaitGroup
	)
	errs := make([]error, len(chains))
	b.ResetTimer()
	start := time.Now()
	for c, id := range chains {
		wg.Go(func() {
			cs := st.Chain(id)
			parent := randHash()
			for i := 0; i < b.N; i++ {
				blocks, txs := chainOf(uint64(i), 1, txsPerBlock, parent)
				parent = blocks[0].Hash
				t0 := time.Now()
				if err := cs.InsertBlocks(ctx, blocks, txs); err != nil {
					errs[c] = err
					return
				}
				d := time.Since(t0)
				mu.Lock()
				each = append(each, d)
				total += d
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(each)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(total)/float64(len(each)), "ms/block")
	b.ReportMetric(ms(each[len(each)*95/100]), "p95-ms")
	b.ReportMetric(float64(len(each)*txsPerBlock)/wall.Seconds(), "txrows/s")
	b.ReportMetric(0, "ns/op")
	for _, id := range chains {
		head, err := st.Chain(id).LatestBlock(ctx)
		if err != nil || head.Number != uint64(b.N-1) {
			b.Fatalf("chain %d: head %d, %v; want %d", id, head.Number, err, b.N-1)
		}
	}
}
