package settlement

import (
	"encoding/json"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// Two chains in one database, one deposit address (derivation does not
// depend on the chain): a payment indexed on chain 1337 credits only an
// invoice of chain 1337; the same address paid on chain 1337 for an
// invoice of chain 10 is a wrong-network payment, recorded on chain 1337
// and never credited; paid on chain 10 it credits the invoice there. Each
// chain's settlement keeps its own cursor and confirms on its own head.
func TestSettle_TwoChainsOneDatabase_APaymentCreditsOnlyItsChainsInvoice(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		a := newFixture(t, st.Chain(1337))
		b := &fixture{t: t, st: st.Chain(10), clock: a.clock, merchant: a.merchant}
		onA := a.invoice(eth(1000))
		onB := b.invoice(eth(1000), func(inv *store.Invoice) { inv.ChainID = 10 })

		// Chain 1337 pays chain 10's invoice's address: a payment on the
		// wrong network, recorded on chain 1337, not credited (the
		// invoice stays PENDING, flagged, one invoice.wrong_network).
		a.mine(pay(onB.DepositAddress, eth(1000)))
		sa, sb := a.settler(), b.settler()
		a.sync(sa)
		got := a.get(onB.ID)
		require.Equal(t, store.StatusPending, got.Status)
		require.True(t, got.PaidWei.IsZero())
		require.True(t, got.NeedsAttention)
		wrong := a.payments(onB.ID)
		require.Len(t, wrong, 1)
		require.EqualValues(t, 1337, wrong[0].ChainID)
		require.True(t, wrong[0].WrongNetwork)
		require.Equal(t, []string{store.EventInvoiceWrongNetwork}, a.events(onB.ID))
		b.sync(sb)
		require.Equal(t, []string{store.EventInvoiceWrongNetwork}, a.events(onB.ID), "chain 10's settlement does not see chain 1337's payment")

		// Chain 10 pays it: credited, by chain 10's settlement only.
		b.mine(pay(onB.DepositAddress, eth(1000)))
		a.sync(sa)
		require.Equal(t, store.StatusPending, a.get(onB.ID).Status, "chain 1337's settlement does not read chain 10")
		b.sync(sb)
		require.Equal(t, store.StatusPaid, b.get(onB.ID).Status)
		require.Equal(t, eth(1000).String(), b.get(onB.ID).PaidWei.String())
		require.Len(t, b.payments(onB.ID), 2, "the wrong-network payment and chain 10's")

		// Chain 1337's own invoice is paid on chain 1337.
		a.mine(pay(onA.DepositAddress, eth(1000)))
		a.sync(sa)
		require.Equal(t, store.StatusPaid, a.get(onA.ID).Status)
		require.NotEqual(t, a.cursor().BlockNumber, b.cursor().BlockNumber, "a cursor per chain")

		// Confirmations count on each invoice's own chain: twelve blocks
		// on chain 1337 confirm its invoice and not chain 10's.
		a.mineN(12)
		a.sync(sa)
		require.Equal(t, store.StatusConfirmed, a.get(onA.ID).Status)
		require.Equal(t, store.StatusPaid, a.get(onB.ID).Status, "chain 10's payment waits for chain 10's blocks")
		b.mineN(12)
		b.sync(sb)
		require.Equal(t, store.StatusConfirmed, b.get(onB.ID).Status)
	})
}

// A token transfer on chain 1337 to the deposit address of a token
// invoice of chain 10, in a token of the same contract address: a
// wrong-network payment (not a payment in the invoice's asset — the
// contract at that address on chain 1337 is another chain's), recorded
// with its token, never counted; the event names the token by its address
// alone.
func TestSettle_TokenOnTheWrongNetwork_RecordedNotCounted(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		a := newFixture(t, st.Chain(1337))
		b := &fixture{t: t, st: st.Chain(10), clock: a.clock, merchant: a.merchant}
		token := randAddr()
		inv := b.invoice(store.NewAmount(5_000_000), func(inv *store.Invoice) {
			inv.ChainID = 10
			inv.SetAsset(store.Asset{Symbol: "USDC", Address: &token, Decimals: 6})
		})
		blk := a.mine(pay(randAddr(), eth(1)))
		require.NoError(t, a.st.InsertTokenTransfers(ctx, []store.TokenTransfer{{BlockNumber: blk.Number,
			BlockHash: blk.Hash, TxHash: randHash(), LogIndex: 3, Token: token, From: randAddr(),
			To: inv.DepositAddress, Value: store.NewAmount(5_000_000)}}))
		a.sync(a.settler(func(c *Config) { c.Assets = []store.Asset{{Symbol: "USDC", Address: &token, Decimals: 6}} }))

		got := a.get(inv.ID)
		require.Equal(t, store.StatusPending, got.Status)
		require.True(t, got.PaidWei.IsZero(), "the same contract address on another chain pays nothing")
		require.True(t, got.NeedsAttention)
		ps := a.payments(inv.ID)
		require.Len(t, ps, 1)
		require.True(t, ps[0].WrongNetwork)
		require.False(t, ps[0].WrongAsset)
		require.EqualValues(t, 1337, ps[0].ChainID)
		require.Equal(t, token, *ps[0].Token)
		require.Equal(t, 3, ps[0].LogIndex)
		evs, err := a.st.ListEventsByInvoice(ctx, inv.ID)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.Equal(t, store.EventInvoiceWrongNetwork, evs[0].Type)
		var data struct {
			Payments []struct {
				Asset struct {
					Symbol  string          `json:"symbol"`
					Address *common.Address `json:"address"`
				} `json:"asset"`
				ChainID         uint64 `json:"chain_id"`
				AmountFormatted string `json:"amount_formatted"`
			} `json:"wrong_network_payments"`
		}
		require.NoError(t, json.Unmarshal(evs[0].Data, &data))
		require.Len(t, data.Payments, 1)
		require.EqualValues(t, 1337, data.Payments[0].ChainID)
		require.Equal(t, token, *data.Payments[0].Asset.Address)
		require.Empty(t, data.Payments[0].Asset.Symbol, "chain 10's USDC is not named for chain 1337's contract")
		require.Empty(t, data.Payments[0].AmountFormatted)
	})
}
