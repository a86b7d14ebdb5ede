package store_test

import (
	"encoding/json"
	"math/big"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func TestParseDecimal_ExactAndCanonical(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"0":                                  "0",
		"0.0":                                "0",
		"3012.45":                            "3012.45",
		"3012.45000000":                      "3012.45",
		"1.10":                               "1.1",
		"2500":                               "2500",
		"0.000123":                           "0.000123",
		"30303.20000":                        "30303.2",
		"0." + strings.Repeat("0", 76) + "1": "0." + strings.Repeat("0", 76) + "1",
		maxUint256:                           maxUint256,
	} {
		d, err := store.ParseDecimal(in)
		require.NoError(t, err, in)
		require.Equal(t, want, d.String(), in)
		r, ok := new(big.Rat).SetString(in)
		require.True(t, ok)
		require.Zero(t, r.Cmp(d.Rat()), in)
	}
}

func TestParseDecimal_RefusesWhatIsNotAPlainDecimal(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"", ".", "1.", ".5", "-1", "+1", "1e3", "1E-3", " 1", "1 ", "01", "00.5", "1,5", "0x10",
		"NaN", "Infinity", "1.2.3", "١", // a non-ASCII digit
		"0." + strings.Repeat("0", 77) + "1", // 78 digits after the point
		maxUint256 + "0",                     // 2^256 × 10: too many digits
		"115792089237316195423570985008687907853269984665640564039457584007913129639936", // 2^256
	} {
		_, err := store.ParseDecimal(in)
		require.ErrorIs(t, err, store.ErrInvalidDecimal, "%q", in)
	}
}

func TestDecimal_EqualValuesAreEqualAndCompare(t *testing.T) {
	t.Parallel()
	a, b := store.MustParseDecimal("1.10"), store.MustParseDecimal("1.1")
	require.Equal(t, a, b) // normalised, so == works
	require.Zero(t, a.Cmp(b))
	require.Equal(t, -1, store.MustParseDecimal("0.99").Cmp(store.MustParseDecimal("1")))
	require.Equal(t, 1, store.MustParseDecimal("1000").Cmp(store.MustParseDecimal("999.999999")))
	d, err := store.NewDecimal(big.NewInt(2500000), 3)
	require.NoError(t, err)
	require.Equal(t, store.MustParseDecimal("2500"), d)
	require.Equal(t, uint8(0), d.Scale())
	require.Equal(t, "2500", d.Coef().String())
}

func TestNewDecimal_RefusesNegativeOverflowAndScale(t *testing.T) {
	t.Parallel()
	_, err := store.NewDecimal(big.NewInt(-1), 0)
	require.ErrorIs(t, err, store.ErrInvalidDecimal)
	_, err = store.NewDecimal(new(big.Int).Lsh(big.NewInt(1), 256), 0)
	require.ErrorIs(t, err, store.ErrInvalidDecimal)
	_, err = store.NewDecimal(big.NewInt(1), store.MaxDecimalScale+1)
	require.ErrorIs(t, err, store.ErrInvalidDecimal)
	_, err = store.NewDecimal(nil, 0)
	require.ErrorIs(t, err, store.ErrInvalidDecimal)
}

func TestDecimal_JSONIsAStringAndNumbersAreRefused(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(store.MustParseDecimal("0.0005"))
	require.NoError(t, err)
	require.JSONEq(t, `"0.0005"`, string(b))
	var d store.Decimal
	require.NoError(t, json.Unmarshal([]byte(`"3012.45"`), &d))
	require.Equal(t, "3012.45", d.String())
	require.ErrorIs(t, json.Unmarshal([]byte(`3012.45`), &d), store.ErrInvalidDecimal)
}

func TestDecimal_SQLRoundTrip(t *testing.T) {
	t.Parallel()
	v, err := store.MustParseDecimal("1.0921").Value()
	require.NoError(t, err)
	var d store.Decimal
	require.NoError(t, d.Scan(v))
	require.Equal(t, "1.0921", d.String())
	require.NoError(t, d.Scan([]byte("7")))
	require.Equal(t, "7", d.String())
	require.Error(t, d.Scan(1.5))
}

var plainDecimal = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]+)?$`)

// FuzzParseDecimal checks ParseDecimal against math/big: whatever it
// accepts has the value big.Rat reads from the same text and prints back
// to a string that parses to the same Decimal; whatever it refuses is
// outside the grammar or too large.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0", "1", "3012.45", "0.000123", "1.10", "01", "1e3", "-1", ".5", "1.", maxUint256, "0.1000000000000000000000000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := store.ParseDecimal(s)
		if err != nil {
			require.ErrorIs(t, err, store.ErrInvalidDecimal)
			if !plainDecimal.MatchString(s) || len(s) > 200 {
				return
			}
			// In the grammar: refused only for size.
			whole, frac, _ := strings.Cut(s, ".")
			frac = strings.TrimRight(frac, "0")
			coef, _ := new(big.Int).SetString(whole+frac, 10)
			require.True(t, len(frac) > store.MaxDecimalScale || coef.BitLen() > 256,
				"%q refused though it is a plain decimal of fitting size", s)
			return
		}
		require.True(t, plainDecimal.MatchString(s), "%q accepted though it is not a plain decimal", s)
		r, ok := new(big.Rat).SetString(s)
		require.True(t, ok, s)
		require.Zero(t, r.Cmp(d.Rat()), "%q parsed to %s", s, d)
		again, err := store.ParseDecimal(d.String())
		require.NoError(t, err)
		require.Equal(t, d, again)
		if strings.Contains(d.String(), ".") {
			require.False(t, strings.HasSuffix(d.String(), "0"), "%q printed as %q", s, d)
		}
	})
}
