package invoice_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
)

const (
	addrEIP55 = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
	addrLower = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
	addrUpper = "0xF39FD6E51AAD88F6F4CE6AB8827279CFFFB92266"
	maxU256   = "115792089237316195423570985008687907853269984665640564039457584007913129639935"
)

func TestFormatPaymentURI_EIP55AddressChainAndIntegerWei(t *testing.T) {
	t.Parallel()
	uri, err := invoice.FormatPaymentURI(invoice.PaymentURI{
		Address: common.HexToAddress(addrLower),
		ChainID: 9000,
		Value:   uint256.MustFromDecimal("1500000000000000000"),
	})
	require.NoError(t, err)
	require.Equal(t, "ethereum:"+addrEIP55+"@9000?value=1500000000000000000", uri)

	uri, err = invoice.FormatPaymentURI(invoice.PaymentURI{Address: common.HexToAddress(addrLower), ChainID: 1})
	require.NoError(t, err)
	require.Equal(t, "ethereum:"+addrEIP55+"@1", uri, "no value, no query")

	uri, err = invoice.FormatPaymentURI(invoice.PaymentURI{Address: common.HexToAddress(addrLower), ChainID: 1, Value: uint256.MustFromDecimal(maxU256)})
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(uri, "?value="+maxU256), "never scientific notation")
}

func TestFormatPaymentURI_RejectsZeroAddressAndZeroChainID(t *testing.T) {
	t.Parallel()
	_, err := invoice.FormatPaymentURI(invoice.PaymentURI{ChainID: 1})
	require.ErrorIs(t, err, invoice.ErrURIAddress)
	require.ErrorIs(t, err, invoice.ErrInvalidPaymentURI)
	_, err = invoice.FormatPaymentURI(invoice.PaymentURI{Address: common.HexToAddress(addrLower)})
	require.ErrorIs(t, err, invoice.ErrURIChainID)
}

func TestParsePaymentURI_AcceptsCanonicalAndTolerableForms(t *testing.T) {
	t.Parallel()
	want := invoice.PaymentURI{Address: common.HexToAddress(addrLower), ChainID: 9000, Value: uint256.NewInt(12345)}
	for _, s := range []string{
		"ethereum:" + addrEIP55 + "@9000?value=12345",
		"ethereum:" + addrLower + "@9000?value=12345",
		"ethereum:" + addrUpper + "@9000?value=12345",
		"ETHEREUM:" + addrEIP55 + "@9000?value=12345",
		"ethereum:pay-" + addrEIP55 + "@9000?value=12345",
		"ethereum:" + addrEIP55 + "@9000?gas=21000&value=12345&gasPrice=1000000000",
		"ethereum:" + addrEIP55 + "@9000?gasLimit=21000&value=12345",
	} {
		got, err := invoice.ParsePaymentURI(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}

	got, err := invoice.ParsePaymentURI("ethereum:" + addrEIP55 + "@1")
	require.NoError(t, err)
	require.Nil(t, got.Value, "no value parameter")

	got, err = invoice.ParsePaymentURI("ethereum:" + addrEIP55 + "@18446744073709551615?value=" + maxU256)
	require.NoError(t, err)
	require.Equal(t, uint64(18446744073709551615), got.ChainID)
	require.Equal(t, maxU256, got.Value.Dec())

	got, err = invoice.ParsePaymentURI("ethereum:" + addrEIP55 + "@1?value=0")
	require.NoError(t, err)
	require.True(t, got.Value.IsZero())
}

func TestParsePaymentURI_RejectsMalformed(t *testing.T) {
	t.Parallel()
	a := addrEIP55
	cases := []struct {
		uri  string
		kind error
	}{
		{"", invoice.ErrURIScheme},
		{"bitcoin:" + a + "@1", invoice.ErrURIScheme},
		{"ethereum" + a + "@1", invoice.ErrURIScheme},
		{"eth:" + a + "@1", invoice.ErrURIScheme},
		{" ethereum:" + a + "@1", invoice.ErrURIScheme},

		{"ethereum:" + strings.Replace(a, "f39F", "f39f", 1) + "@1", invoice.ErrURIAddress}, // bad EIP-55
		{"ethereum:" + a[:41] + "@1", invoice.ErrURIAddress},
		{"ethereum:" + a + "0@1", invoice.ErrURIAddress},
		{"ethereum:0X" + a[2:] + "@1", invoice.ErrURIAddress},
		{"ethereum:" + a[2:] + "@1", invoice.ErrURIAddress},
		{"ethereum:0x" + strings.Repeat("g", 40) + "@1", invoice.ErrURIAddress},
		{"ethereum:0x0000000000000000000000000000000000000000@1", invoice.ErrURIAddress},
		{"ethereum:vitalik.eth@1", invoice.ErrURIAddress},
		{"ethereum:pay-pay-" + a + "@1", invoice.ErrURIAddress},
		{"ethereum:@1", invoice.ErrURIAddress},

		{"ethereum:" + a, invoice.ErrURIChainID},
		{"ethereum:" + a + "?value=1", invoice.ErrURIChainID},
		{"ethereum:" + a + "@", invoice.ErrURIChainID},
		{"ethereum:" + a + "@0", invoice.ErrURIChainID},
		{"ethereum:" + a + "@01", invoice.ErrURIChainID},
		{"ethereum:" + a + "@-1", invoice.ErrURIChainID},
		{"ethereum:" + a + "@+1", invoice.ErrURIChainID},
		{"ethereum:" + a + "@0x1", invoice.ErrURIChainID},
		{"ethereum:" + a + "@1.0", invoice.ErrURIChainID},
		{"ethereum:" + a + "@18446744073709551616", invoice.ErrURIChainID},
		{"ethereum:" + a + "@1@2", invoice.ErrURIChainID},

		{"ethereum:" + a + "@1?value=1.5", invoice.ErrURIValue},
		{"ethereum:" + a + "@1?value=1e18", invoice.ErrURIValue},
		{"ethereum:" + a + "@1?value=2.014e18", invoice.ErrURIValue},
		{"ethereum:" + a + "@1?value=1E18", invoice.ErrURIValue},
		{"ethereum:" + a + "@1?value=-1", invoice.ErrURIValue},
		{"ethereum:" + a + "@1?value=+1", invoice.ErrURIValue},
		{"ethereum:" + a + "@1?value=01", invoice.ErrURIValue},
		{"ethereum:" + a + "@1?value=0x10", invoice.ErrURIValue},
		{"ethereum:" + a + "@1?value=1_000", invoice.ErrURIValue},
		{"ethereum:" + a + "@1?value= 1", invoice.ErrURIValue},
		{"ethereum:" + a + "@1?value=115792089237316195423570985008687907853269984665640564039457584007913129639936", invoice.ErrURIValue},
		{"ethereum:" + a + "@1?value=" + strings.Repeat("9", 79), invoice.ErrURIValue},

		{"ethereum:" + a + "@1?value=1&value=2", invoice.ErrURIParam},
		{"ethereum:" + a + "@1?amount=1", invoice.ErrURIParam},
		{"ethereum:" + a + "@1?Value=1", invoice.ErrURIParam},
		{"ethereum:" + a + "@1?value", invoice.ErrURIParam},
		{"ethereum:" + a + "@1?value=", invoice.ErrURIParam},
		{"ethereum:" + a + "@1?value=1&", invoice.ErrURIParam},
		{"ethereum:" + a + "@1?=1", invoice.ErrURIParam},
		{"ethereum:" + a + "@1?gas=1.5", invoice.ErrURIParam},
		{"ethereum:" + a + "@1?value=1?value=2", invoice.ErrURIValue},

		{"ethereum:" + a + "@1?", invoice.ErrURISyntax},
		{"ethereum:" + a + "@1?value=1#frag", invoice.ErrURISyntax},
		{"ethereum:" + a + "@1?value=%31", invoice.ErrURISyntax},
		{"ethereum:" + a + "@1?value=1" + strings.Repeat("&gas=1", 200), invoice.ErrURISyntax},

		{"ethereum:" + a + "@1/transfer?address=" + a + "&uint256=1", invoice.ErrURIFunction},
		{"ethereum:" + a + "/transfer", invoice.ErrURIFunction},
	}
	for _, c := range cases {
		_, err := invoice.ParsePaymentURI(c.uri)
		require.ErrorIs(t, err, c.kind, "%q: %v", c.uri, err)
		require.ErrorIs(t, err, invoice.ErrInvalidPaymentURI, c.uri)
		require.True(t, strings.HasPrefix(err.Error(), "invoice: invalid payment URI: "), err.Error())
	}
}

func TestParsePaymentURI_RoundTripsFormat(t *testing.T) {
	t.Parallel()
	for _, p := range []invoice.PaymentURI{
		{Address: common.HexToAddress(addrLower), ChainID: 1, Value: uint256.NewInt(1)},
		{Address: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"), ChainID: 262144, Value: uint256.MustFromDecimal("1000000000000000000000000000")},
		{Address: common.HexToAddress("0x0000000000000000000000000000000000000001"), ChainID: 1<<64 - 1, Value: uint256.MustFromDecimal(maxU256)},
		{Address: common.HexToAddress(addrLower), ChainID: 9000},
	} {
		s, err := invoice.FormatPaymentURI(p)
		require.NoError(t, err)
		got, err := invoice.ParsePaymentURI(s)
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
}

func ExampleFormatPaymentURI() {
	uri, err := invoice.FormatPaymentURI(invoice.PaymentURI{
		Address: common.HexToAddress("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"),
		ChainID: 9000,
		Value:   uint256.MustFromDecimal("2500000000000000000"), // 2.5 units of 1e18 wei
	})
	fmt.Println(uri, err)
	// Output:
	// ethereum:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266@9000?value=2500000000000000000 <nil>
}

func ExampleParsePaymentURI() {
	p, err := invoice.ParsePaymentURI("ethereum:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266@9000?value=2500000000000000000")
	fmt.Println(p.Address, p.ChainID, p.Value, err)

	_, err = invoice.ParsePaymentURI("ethereum:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266@9000?value=2.5e18")
	fmt.Println(errors.Is(err, invoice.ErrURIValue), err)
	// Output:
	// 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 9000 2500000000000000000 <nil>
	// true invoice: invalid payment URI: value: must be an integer (no decimal point or exponent)
}
