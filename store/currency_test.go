package store_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func TestLookupCurrency_KnowsMinorUnitsAndRefusesUnknownCodes(t *testing.T) {
	t.Parallel()
	for code, minor := range map[string]uint8{"USD": 2, "EUR": 2, "GBP": 2, "CHF": 2, "JPY": 0, "KRW": 0, "ISK": 0, "KWD": 3, "BHD": 3, "eur": 2} {
		c, err := store.LookupCurrency(code)
		require.NoError(t, err, code)
		require.Equal(t, minor, c.MinorUnits, code)
	}
	c, err := store.LookupCurrency("eur")
	require.NoError(t, err)
	require.Equal(t, "EUR", c.Code)
	for _, code := range []string{"", "EU", "EURO", "XXX", "XAU", "BTC", "ETH", "HRK", "BGN", "US$"} {
		_, err := store.LookupCurrency(code)
		require.ErrorIs(t, err, store.ErrUnknownCurrency, code)
	}
	all := store.Currencies()
	require.Greater(t, len(all), 140)
	for i := 1; i < len(all); i++ {
		require.Less(t, all[i-1].Code, all[i].Code)
	}
}

func TestParseFiat_ExactMinorUnits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ amount, code, minor, formatted string }{
		{"49.90", "EUR", "4990", "49.90"},
		{"49.9", "EUR", "4990", "49.90"},
		{"49", "USD", "4900", "49.00"},
		{"0.05", "USD", "5", "0.05"},
		{"5000", "JPY", "5000", "5000"},
		{"1.5", "KWD", "1500", "1.500"},
		{"0", "EUR", "0", "0.00"},
	} {
		f, err := store.ParseFiat(c.amount, c.code)
		require.NoError(t, err, c)
		require.Equal(t, c.minor, f.Minor.String(), c)
		require.Equal(t, c.formatted, f.Amount(), c)
	}
	require.Equal(t, "49.90 EUR", store.MustParseFiat("49.90", "EUR").String())
}

func TestParseFiat_RefusesMoreDecimalsThanMinorUnitsAndMalformedAmounts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ amount, code string }{
		{"49.901", "EUR"}, {"100.5", "JPY"}, {"1.0001", "KWD"}, {"-1", "USD"}, {"1e2", "USD"},
		{"", "USD"}, {" 1", "USD"}, {"01.00", "USD"}, {"1,00", "EUR"}, {"1.", "USD"},
	} {
		_, err := store.ParseFiat(c.amount, c.code)
		require.ErrorIs(t, err, store.ErrInvalidAmount, c)
	}
	_, err := store.ParseFiat("1.00", "XYZ")
	require.ErrorIs(t, err, store.ErrUnknownCurrency)
}

func TestFiat_JSONRoundTripAndStrictness(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(store.MustParseFiat("49.9", "EUR"))
	require.NoError(t, err)
	require.JSONEq(t, `{"amount":"49.90","currency":"EUR"}`, string(b))
	var f store.Fiat
	require.NoError(t, json.Unmarshal(b, &f))
	require.Equal(t, store.MustParseFiat("49.90", "EUR"), f)
	require.Error(t, json.Unmarshal([]byte(`{"amount":49.9,"currency":"EUR"}`), &f))
	require.ErrorIs(t, json.Unmarshal([]byte(`{"amount":"49.901","currency":"EUR"}`), &f), store.ErrInvalidAmount)
	require.ErrorIs(t, json.Unmarshal([]byte(`{"amount":"1","currency":"ZZZ"}`), &f), store.ErrUnknownCurrency)
}

func TestFiat_CmpRefusesDifferentCurrencies(t *testing.T) {
	t.Parallel()
	n, err := store.MustParseFiat("1.00", "EUR").Cmp(store.MustParseFiat("0.99", "EUR"))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = store.MustParseFiat("1", "EUR").Cmp(store.MustParseFiat("1", "USD"))
	require.Error(t, err)
}
