package invoice_test

import (
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
)

const tokenEIP55 = "0x5FbDB2315678afecb367f032d93F642f64180aa3"

func TestFormatTransferURI_TokenChainFunctionRecipientAndBaseUnits(t *testing.T) {
	t.Parallel()
	uri, err := invoice.FormatTransferURI(invoice.TransferURI{
		Token: common.HexToAddress(tokenEIP55), ChainID: 1337,
		To: common.HexToAddress(addrLower), Amount: uint256.NewInt(12_340_000),
	})
	require.NoError(t, err)
	require.Equal(t, "ethereum:"+tokenEIP55+"@1337/transfer?address="+addrEIP55+"&uint256=12340000", uri)

	_, err = invoice.FormatTransferURI(invoice.TransferURI{ChainID: 1, To: common.HexToAddress(addrLower)})
	require.ErrorIs(t, err, invoice.ErrURIAddress)
	_, err = invoice.FormatTransferURI(invoice.TransferURI{Token: common.HexToAddress(tokenEIP55), ChainID: 1})
	require.ErrorIs(t, err, invoice.ErrURIAddress)
	_, err = invoice.FormatTransferURI(invoice.TransferURI{Token: common.HexToAddress(tokenEIP55), To: common.HexToAddress(addrLower)})
	require.ErrorIs(t, err, invoice.ErrURIChainID)
}

func TestParseTransferURI_RoundTripsWhatFormatWrites(t *testing.T) {
	t.Parallel()
	want := invoice.TransferURI{
		Token: common.HexToAddress(tokenEIP55), ChainID: 9000,
		To: common.HexToAddress(addrLower), Amount: uint256.MustFromDecimal(maxU256),
	}
	s, err := invoice.FormatTransferURI(want)
	require.NoError(t, err)
	got, err := invoice.ParseTransferURI(s)
	require.NoError(t, err)
	require.Equal(t, want, got)

	got, err = invoice.ParseTransferURI("ethereum:" + tokenEIP55 + "@9000/transfer?uint256=5&gas=90000&address=" + addrUpper)
	require.NoError(t, err)
	require.Equal(t, uint256.NewInt(5), got.Amount)
	require.Equal(t, common.HexToAddress(addrLower), got.To)
}

func TestParseTransferURI_RejectsWhatCouldMoveMoneyElsewhere(t *testing.T) {
	t.Parallel()
	tok, a := tokenEIP55, addrEIP55
	for _, c := range []struct {
		uri  string
		kind error
	}{
		{"ethereum:" + tok + "@1?value=1", invoice.ErrURIFunction},
		{"ethereum:" + tok + "@1/approve?address=" + a + "&uint256=1", invoice.ErrURIFunction},
		{"ethereum:" + tok + "/transfer?address=" + a + "&uint256=1", invoice.ErrURIChainID},
		{"ethereum:" + tok + "@1/transfer?uint256=1", invoice.ErrURIParam},
		{"ethereum:" + tok + "@1/transfer", invoice.ErrURIParam},
		{"ethereum:" + tok + "@1/transfer?address=" + a + "&address=" + a, invoice.ErrURIParam},
		{"ethereum:" + tok + "@1/transfer?address=" + a + "&value=1", invoice.ErrURIParam},
		{"ethereum:" + tok + "@1/transfer?address=" + a + "&uint256=1.5", invoice.ErrURIValue},
		{"ethereum:" + tok + "@1/transfer?address=" + a + "&uint256=2e6", invoice.ErrURIValue},
		{"ethereum:" + tok + "@1/transfer?address=" + a + "&uint256=" + maxU256 + "0", invoice.ErrURIValue},
		{"ethereum:" + tok + "@1/transfer?address=0xF39fd6e51aad88F6F4ce6aB8827279cffFb92266&uint256=1", invoice.ErrURIAddress},
		{"ethereum:0x0000000000000000000000000000000000000000@1/transfer?address=" + a, invoice.ErrURIAddress},
		{"ethereum:" + tok + "@1/transfer?address=" + a + "#x", invoice.ErrURISyntax},
		{"bitcoin:" + tok, invoice.ErrURIScheme},
	} {
		_, err := invoice.ParseTransferURI(c.uri)
		require.ErrorIs(t, err, c.kind, c.uri)
		require.ErrorIs(t, err, invoice.ErrInvalidPaymentURI, c.uri)
	}
}
