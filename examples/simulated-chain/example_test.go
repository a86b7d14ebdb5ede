package simulatedchain_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest"
	"github.com/evmpay/evmpay/store"
)

// The pattern to copy: a real EVM, a real store, evmpay's packages, and
// blocks mined by the test.
func TestInvoice_PendingPaidConfirmedSettled(t *testing.T) {
	t.Parallel()
	env := evmpaytest.New(t, evmpaytest.Config{Confirmations: 3})
	inv := env.CreateInvoice(`{"amount_wei":"250000","order_id":"A-1"}`) // POST /v1/invoices
	require.Equal(t, store.StatusPending, inv.Status)

	receipt := env.Chain.Pay(inv.PaymentURI) // from a funded account; mines its block
	paid := env.WaitInvoice(inv.ID, store.StatusPaid)
	require.Equal(t, "250000", paid.PaidWei.String())

	env.Chain.Mine(2) // two confirmations of three
	env.Sync()        // the indexer and settlement have seen them
	require.Equal(t, receipt.BlockNumber.Uint64()+2, env.Chain.Head())
	still, err := env.Store.GetInvoice(t.Context(), inv.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPaid, still.Status, "not confirmed before the third block")

	env.Chain.Mine(1)
	env.WaitInvoice(inv.ID, store.StatusConfirmed)
	settled := env.WaitInvoice(inv.ID, store.StatusSettled) // mines while the sweep runs
	require.Equal(t, store.SweepSwept, settled.SweepStatus)
	require.Equal(t, "250000", env.Chain.Balance(nil, env.Merchant.SettlementAddress).String())
}

// A token invoice settles the same way: the kit pays its ERC-20 transfer
// URI from a funded account that holds the token.
func TestTokenInvoice_Settled(t *testing.T) {
	t.Parallel()
	env := evmpaytest.New(t, evmpaytest.Config{Tokens: []evmpaytest.Token{{Symbol: "USDC", Decimals: 6}}})
	inv := env.CreateInvoice(`{"asset":"USDC","amount":"12500000"}`) // 12.5 USDC
	env.Chain.Pay(inv.PaymentURI)
	env.WaitInvoice(inv.ID, store.StatusSettled)
	usdc := env.Tokens[0].Address
	require.Equal(t, "12500000", env.Chain.Balance(&usdc, env.Merchant.SettlementAddress).String())
}
