package evmpaytest_test

import (
	"context"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/evmpaytest"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/sweep"
)

// Two chains, one database, one deposit wallet (the same mnemonic, so one
// sweep wallet address on both chains): evmpay's packages run per chain,
// each through its chain's handle on the shared store. Each chain's invoice
// is paid, settled and swept on its own chain — the sweep wallet's nonces
// start at 0 on each, a sequence per chain — and a payment of chain 1337's
// invoice's address on chain 1338 (a wrong network) is not credited to it.
func TestEnv_TwoChainsOneDatabase_EachSettlesAndSweepsItsOwn(t *testing.T) {
	t.Parallel()
	m, err := hdwallet.GenerateMnemonic(24)
	require.NoError(t, err)
	// Both chains' workers hold connections (each named lock one): a pool
	// for two services.
	st, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Config{MaxOpenConns: 40})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a := evmpaytest.New(t, evmpaytest.Config{Store: st, Mnemonic: m.Phrase()})
	b := evmpaytest.New(t, evmpaytest.Config{Store: st, Mnemonic: m.Phrase(),
		Chain: evmpaytest.ChainConfig{ChainID: 1338}})

	const wei = "2000000000000000"
	ia := a.CreateInvoice(`{"amount_wei":"` + wei + `"}`)
	ib := b.CreateInvoice(`{"amount_wei":"` + wei + `"}`)
	require.EqualValues(t, 1337, ia.ChainID)
	require.EqualValues(t, 1338, ib.ChainID)
	require.Contains(t, ib.PaymentURI, "@1338", "the payment request names chain 1338")

	// Chain 1337's invoice's address, paid on chain 1338.
	b.Chain.Transfer(b.Chain.Accounts()[1], nil, ia.DepositAddress, big.NewInt(5e15))
	a.Chain.Pay(ia.PaymentURI)
	b.Chain.Pay(ib.PaymentURI)
	for _, c := range []struct {
		env *evmpaytest.Env
		inv store.Invoice
	}{{a, ia}, {b, ib}} {
		c.env.Chain.Mine(13)
		got := c.env.WaitInvoice(c.inv.ID, store.StatusSettled)
		require.Equal(t, wei, got.PaidWei.String(), "chain %d's invoice: its own payment only", c.inv.ChainID)
		txs, err := st.Chain(c.inv.ChainID).ListSweepTxsByInvoice(context.Background(), c.inv.ID)
		require.NoError(t, err)
		require.NotEmpty(t, txs)
		// The sweep wallet's fundings on this chain: its nonces 0, 1, …
		// (a second one when the base fee rose past the first's cap
		// before the sweep was signed, as it does on a loaded machine).
		var fundings []uint64
		for _, tx := range txs {
			require.Equal(t, c.inv.ChainID, tx.ChainID, "swept on the invoice's chain")
			if tx.Kind == store.SweepTxFunding {
				fundings = append(fundings, tx.Nonce)
			}
		}
		require.NotEmpty(t, fundings)
		for i, n := range fundings {
			require.EqualValues(t, i, n, "the sweep wallet's nonces on chain %d start at 0, one sequence per chain: %v",
				c.inv.ChainID, fundings)
		}
	}
	ps, err := st.ListPaymentsByInvoice(context.Background(), ia.ID)
	require.NoError(t, err)
	require.Len(t, ps, 2, "the wrong-network payment is recorded beside the invoice's own")
	wrongNet := 0
	for _, p := range ps {
		if p.WrongNetwork {
			wrongNet++
			require.EqualValues(t, 1338, p.ChainID, "recorded on the chain it arrived on")
			require.False(t, p.Counted())
		}
	}
	require.Equal(t, 1, wrongNet)

	// Each chain's ledger against that chain's balances.
	for _, env := range []*evmpaytest.Env{a, b} {
		r, err := sweep.NewReconciler(env.Store, env.Chain.Client(), sweep.ReconcileConfig{})
		require.NoError(t, err)
		rec, err := r.Reconcile(context.Background(), 0)
		require.NoError(t, err)
		for _, w := range rec.Wallets {
			t.Logf("chain %d: %s %s ledger %s chain %s ok=%v", env.Chain.ID(), w.Role, w.Address, w.Ledger, w.Chain, w.OK)
		}
		require.True(t, rec.OK, "chain %d's ledger reconciles", env.Chain.ID())
	}
}
