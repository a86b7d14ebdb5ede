package pricing

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func TestRoundSig_HalfUpAt18SignificantDigits(t *testing.T) {
	t.Parallel()
	rat := func(s string) *big.Rat {
		r, ok := new(big.Rat).SetString(s)
		require.True(t, ok, s)
		return r
	}
	for in, want := range map[string]string{
		"1/3":                               "0.333333333333333333",
		"2/3":                               "0.666666666666666667",
		"2500":                              "2500",
		"1/8":                               "0.125",
		"123456789012345678901":             "123456789012345678901", // more digits before the point: kept whole
		"1234567890.12345678951":            "1234567890.12345679",   // half up
		"1/1000000000000000000000000000000": "0.000000000000000000000000000001",
		"1/7000000000000000000000000000000": "0.000000000000000000000000000000142857142857142857",
		"0":                                 "0",
	} {
		d, err := roundSig(rat(in))
		require.NoError(t, err, in)
		require.Equal(t, want, d.String(), in)
	}
	// Below 10^-77 only the digits within MaxDecimalScale remain.
	d, err := roundSig(rat("1/3" + "000000000000000000000000000000000000000000000000000000000000000000000000000"))
	require.NoError(t, err)
	require.Equal(t, uint8(store.MaxDecimalScale), d.Scale())
	_, err = roundSig(rat("-1"))
	require.Error(t, err)
}

func TestMean2_Exact(t *testing.T) {
	t.Parallel()
	m, err := mean2(store.MustParseDecimal("2500"), store.MustParseDecimal("2500.01"))
	require.NoError(t, err)
	require.Equal(t, "2500.005", m.String())
	m, err = mean2(store.MustParseDecimal("0.1"), store.MustParseDecimal("0.0001"))
	require.NoError(t, err)
	require.Equal(t, "0.05005", m.String())
}

func TestDeviates_ExactBoundary(t *testing.T) {
	t.Parallel()
	m := store.MustParseDecimal("2500")
	require.False(t, deviates(store.MustParseDecimal("2525"), m, 100)) // exactly 1 %
	require.True(t, deviates(store.MustParseDecimal("2525.0001"), m, 100))
	require.False(t, deviates(store.MustParseDecimal("2475"), m, 100))
	require.True(t, deviates(store.MustParseDecimal("2474.9999"), m, 100))
}
