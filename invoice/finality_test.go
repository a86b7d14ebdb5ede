package invoice_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
)

func tagFinality(c *invoice.Config) { c.Finality = store.FinalityTag }

// Under tag finality a payment may be refunded once its block is at or
// below the finalized block the indexer recorded. Above it, or with none
// recorded, the refund is refused exactly as a refund of a payment without
// its confirmations is under depth finality.
func TestRefund_TagFinality_PaymentAboveTheFinalizedBlock_RefusedLikeAnUnconfirmedOne(t *testing.T) {
	t.Parallel()
	for name, st := range map[string]func(t *testing.T) store.Store{
		"postgres": func(t *testing.T) store.Store { return newPostgres(t) },
		"sqlite":   newSQLite,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			one := `{"amount":"1","destination":"` + payer.Hex() + `"}`

			// Depth: paid in block 10, indexed head 20 (10 < 12 confirmations).
			depth := newEnvOn(t, st(t))
			dm := depth.newMerchant()
			dinv := depth.mustCreate(dm.APIKey, "d", `{"amount_wei":"1000000000000000000"}`)
			depth.paid(dinv.ID, "1000000000000000000", 10, nil, false, false)
			depth.chainAt(20)
			unconfirmed := depth.refund(dm.APIKey, dinv.ID, "r", one)
			requireProblem(t, unconfirmed, http.StatusUnprocessableEntity, "refund_exceeds_received", "amount")

			// Tag: paid in block 10, indexed head 30.
			e := newEnvOn(t, st(t), tagFinality)
			m := e.newMerchant()
			inv := e.paidInvoice(m, "1000000000000000000")
			res := e.refund(m.APIKey, inv.ID, "r0", one)
			requireProblem(t, res, http.StatusUnprocessableEntity, "refund_exceeds_received", "amount")
			require.Contains(t, res.json(t)["detail"], "received (in finalized blocks) 0 ")
			requireProblem(t, e.refund(m.APIKey, inv.ID, "f0", `{"reason":"full","destination":"`+payer.Hex()+`"}`),
				http.StatusUnprocessableEntity, "nothing_to_refund", "")

			require.NoError(t, e.st.SetFinalizedBlock(ctx, 9))
			requireProblem(t, e.refund(m.APIKey, inv.ID, "r1", one), http.StatusUnprocessableEntity, "refund_exceeds_received", "amount")

			require.NoError(t, e.st.SetFinalizedBlock(ctx, 10))
			ok := e.refund(m.APIKey, inv.ID, "r2", one)
			require.Equal(t, http.StatusCreated, ok.Status, "%s", ok.Body)
		})
	}
}

// The public read under tag finality reports, like instant, no
// confirmations to count: 0 of 0, whatever the blocks on top.
func TestPublicInvoice_TagFinality_NoConfirmationsToCount(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, newSQLite(t), tagFinality)
	m := e.newMerchant()
	inv := e.paidInvoice(m, "1000000000000000000")
	require.NoError(t, e.st.SetFinalizedBlock(ctx, 10))
	body := e.do("GET", "/v1/public/invoice", inv.LookupToken, "").json(t)
	require.EqualValues(t, 0, body["confirmations"])
	require.EqualValues(t, 0, body["confirmations_required"])

	_, err := invoice.New(e.st, e.creds, testDeriver(t), chainID, invoice.Config{Finality: store.FinalityTag, Confirmations: 12})
	require.ErrorContains(t, err, "takes no confirmations")
}
