package store_test

import (
	"encoding/json"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

const maxUint256 = "115792089237316195423570985008687907853269984665640564039457584007913129639935"

func TestParseAmount_AcceptsDecimalIntegersUpTo2Pow256Minus1(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"0", "1", "1000000000000000000", maxUint256} {
		a, err := store.ParseAmount(s)
		require.NoError(t, err, s)
		require.Equal(t, s, a.String())
	}
}

func TestParseAmount_RejectsEverythingElse(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "-1", "+1", " 1", "1 ", "01", "1.0", "1e18", "0x10", "1_000", "١",
		"115792089237316195423570985008687907853269984665640564039457584007913129639936", // 2^256
		"1000000000000000000000000000000000000000000000000000000000000000000000000000000",
	} {
		_, err := store.ParseAmount(s)
		require.ErrorIs(t, err, store.ErrInvalidAmount, "%q", s)
	}
}

func TestAmount_Arithmetic_ReportsOverflowAndUnderflow(t *testing.T) {
	t.Parallel()
	max := store.MustParseAmount(maxUint256)
	_, ok := max.Add(store.NewAmount(1))
	require.False(t, ok, "2^256 overflows")
	sum, ok := store.NewAmount(2).Add(store.NewAmount(3))
	require.True(t, ok)
	require.Equal(t, "5", sum.String())
	_, ok = store.NewAmount(2).Sub(store.NewAmount(3))
	require.False(t, ok, "no negative amounts")
	diff, ok := max.Sub(max)
	require.True(t, ok)
	require.True(t, diff.IsZero())
	_, ok = max.Mul(store.NewAmount(2))
	require.False(t, ok)
	require.Equal(t, -1, store.NewAmount(1).Cmp(max))
}

func TestAmount_JSONIsADecimalString(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(struct {
		V store.Amount `json:"v"`
	}{store.MustParseAmount(maxUint256)})
	require.NoError(t, err)
	require.JSONEq(t, `{"v":"`+maxUint256+`"}`, string(b))

	var v struct {
		V store.Amount `json:"v"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"v":"42"}`), &v))
	require.Equal(t, "42", v.V.String())
	require.ErrorIs(t, json.Unmarshal([]byte(`{"v":42}`), &v), store.ErrInvalidAmount, "numbers are refused: floats round")
	require.Error(t, json.Unmarshal([]byte(`{"v":"1.5"}`), &v))
}

func TestAmount_ScanAcceptsDriverForms(t *testing.T) {
	t.Parallel()
	var a store.Amount
	require.NoError(t, a.Scan([]byte(maxUint256)))
	require.Equal(t, maxUint256, a.String())
	require.NoError(t, a.Scan("7"))
	require.Equal(t, "7", a.String())
	require.NoError(t, a.Scan(int64(9)))
	require.Equal(t, "9", a.String())
	require.Error(t, a.Scan(int64(-1)))
	require.Error(t, a.Scan(nil), "NULL needs *Amount")
	require.Error(t, a.Scan(1.5), "never a float")
	v, err := a.Value()
	require.NoError(t, err)
	require.Equal(t, "9", v)
}

func TestAmountFromBig(t *testing.T) {
	t.Parallel()
	_, err := store.AmountFromBig(big.NewInt(-1))
	require.ErrorIs(t, err, store.ErrInvalidAmount)
	_, err = store.AmountFromBig(new(big.Int).Lsh(big.NewInt(1), 256))
	require.ErrorIs(t, err, store.ErrInvalidAmount)
	a, err := store.AmountFromBig(new(big.Int).Lsh(big.NewInt(1), 255))
	require.NoError(t, err)
	require.Equal(t, new(big.Int).Lsh(big.NewInt(1), 255), a.Big())
}

func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"0", "1", maxUint256, "01", "1e3", "-0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := store.ParseAmount(s)
		if err != nil {
			return
		}
		// Whatever parses round-trips exactly and agrees with math/big.
		require.Equal(t, s, a.String())
		b, ok := new(big.Int).SetString(s, 10)
		require.True(t, ok)
		require.Zero(t, b.Cmp(a.Big()))
	})
}
