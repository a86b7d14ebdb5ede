package invoice_test

import (
	"fmt"
	"math/big"
	"net/http"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
)

func TestCreateInvoice_RedirectURL_HTTPSOnlyStoredAndShown(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		inv := e.mustCreate(m.APIKey, "ok", `{"amount_wei":"1","redirect_url":"https://shop.example/orders/7?paid=1#top"}`)
		got := e.do("GET", fmt.Sprintf("/v1/invoices/%d", inv.ID), m.APIKey, "").json(t)
		require.Equal(t, "https://shop.example/orders/7?paid=1#top", got["redirect_url"])
		require.Equal(t, "https://shop.example/orders/7?paid=1#top", e.do("GET", "/v1/public/invoice", inv.LookupToken, "").json(t)["redirect_url"])

		without := e.mustCreate(m.APIKey, "none", `{"amount_wei":"1"}`)
		require.NotContains(t, e.do("GET", "/v1/public/invoice", without.LookupToken, "").json(t), "redirect_url")

		for i, bad := range []string{
			`"http://shop.example/back"`, `"javascript:alert(1)"`, `"/orders/7"`, `"https://user:pw@shop.example/"`,
			`"https://"`, `"https://:443/"`, `"https://:8443/back"`, `"https://shop.example/a b"`, `"data:text/html,hi"`, `"http://127.0.0.1:3000/back"`, `7`,
		} {
			res := e.createInvoice(m.APIKey, fmt.Sprint("bad-", i), `{"amount_wei":"1","redirect_url":`+bad+`}`)
			requireProblem(t, res, http.StatusBadRequest, "invalid_field", "redirect_url")
		}
	})
}

func TestCreateInvoice_RedirectURL_LoopbackHTTPWhenAllowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *invoice.Config) { c.AllowLoopbackHTTPRedirect = true })
	m := e.newMerchant()
	for i, ok := range []string{"http://127.0.0.1:3000/back", "http://localhost/x", "http://[::1]:8080/", "https://shop.example/"} {
		res := e.createInvoice(m.APIKey, fmt.Sprint("ok-", i), `{"amount_wei":"1","redirect_url":"`+ok+`"}`)
		require.Equal(t, http.StatusCreated, res.Status, "%s: %s", ok, res.Body)
	}
	for i, bad := range []string{"http://10.0.0.1/back", "http://shop.example/", "http://localhost.shop.example/"} {
		res := e.createInvoice(m.APIKey, fmt.Sprint("bad-", i), `{"amount_wei":"1","redirect_url":"`+bad+`"}`)
		requireProblem(t, res, http.StatusBadRequest, "invalid_field", "redirect_url")
	}
}

func TestCreateInvoice_CheckoutURL_ConfiguredPageWithTokenFragment(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *invoice.Config) { c.CheckoutURL = "https://checkout.shop.example/pay" })
	m := e.newMerchant()
	res := e.createInvoice(m.APIKey, "k", oneEther)
	body := res.json(t)
	require.Equal(t, "https://checkout.shop.example/pay#"+body["lookup_token"].(string), body["checkout_url"])
	// Replays carry it too: they are the first response, byte for byte.
	again := e.createInvoice(m.APIKey, "k", oneEther)
	require.Equal(t, res.Body, again.Body)
}

func TestPublicInvoice_Underpaid_RemainderAndAURIForExactlyIt(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		inv := e.mustCreate(m.APIKey, "k", `{"amount_wei":"1500000000000000000"}`)
		stored, err := e.st.GetInvoice(ctx, inv.ID)
		require.NoError(t, err)
		stored.PaidWei = store.MustParseAmount("400000000000000001")
		stored.Underpaid = true
		require.NoError(t, e.st.UpdateInvoice(ctx, &stored))

		body := e.do("GET", "/v1/public/invoice", inv.LookupToken, "").json(t)
		require.Equal(t, "1099999999999999999", body["remaining_wei"])
		want := fmt.Sprintf("ethereum:%s@%d?value=1099999999999999999", inv.DepositAddress.Hex(), chainID)
		require.Equal(t, want, body["remaining_payment_uri"])
		require.Equal(t, inv.PaymentURI, body["payment_uri"], "the original request stays")
		require.Equal(t, true, body["underpaid"])

		// The QR code follows what is due now.
		svg := e.do("GET", "/v1/public/invoice/qr.svg", inv.LookupToken, "")
		require.Equal(t, http.StatusOK, svg.Status)
		require.Equal(t, "image/svg+xml", svg.Header.Get("Content-Type"))
		require.Equal(t, "no-store", svg.Header.Get("Cache-Control"))
		wantSVG, err := invoice.QRSVG(want)
		require.NoError(t, err)
		require.Equal(t, wantSVG, svg.Body)

		// Paid in full (or more): nothing remains.
		stored.PaidWei = store.MustParseAmount("1600000000000000000")
		stored.Underpaid, stored.Overpaid, stored.Status = false, true, store.StatusPaid
		require.NoError(t, e.st.UpdateInvoice(ctx, &stored))
		body = e.do("GET", "/v1/public/invoice", inv.LookupToken, "").json(t)
		require.Equal(t, "0", body["remaining_wei"])
		require.NotContains(t, body, "remaining_payment_uri")
		require.Equal(t, true, body["overpaid"])
		wantSVG, err = invoice.QRSVG(inv.PaymentURI)
		require.NoError(t, err)
		require.Equal(t, wantSVG, e.do("GET", "/v1/public/invoice/qr.svg", inv.LookupToken, "").Body)

		requireProblem(t, e.do("GET", "/v1/public/invoice/qr.svg", "", ""), 401, "unauthorized", "")
		requireProblem(t, e.do("GET", "/v1/public/invoice/qr.svg", "AAAAAAAAAAAAAAAAAAAAAA", ""), 401, "unauthorized", "")
	})
}

func TestPublicInvoice_Confirmations_BlocksOnTopOfTheLatestPayment(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		inv := e.mustCreate(m.APIKey, "k", `{"amount_wei":"1000"}`)
		conf := func() any { return e.do("GET", "/v1/public/invoice", inv.LookupToken, "").json(t)["confirmations"] }
		require.EqualValues(t, 0, conf(), "no payment")

		block := func(n uint64) {
			require.NoError(t, e.st.InsertBlocks(ctx, []store.Block{{Number: n, Hash: common.BigToHash(new(big.Int).SetUint64(n + 1000)),
				Timestamp: n, IndexedAt: t0}}, nil))
		}
		pay := func(n uint64, wei string) {
			require.NoError(t, e.st.InsertPayment(ctx, &store.Payment{InvoiceID: inv.ID, TxHash: common.BigToHash(new(big.Int).SetUint64(n)),
				LogIndex: store.NativeLogIndex, BlockNumber: n, AmountWei: store.MustParseAmount(wei), CreatedAt: t0}))
		}
		stored, err := e.st.GetInvoice(ctx, inv.ID)
		require.NoError(t, err)
		block(100)
		pay(100, "400")
		stored.PaidWei, stored.Underpaid = store.MustParseAmount("400"), true
		require.NoError(t, e.st.UpdateInvoice(ctx, &stored))
		require.EqualValues(t, 0, conf(), "inclusion alone is no confirmation")
		block(103)
		require.EqualValues(t, 3, conf())
		block(104)
		pay(104, "600")
		stored.PaidWei, stored.Underpaid, stored.Status = store.MustParseAmount("1000"), false, store.StatusPaid
		require.NoError(t, e.st.UpdateInvoice(ctx, &stored))
		require.EqualValues(t, 0, conf(), "counted from the latest payment")
		block(110)
		require.EqualValues(t, 6, conf())
		block(200)
		require.EqualValues(t, 12, conf(), "at most the threshold")
		stored.Status = store.StatusConfirmed
		require.NoError(t, e.st.UpdateInvoice(ctx, &stored))
		require.EqualValues(t, 12, conf())
	})
}
