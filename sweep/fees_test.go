package sweep

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func TestFreshFee(t *testing.T) {
	t.Parallel()
	gwei := func(x float64) *big.Int { return big.NewInt(int64(x * 1e9)) }
	for _, c := range []struct {
		name             string
		base, tip        *big.Int
		min, max         store.Amount
		wantCap, wantTip *big.Int
	}{
		{"base fee and tip both 0 (Cosmos EVM)", big.NewInt(0), big.NewInt(1), store.Amount{}, store.Amount{}, big.NewInt(1), big.NewInt(1)},
		{"2 × base fee + tip", gwei(1), gwei(0.5), store.Amount{}, store.Amount{}, gwei(2.5), gwei(0.5)},
		{"chain minimum with no base fee: the tip pays it", big.NewInt(0), big.NewInt(1), store.NewAmount(5e9), store.Amount{}, gwei(5), gwei(5)},
		{"chain minimum above base fee + tip", gwei(1), big.NewInt(1), store.NewAmount(3e9), store.Amount{}, gwei(4.125), gwei(2.125)},
		{"chain minimum below base fee + tip", gwei(4), gwei(1), store.NewAmount(3e9), store.Amount{}, gwei(9), gwei(1)},
		{"capped by MaxFeePerGas", gwei(4), gwei(1), store.Amount{}, store.NewAmount(6e9), gwei(6), gwei(1)},
		{"tip never above the cap", gwei(0), gwei(9), store.Amount{}, store.NewAmount(6e9), gwei(6), gwei(6)},
	} {
		s := &Sweeper{cfg: Config{MinGasPrice: c.min, MaxFeePerGas: c.max}.withDefaults()}
		f := s.freshFee(&pass{baseFee: c.base, tip: c.tip})
		require.Equal(t, 0, f.cap.Cmp(c.wantCap), "%s: cap %s", c.name, f.cap)
		require.Equal(t, 0, f.tip.Cmp(c.wantTip), "%s: tip %s", c.name, f.tip)
		// What the transaction pays per gas meets the chain's minimum, in
		// this block and in the next even if the base fee falls by ⅛ (when
		// the cap allows it).
		if c.max.IsZero() {
			next := new(big.Int).Sub(c.base, new(big.Int).Div(c.base, big.NewInt(8)))
			for _, base := range []*big.Int{c.base, next} {
				paid := bigMin(f.cap, new(big.Int).Add(base, f.tip))
				require.GreaterOrEqual(t, paid.Cmp(c.min.Big()), 0, c.name)
			}
		}
	}
}

func TestBump_AtLeastTenPercentAndNeverStill(t *testing.T) {
	t.Parallel()
	for x, want := range map[int64]int64{0: 1, 1: 2, 7: 8, 8: 9, 100: 113, 1_000_000_000: 1_125_000_000} {
		require.Equal(t, want, bump(big.NewInt(x)).Int64(), "bump(%d)", x)
	}
	for x := int64(0); x < 5000; x++ {
		b := bump(big.NewInt(x)).Int64()
		require.GreaterOrEqual(t, b*100, x*110, "bump(%d) = %d is below +10%%", x, b)
		require.Greater(t, b, x)
	}
	s := &Sweeper{cfg: Config{}.withDefaults()}
	old := fee{cap: big.NewInt(100), tip: big.NewInt(10)}
	f := s.bumped(&pass{baseFee: big.NewInt(1), tip: big.NewInt(1)}, old)
	require.EqualValues(t, 113, f.cap.Int64())
	require.EqualValues(t, 12, f.tip.Int64())
	f = s.bumped(&pass{baseFee: big.NewInt(1000), tip: big.NewInt(50)}, old)
	require.EqualValues(t, 2050, f.cap.Int64(), "never below a fresh price")
	require.EqualValues(t, 50, f.tip.Int64())
}

func TestSweep_RespectsTheChainMinimumGasPrice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onSQLite())
	inv := e.confirmedInvoices(1, eth(1))[0]
	min := store.NewAmount(7e9) // well above the simulated chain's base fee
	s := e.sweeper(Config{Confirmations: 1, MinGasPrice: min})
	e.drive(6, e.all([]int64{inv.ID}, store.SweepSwept), s)
	txs, err := e.st.ListSweepTxsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Len(t, txs, 2)
	for _, tx := range txs {
		r, err := e.client.TransactionReceipt(ctx, tx.TxHash)
		require.NoError(t, err)
		require.GreaterOrEqual(t, r.EffectiveGasPrice.Cmp(min.Big()), 0, "%s paid %s per gas", tx.Kind, r.EffectiveGasPrice)
	}
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(eth(1)))
}
