package settlement

import (
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// BenchmarkBlock measures one settlement round per new block on
// PostgreSQL: a block of 1,000 transactions, 50 of which pay pending
// invoices, with 10,000 or 100,000 pending invoices in the table. The
// round is what Run does per poll: read the head and cursor, check the
// cursor is canonical, settle the block in one transaction, then the
// confirmation pass (after 12 blocks, 50 invoices confirm per block too)
// and the expiry pass.
//
//	go test -run '^$' -bench BenchmarkBlock -benchtime 200x ./settlement
func BenchmarkBlock(b *testing.B) {
	for _, pending := range []int{10_000, 100_000} {
		st := pgtest.New(b)
		f := newFixture(b, st)
		seedPending(b, st, f.merchant.ID, pending)
		s, err := New(st, Config{Now: f.clock.Now})
		require.NoError(b, err)
		f.mine() // block 0
		require.NoError(b, s.sync(ctx, nil))
		next := 0 // the next pending invoice to pay
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			var (
				total time.Duration
				each  []time.Duration
			)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				txs := make([]store.Transaction, 0, 1000)
				for j := 0; j < 1000; j++ {
					to := randAddr()
					if j%20 == 0 {
						to = seededAddress(next % pending)
						next++
					}
					txs = append(txs, pay(to, eth(1000)))
				}
				f.mine(txs...)
				b.StartTimer()
				start := time.Now()
				if err := s.sync(ctx, nil); err != nil {
					b.Fatal(err)
				}
				d := time.Since(start)
				total += d
				each = append(each, d)
			}
			slices.Sort(each)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(total)/float64(b.N), "ms/block")
			b.ReportMetric(ms(each[len(each)/2]), "p50-ms")
			b.ReportMetric(ms(each[len(each)*95/100]), "p95-ms")
			b.ReportMetric(0, "ns/op")
		})
		// Every payment was matched.
		var paid int
		require.NoError(b, st.DB().GetContext(ctx, &paid, `SELECT count(*) FROM payments`))
		require.Equal(b, next, paid)
	}
}

// seededAddress is the deposit address of the i-th seeded invoice.
func seededAddress(i int) common.Address {
	return common.BigToAddress(big.NewInt(int64(i)))
}

// seedPending inserts n PENDING invoices in one statement.
func seedPending(b *testing.B, st *postgres.Store, merchantID int64, n int) {
	_, err := st.DB().ExecContext(ctx, `INSERT INTO invoices (merchant_id, status, amount_wei, chain_id,
			deposit_address, derivation_index, payment_uri, lookup_token_hash, expires_at, created_at, updated_at)
		SELECT $1, 'PENDING', 1000000000000000000, 1337,
			decode(lpad(to_hex(i), 40, '0'), 'hex'), 1000000 + i, 'ethereum:x', decode(md5(i::text), 'hex'),
			$2, $3, $3
		FROM generate_series(0, $4 - 1) AS i`, merchantID, t0.Add(24*time.Hour), t0, n)
	require.NoError(b, err)
	_, err = st.DB().ExecContext(ctx, `ANALYZE`)
	require.NoError(b, err)
}
