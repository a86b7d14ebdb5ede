package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func tokenSweepTests() []test {
	return []test{
		{"Sweep_OneLivePullPerInvoice", testSweepTxOneLivePull},
	}
}

// A token sweep by permit pulls the tokens with a transferFrom sent by the
// sweep wallet (kind PULL): one live PULL per invoice and token, whatever
// the nonce.
func testSweepTxOneLivePull(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	other := newInvoice(t, st, m.ID)
	wallet, token := randAddr(), randAddr()
	first := newSweepTx(t, st, store.SweepTxPull, &inv.ID, wallet, token, 7, store.SweepTxSigned)
	dup := first
	dup.TxHash, dup.Nonce = randHash(), 8
	require.ErrorIs(t, st.CreateSweepTx(ctx, &dup), store.ErrConflict, "an invoice's tokens are never pulled twice")
	// Another invoice's pull from the same wallet, another token's, and
	// permits, are fine.
	newSweepTx(t, st, store.SweepTxPull, &other.ID, wallet, token, 9, store.SweepTxSigned)
	newSweepTx(t, st, store.SweepTxPull, &inv.ID, wallet, randAddr(), 12, store.SweepTxSigned)
	newSweepTx(t, st, store.SweepTxPermit, &inv.ID, wallet, token, 10, store.SweepTxSigned)

	first.Status = store.SweepTxFailed
	require.NoError(t, st.UpdateSweepTx(ctx, first))
	newSweepTx(t, st, store.SweepTxPull, &inv.ID, wallet, token, 11, store.SweepTxSigned)
}
