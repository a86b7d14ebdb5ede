package sweep

import (
	"math/big"
	"testing"
	"time"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/store"
)

// BenchmarkTokenSweep100 sweeps 100 token invoices confirmed in one block,
// one pass per block, by permit (StableToken: 6 decimals, EIP-2612) and by
// funding (TetherLike: USDT-shaped), on the simulated chain with
// PostgreSQL. "blocks-to-mined" counts the blocks after the confirmation
// block until every transfer (transferFrom or transfer) is mined; gas per
// sweep is every mined permit, transferFrom, funding and transfer's gas
// divided by 100.
//
//	go test -run '^$' -bench TokenSweep100 -benchtime 3x ./sweep
func BenchmarkTokenSweep100(b *testing.B) {
	for _, c := range []struct {
		name     string
		kind     testtoken.Kind
		transfer string // the kind of the transaction that moves the tokens
	}{
		{"permit", testtoken.Stable, store.SweepTxPull},
		{"fund", testtoken.Tether, store.SweepTxSweep},
	} {
		b.Run(c.name, func(b *testing.B) {
			var blocks, gas, slowest float64
			for range b.N {
				b.StopTimer()
				e := newEnv(b)
				tok := e.deployToken(c.kind, 6)
				invs := e.confirmedTokenInvoices(tok, benchInvoices, usdc6)
				s := e.sweeper(Config{Confirmations: 2})
				confirmed := e.head()
				b.StartTimer()
				for !allKindMined(e, invs, c.transfer) {
					if e.head()-confirmed > 30 {
						b.Fatal("not finished after 30 blocks")
					}
					start := time.Now()
					if err := s.RunOnce(ctx); err != nil {
						b.Fatal(err)
					}
					slowest = max(slowest, float64(time.Since(start).Milliseconds()))
					e.sim.Commit()
				}
				b.StopTimer()
				blocks += float64(maxKindBlock(e, invs, c.transfer) - confirmed)
				gas += float64(gasUsed(e, invs)) / benchInvoices
				e.drive(10, e.all(ids(invs), store.SweepSwept), s)
				for _, inv := range invs {
					if got := e.invoice(inv.ID); got.SweptWei == nil || got.SweptWei.Cmp(amountOf(usdc6)) != 0 {
						b.Fatalf("invoice %d swept %v, want %s", inv.ID, got.SweptWei, usdc6)
					}
				}
				if bal := e.tokenBalance(tok, e.merchant.SettlementAddress); bal.Cmp(new(big.Int).Mul(usdc6, big.NewInt(benchInvoices))) != 0 {
					b.Fatalf("merchant holds %s", bal)
				}
			}
			b.ReportMetric(blocks/float64(b.N), "blocks-to-mined")
			b.ReportMetric(gas/float64(b.N), "gas/sweep")
			b.ReportMetric(slowest, "ms/slowest-pass")
		})
	}
}

func allKindMined(e *env, invs []store.Invoice, kind string) bool {
	for _, inv := range invs {
		mined := false
		for _, t := range e.sweepTxs(inv.ID, kind) {
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

func maxKindBlock(e *env, invs []store.Invoice, kind string) uint64 {
	var highest uint64
	for _, inv := range invs {
		for _, t := range e.sweepTxs(inv.ID, kind) {
			if r, err := e.client.TransactionReceipt(ctx, t.TxHash); err == nil {
				highest = max(highest, r.BlockNumber.Uint64())
			}
		}
	}
	return highest
}
