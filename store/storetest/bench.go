package storetest

import (
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
