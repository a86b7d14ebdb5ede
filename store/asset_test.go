package store_test

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func TestFormatUnits_ExactDecimalWithoutTrailingZeros(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		units    string
		decimals uint8
		want     string
	}{
		{"12500000", 6, "12.5"},
		{"1", 6, "0.000001"},
		{"0", 6, "0"},
		{"12000000", 6, "12"},
		{"123456789", 6, "123.456789"},
		{"1", 18, "0.000000000000000001"},
		{"1500000000000000000", 18, "1.5"},
		{"42", 0, "42"},
		{maxUint256, 18, "115792089237316195423570985008687907853269984665640564039457.584007913129639935"},
		{maxUint256, 77, "1.15792089237316195423570985008687907853269984665640564039457584007913129639935"},
	} {
		require.Equal(t, tc.want, store.FormatUnits(store.MustParseAmount(tc.units), tc.decimals), "%s at %d", tc.units, tc.decimals)
	}
}

func TestParseUnits_ExactBaseUnits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s        string
		decimals uint8
		want     string
	}{
		{"12.5", 6, "12500000"},
		{"12.50", 6, "12500000"},
		{"0.000001", 6, "1"},
		{"12", 6, "12000000"},
		{"0", 6, "0"},
		{"0.0", 6, "0"},
		{"0.1", 18, "100000000000000000"},
		{"0.000000000000000001", 18, "1"},
		{"42", 0, "42"},
		{"115792089237316195423570985008687907853269984665640564039457.584007913129639935", 18, maxUint256},
	} {
		got, err := store.ParseUnits(tc.s, tc.decimals)
		require.NoError(t, err, "%q at %d", tc.s, tc.decimals)
		require.Equal(t, tc.want, got.String(), "%q at %d", tc.s, tc.decimals)
	}
}

func TestParseUnits_RejectsInexactOrMalformed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s        string
		decimals uint8
	}{
		{"0.0000001", 6}, // more fraction digits than the token has
		{"1.5", 0},
		{"", 6}, {".5", 6}, {"5.", 6}, {"012", 6}, {"-1", 6}, {"+1", 6}, {"1e6", 6}, {" 1", 6},
		{"1,5", 6}, {"1.2.3", 6}, {"0x10", 6}, {"NaN", 6}, {"١", 6},
		{"115792089237316195423570985008687907853269984665640564039457.584007913129639936", 18}, // 2^256
		{"1" + strings.Repeat("0", 72), 6},
	} {
		_, err := store.ParseUnits(tc.s, tc.decimals)
		require.ErrorIs(t, err, store.ErrInvalidAmount, "%q at %d", tc.s, tc.decimals)
	}
}

func FuzzUnits_FormatParseRoundTrip(f *testing.F) {
	f.Add([]byte{1}, uint8(6))
	f.Add([]byte{0xff, 0xff}, uint8(18))
	f.Fuzz(func(t *testing.T, b []byte, decimals uint8) {
		if len(b) > 32 {
			b = b[:32]
		}
		decimals %= store.MaxDecimals + 1
		a, err := store.AmountFromBig(new(big.Int).SetBytes(b))
		require.NoError(t, err)
		s := store.FormatUnits(a, decimals)
		back, err := store.ParseUnits(s, decimals)
		require.NoError(t, err, s)
		require.Equal(t, a, back, s)
	})
}

func TestAsset_JSON_AddressEIP55OrNullForNative(t *testing.T) {
	t.Parallel()
	tok := common.HexToAddress("0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48")
	b, err := json.Marshal(store.Asset{Symbol: "USDC", Address: &tok, Decimals: 6})
	require.NoError(t, err)
	require.JSONEq(t, `{"symbol":"USDC","address":"0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48","decimals":6}`, string(b))
	b, err = json.Marshal(store.NativeAsset("ETH"))
	require.NoError(t, err)
	require.JSONEq(t, `{"symbol":"ETH","address":null,"decimals":18}`, string(b))

	var a store.Asset
	require.NoError(t, json.Unmarshal([]byte(`{"symbol":"USDC","address":"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48","decimals":6}`), &a))
	require.Equal(t, tok, *a.Address)
	require.Error(t, json.Unmarshal([]byte(`{"symbol":"USDC","address":"0xA0B86991c6218b36c1d19D4a2e9Eb0cE3606eB48","decimals":6}`), &a),
		"a mixed-case address with a wrong checksum is refused")
}

func TestAsset_SameAndNative(t *testing.T) {
	t.Parallel()
	a, b := common.HexToAddress("0x01"), common.HexToAddress("0x02")
	zero := common.Address{}
	require.True(t, store.SameToken(nil, nil))
	require.True(t, store.SameToken(nil, &zero), "the zero address is the native coin")
	require.False(t, store.SameToken(nil, &a))
	require.False(t, store.SameToken(&a, &b))
	require.True(t, store.SameToken(&a, &a))
	require.True(t, store.Asset{Address: &zero}.IsNative())
}

func invoiceFixture() store.Invoice {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	return store.Invoice{ID: 7, MerchantID: 1, Status: store.StatusPending,
		AmountWei: store.NewAmount(12_500_000), PaidWei: store.NewAmount(2_000_001), ChainID: 1337,
		DepositAddress: common.HexToAddress("0x1111111111111111111111111111111111111111"),
		PaymentURI:     "ethereum:x", ExpiresAt: at, CreatedAt: at, UpdatedAt: at, SweepStatus: store.SweepNone}
}
