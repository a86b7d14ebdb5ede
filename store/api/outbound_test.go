package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
)

func refundRow() store.Outbound {
	inv := int64(7)
	o := store.Outbound{ID: 12, Kind: store.OutboundRefund, MerchantID: 3, InvoiceID: &inv, Reason: store.RefundOverpayment,
		Amount: store.MustParseAmount("250000000000000001"), PaidBy: store.PaidByService, Status: store.OutboundAwaitingDestination,
		ClaimTokenHash: []byte{1}, CreatedAt: at, UpdatedAt: at, Version: 1}
	o.SetAsset(store.NativeAsset("ETH"))
	return o
}

func TestRefund_JSON_Golden(t *testing.T) {
	o := refundRow()
	golden(t, "refund_awaiting_destination", api.NewOutbound(o))

	// Sent from the payout wallet, approved by a second key, confirmed.
	dest, from := common.HexToAddress("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"), common.HexToAddress("0x90f79bf6eb2c4f870365e785982e1f101e93b906")
	h := common.HexToHash("0x8f5d1e0b4d7f5ae4c1c3d33ecbd3a9ee64f10b7fd2d6c56f6e8c1a4e0f7a6a9b2d")
	key, block := int64(4), uint64(120)
	approved, sent, confirmed := at.Add(time.Minute), at.Add(2*time.Minute), at.Add(3*time.Minute)
	o.Destination, o.FromAddress, o.Source, o.Status = &dest, &from, store.SourcePayoutWallet, store.OutboundConfirmed
	o.NeedsApproval, o.ApprovedByKey, o.ApprovedAt, o.TxHash, o.BlockNumber = true, &key, &approved, &h, &block
	o.BroadcastAt, o.ConfirmedAt, o.UpdatedAt, o.Reference = &sent, &confirmed, confirmed, "ticket 99"
	golden(t, "refund_confirmed", api.NewOutbound(o))
}

func TestPayout_JSON_Golden(t *testing.T) {
	dest := common.HexToAddress("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc")
	o := store.Outbound{ID: 31, Kind: store.OutboundPayout, MerchantID: 3, BatchID: "pb_7Qm2", Reference: "supplier 12",
		Amount: store.NewAmount(12_500_000), Destination: &dest, PaidBy: store.PaidByMerchant, Status: store.OutboundAwaitingPayment,
		PaymentURI:   "ethereum:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48@262144/transfer?address=0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC&uint256=12500000",
		FiatCurrency: "EUR", FiatMinor: ptr(store.NewAmount(1150)), FiatRate: "0.92", FiatRateKind: "current",
		CreatedByKey: 2, CreatedAt: at, UpdatedAt: at}
	o.SetAsset(store.Asset{Symbol: "USDC", Address: &usdc, Decimals: 6})
	v := api.NewOutbound(o)
	require.Equal(t, "11.50", v.Fiat.Amount)
	golden(t, "payout_merchant_paid", v)
	ev, err := api.OutboundEvent(store.OutboundEventType(o.Kind, o.Status), o, at)
	require.NoError(t, err)
	require.Equal(t, "payout.awaiting_payment", ev.Type)
	require.Zero(t, ev.InvoiceID, "a payout has no invoice")
}

func TestOutboundEventType(t *testing.T) {
	require.Equal(t, "refund.awaiting_destination", store.OutboundEventType(store.OutboundRefund, store.OutboundAwaitingDestination))
	require.Equal(t, "", store.OutboundEventType(store.OutboundPayout, store.OutboundAwaitingDestination), "payouts always have a destination")
	require.Equal(t, "payout.created", store.OutboundEventType(store.OutboundPayout, "created"))
	require.Equal(t, "", store.OutboundEventType(store.OutboundPayout, store.OutboundQueued), "queued is not announced")
	for _, typ := range store.OutboundEventTypes() {
		require.Contains(t, store.EventTypes(), typ)
	}
}

func TestAPIKey_JSON_Golden(t *testing.T) {
	revoked := at.Add(time.Hour)
	golden(t, "api_key", api.NewAPIKey(store.APIKey{ID: 4, MerchantID: 3, Name: "approver", Digest: []byte{1}, Hash: "x",
		Prefix: "evmpay_sk_Xb3f", Scopes: store.Scopes{store.ScopeRead, store.ScopeApprove}, CreatedAt: at, RevokedAt: &revoked}))
}

func TestLedgerEntry_JSONAndCSV_Golden(t *testing.T) {
	inv, pay, block, li := int64(7), int64(55), uint64(118), 3
	from, to := common.HexToAddress("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"), deposit
	h := common.HexToHash("0x5d1f0b4d7f5ae4c1c3d33ecbd3a9ee64f10b7fd2d6c56f6e8c1a4e0f7a6a9b1c")
	token := usdc
	e := store.LedgerEntry{ID: 900, Kind: store.LedgerPayment, InvoiceID: &inv, PaymentID: &pay, Token: &token,
		From: &from, To: &to, Amount: store.NewAmount(12_500_001), TxHash: &h, LogIndex: &li, BlockNumber: &block,
		At: at, FiatCurrency: "USD", FiatMinor: ptr(store.NewAmount(1250)), RecordedAt: at.Add(time.Second)}
	usdcAsset := store.Asset{Symbol: "USDC", Address: &usdc, Decimals: 6}
	v := api.NewLedgerEntry(e, store.NativeAsset("ETH"), usdcAsset)
	golden(t, "ledger_payment", v)
	require.Equal(t, len(api.LedgerCSVHeader()), len(v.CSV()))
	require.Equal(t, "900,payment,2026-11-23T12:00:00.123456Z,7,,USDC,0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48,6,12500001,12.500001,"+
		"0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC,0x70997970C51812dc3A010C7d01b50e0d17dc79C8,"+
		"0x5d1f0b4d7f5ae4c1c3d33ecbd3a9ee64f10b7fd2d6c56f6e8c1a4e0f7a6a9b1c,3,118,USD,12.50,,2026-11-23T12:00:01.123456Z",
		strings.Join(v.CSV(), ","))

	// A gas fee: to no one, the native coin; a reversal names what it undoes.
	rev := int64(899)
	fee := store.LedgerEntry{ID: 901, Kind: store.LedgerGasFee, From: &from, Amount: store.NewAmount(21_000_000_000_000),
		BlockNumber: &block, At: at, Reverses: &rev, RecordedAt: at}
	fv := api.NewLedgerEntry(fee, usdcAsset)
	require.Equal(t, "ETH", fv.Asset.Symbol)
	require.Equal(t, "0.000021", fv.AmountFormatted)
	require.Nil(t, fv.To)
	golden(t, "ledger_gas_fee_reversal", fv)
	unknown := api.NewLedgerEntry(store.LedgerEntry{Token: &from, Amount: store.NewAmount(5), At: at, RecordedAt: at})
	require.Equal(t, "", unknown.Asset.Symbol, "an unconfigured token is named by its address")
	require.Equal(t, "5", unknown.AmountFormatted)
}

func ptr[T any](v T) *T { return &v }
