package invoice

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// The create path marshals a view with its MarshalJSON directly; the bytes
// must be what json.Marshal writes (the replay is compared byte for byte),
// HTML escaping and token members included.
func TestInvoiceView_MarshalJSONIsWhatJSONMarshalWrites(t *testing.T) {
	at := time.Date(2026, 11, 25, 7, 0, 0, 123456000, time.UTC)
	native := store.Invoice{ID: 7, MerchantID: 3, Status: store.StatusPending, AmountWei: store.NewAmount(1500),
		ChainID: 1337, DepositAddress: common.HexToAddress("0x70997970c51812dc3a010c7d01b50e0d17dc79c8"),
		DerivationIndex: 9, PaymentURI: "ethereum:0x70997970C51812dc3A010C7d01b50e0d17dc79C8@1337?value=1500",
		OrderID: "<order & co>", Description: "caf\u00e9 \u2028 </script>", Metadata: store.RawJSON(`{"a": "<b>", "n": [1, 2]}`),
		RedirectURL: "https://shop.example/back?x=1&y=2", ExpiresAt: at.Add(time.Hour), CreatedAt: at, UpdatedAt: at,
		SweepStatus: store.SweepNone}
	token := native
	token.ID, token.Metadata = 8, nil
	usdc := common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")
	token.SetAsset(store.Asset{Symbol: "USDC", Address: &usdc, Decimals: 6})
	for _, inv := range []store.Invoice{native, token} {
		v := invoiceView{Invoice: inv, QRPNGURL: "https://pay.example.com/v1/invoices/7/qr.png",
			QRSVGURL: "https://pay.example.com/v1/invoices/7/qr.svg", LookupToken: "tok<en>",
			CheckoutURL: "https://pay.example.com/checkout#tok"}
		want, err := json.Marshal(v)
		require.NoError(t, err)
		got, err := v.MarshalJSON()
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		require.NotContains(t, string(got), "<", "HTML characters escaped as json.Marshal does")
	}
}
