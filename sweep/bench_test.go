package sweep

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/evmpay/evmpay/store"
)

// Benchmarks of 100 sweeps started by invoices confirmed in one block, on
// the simulated chain with PostgreSQL.
//
// "Finished" is when all 100 sweep transactions (deposit → settlement
// address) are mined; blocks are counted after the block in which the
// invoices were confirmed. SETTLED follows Confirmations (12) blocks later
// by definition. Gas per sweep is every mined funding and sweep
// transaction's gas, divided by 100.
//
//	go test -run '^$' -bench Sweep100 -benchtime 3x ./sweep

const benchInvoices = 100

// BenchmarkSweep100_PassPerBlock makes one pass per block (RunOnce, then
// Commit): the number of blocks the protocol needs when every pass fits in a
// block time. ms/pass is the slowest pass.
func BenchmarkSweep100_PassPerBlock(b *testing.B) {
	for _, policy := range []Policy{PolicySponsor, PolicyDeduct} {
		b.Run(string(policy), func(b *testing.B) {
			var blocks, settled, gas, slowest float64
			for range b.N {
				b.StopTimer()
				e := newEnv(b)
				invs := e.confirmedInvoices(benchInvoices, eth(1))
				s := e.sweeper(Config{Policy: policy})
				confirmed := e.head()
				b.StartTimer()
				minedAt := uint64(0)
				for e.head()-confirmed < 40 {
					start := time.Now()
					if err := s.RunOnce(ctx); err != nil {
						b.Fatal(err)
					}
					slowest = max(slowest, float64(time.Since(start).Milliseconds()))
					if minedAt == 0 && allSweepsMined(e, invs) {
						minedAt = e.head()
					}
					if e.all(ids(invs), store.SweepSwept)() {
						break
					}
					e.sim.Commit()
				}
				b.StopTimer()
				blocks += float64(minedAt - confirmed)
				settled += float64(e.head() - confirmed)
				gas += float64(gasUsed(e, invs)) / benchInvoices
			}
			b.ReportMetric(blocks/float64(b.N), "blocks-to-mined")
			b.ReportMetric(settled/float64(b.N), "blocks-to-settled")
			b.ReportMetric(gas/float64(b.N), "gas/sweep")
			b.ReportMetric(slowest, "ms/slowest-pass")
		})
	}
}

// BenchmarkSweep100_DevChain runs the Sweeper (Run, polling the head every
// 100 ms) against a chain that makes a block every 1.2 s, as `payd dev`
// does, and counts the blocks until all 100 sweeps are mined.
func BenchmarkSweep100_DevChain(b *testing.B) {
	var blocks, gas float64
	for range b.N {
		b.StopTimer()
		e := newEnv(b)
		invs := e.confirmedInvoices(benchInvoices, eth(1))
		s := e.sweeper(Config{PollInterval: 100 * time.Millisecond})
		confirmed := e.head()
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { _ = s.Run(runCtx) })
		b.StartTimer()
		tick := time.NewTicker(1200 * time.Millisecond)
		for !allSweepsMined(e, invs) {
			<-tick.C
			e.sim.Commit()
			if e.head()-confirmed > 30 {
				b.Fatal("not finished after 30 blocks")
			}
		}
		tick.Stop()
		b.StopTimer()
		stop()
		wg.Wait()
		blocks += float64(maxSweepBlock(e, invs) - confirmed)
		gas += float64(gasUsed(e, invs)) / benchInvoices
	}
	b.ReportMetric(blocks/float64(b.N), "blocks-to-mined")
	b.ReportMetric(gas/float64(b.N), "gas/sweep")
}

func allSweepsMined(e *env, invs []store.Invoice) bool {
	for _, inv := range invs {
		mined := false
		for _, t := range e.sweepTxs(inv.ID, store.SweepTxSweep) {
			if _, err := e.client.TransactionReceipt(ctx, t.TxHash); err == nil {
				mined = true
			}
		}
		if !mined {
			return false
		}
	}
	return true
}

func maxSweepBlock(e *env, invs []store.Invoice) uint64 {
	var highest uint64
	for _, inv := range invs {
		for _, t := range e.sweepTxs(inv.ID, store.SweepTxSweep) {
			if r, err := e.client.TransactionReceipt(ctx, t.TxHash); err == nil {
				highest = max(highest, r.BlockNumber.Uint64())
			}
		}
	}
	return highest
}

func gasUsed(e *env, invs []store.Invoice) uint64 {
	var total uint64
	for _, inv := range invs {
		txs, err := e.st.ListSweepTxsByInvoice(ctx, inv.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, t := range txs {
			if r, err := e.client.TransactionReceipt(ctx, t.TxHash); err == nil {
				total += r.GasUsed
			}
		}
	}
	return total
}
