package invoice_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// The Go API and the HTTP API are one: the same requests, made through
// both, give the same records and the same errors (codes and fields).
func TestGoAPI_SameCasesAsHTTP_SameRecordsAndErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	other := e.newMerchant()
	owner, err := e.svc.Owner(ctx, m.ID)
	require.NoError(t, err)
	amt := func(s string) *store.Amount { a := store.MustParseAmount(s); return &a }

	invoices := []struct {
		name   string
		params invoice.InvoiceParams
		body   string
		code   string // "" for a success
		field  string
	}{
		{"native", invoice.InvoiceParams{Amount: amt("1500000000000000000"), OrderID: "o-1"},
			`{"amount":"1500000000000000000","order_id":"o-1"}`, "", ""},
		{"formatted", invoice.InvoiceParams{Asset: "ETH", AmountFormatted: "0.25", Description: "two lines\nok"},
			`{"asset":"ETH","amount_formatted":"0.25","description":"two lines\nok"}`, "", ""},
		{"zero", invoice.InvoiceParams{Amount: amt("0")}, `{"amount":"0"}`, "invalid_amount", "amount"},
		{"unknown asset", invoice.InvoiceParams{Asset: "DOGE", Amount: amt("1")}, `{"asset":"DOGE","amount":"1"}`, "unknown_asset", "asset"},
		{"both amounts", invoice.InvoiceParams{Amount: amt("1"), AmountFormatted: "1"}, `{"amount":"1","amount_formatted":"1"}`, "invalid_field", "amount"},
		{"no fiat pricing", invoice.InvoiceParams{Price: &invoice.Price{Amount: "1.00", Currency: "EUR"}},
			`{"price":{"amount":"1.00","currency":"EUR"}}`, "unsupported_currency", "price"},
		{"bad redirect", invoice.InvoiceParams{Amount: amt("1"), RedirectURL: "javascript:alert(1)"},
			`{"amount":"1","redirect_url":"javascript:alert(1)"}`, "invalid_field", "redirect_url"},
		{"bad metadata", invoice.InvoiceParams{Amount: amt("1"), Metadata: json.RawMessage(`[1]`)},
			`{"amount":"1","metadata":[1]}`, "invalid_field", "metadata"},
	}
	for i, c := range invoices {
		goKey, httpKey := fmt.Sprintf("go-%d", i), fmt.Sprintf("http-%d", i)
		got, goErr := e.svc.CreateInvoice(ctx, owner, goKey, c.params)
		res := e.createInvoice(m.APIKey, httpKey, c.body)
		if c.code != "" {
			requireProblem(t, res, res.Status, c.code, c.field)
			var pe *problem.Problem
			require.ErrorAs(t, goErr, &pe, c.name)
			require.Equal(t, c.code, pe.Code, c.name)
			require.Equal(t, c.field, pe.Field, c.name)
			require.Equal(t, res.Status, pe.Status, c.name)
			require.Equal(t, c.code, invoice.ErrorCode(goErr))
			continue
		}
		require.NoError(t, goErr, c.name)
		require.Equal(t, http.StatusCreated, res.Status, "%s: %s", c.name, res.Body)
		var viaHTTP invoice.View
		require.NoError(t, json.Unmarshal(res.Body, &viaHTTP))
		require.NotEqual(t, viaHTTP.ID, got.ID)
		require.NotEqual(t, viaHTTP.DepositAddress, got.DepositAddress, "each its own address")
		require.NotEmpty(t, got.LookupToken)
		require.Contains(t, got.CheckoutURL, "#"+got.LookupToken)
		// The same record, but for what is each invoice's own.
		a, b := got.View, viaHTTP
		for _, v := range []*invoice.View{&a, &b} {
			v.ID, v.DepositAddress, v.PaymentURI, v.QRPNGURL, v.QRSVGURL, v.LookupToken, v.CheckoutURL = 0, store.ChecksumAddress{}, "", "", "", "", ""
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		require.JSONEq(t, string(jb), string(ja), c.name)
		stored, err := e.svc.Invoice(ctx, m.ID, got.ID)
		require.NoError(t, err)
		require.Equal(t, got.Amount, stored.Amount)

		// Replays: the same key and parameters answer the first answer;
		// other parameters are refused, as over HTTP.
		again, err := e.svc.CreateInvoice(ctx, owner, goKey, c.params)
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.Equal(t, got.ID, again.ID)
		require.Equal(t, got.LookupToken, again.LookupToken)
		other := c.params
		other.OrderID = "another"
		_, err = e.svc.CreateInvoice(ctx, owner, goKey, other)
		require.Equal(t, "idempotency_key_reused", invoice.ErrorCode(err))
	}
	_, err = e.svc.CreateInvoice(ctx, owner, "", invoice.InvoiceParams{Amount: amt("1")})
	require.Equal(t, "idempotency_key_missing", invoice.ErrorCode(err))

	// Listing: the same page, the same errors.
	page, err := e.svc.ListInvoices(ctx, m.ID, invoice.InvoiceQuery{Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Data, 2)
	require.True(t, page.HasMore)
	res := e.do("GET", "/v1/invoices?limit=2", m.APIKey, "")
	require.Equal(t, http.StatusOK, res.Status)
	var httpPage invoice.InvoicePage
	require.NoError(t, json.Unmarshal(res.Body, &httpPage))
	require.Equal(t, page.Data[0].ID, httpPage.Data[0].ID)
	require.Equal(t, *page.NextCursor, *httpPage.NextCursor)
	_, err = e.svc.ListInvoices(ctx, m.ID, invoice.InvoiceQuery{Statuses: []string{"LOST"}})
	require.Equal(t, "invalid_parameter", invoice.ErrorCode(err))
	requireProblem(t, e.do("GET", "/v1/invoices?status=LOST", m.APIKey, ""), http.StatusBadRequest, "invalid_parameter", "status")
	_, err = e.svc.ListInvoices(ctx, m.ID, invoice.InvoiceQuery{Limit: 101})
	require.Equal(t, "invalid_parameter", invoice.ErrorCode(err))
	requireProblem(t, e.do("GET", "/v1/invoices?limit=101", m.APIKey, ""), http.StatusBadRequest, "invalid_parameter", "limit")

	// Another merchant's invoice is not found, through either.
	_, err = e.svc.Invoice(ctx, other.ID, page.Data[0].ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	requireProblem(t, e.do("GET", fmt.Sprintf("/v1/invoices/%d", page.Data[0].ID), other.APIKey, ""), http.StatusNotFound, "not_found", "")
}

// Refunds and payouts through the Go API: the same checks (what was
// received, approvals by a second principal), the same records.
func TestGoAPI_RefundsAndPayouts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	owner, err := e.svc.Owner(ctx, m.ID)
	require.NoError(t, err)
	inv := e.paidInvoice(m, "1000000000000000000")
	amt := func(s string) *store.Amount { a := store.MustParseAmount(s); return &a }
	dest := common.HexToAddress("0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65")

	_, err = e.svc.CreateRefund(ctx, owner, inv.ID, "too-much", invoice.RefundParams{Amount: amt("1000000000000000001"), Destination: &dest})
	require.Equal(t, "refund_exceeds_received", invoice.ErrorCode(err))
	res := e.refund(m.APIKey, inv.ID, "too-much-http", `{"amount":"1000000000000000001","destination":"`+dest.Hex()+`"}`)
	requireProblem(t, res, http.StatusUnprocessableEntity, "refund_exceeds_received", "amount")

	ref, err := e.svc.CreateRefund(ctx, owner, inv.ID, "part", invoice.RefundParams{Amount: amt("400000000000000000"), Destination: &dest, Reference: "ticket 9"})
	require.NoError(t, err)
	require.Equal(t, store.OutboundQueued, ref.Status)
	require.Equal(t, "ticket 9", ref.Reference)
	viaHTTP := e.do("GET", fmt.Sprintf("/v1/refunds/%d", ref.ID), m.APIKey, "")
	require.Equal(t, http.StatusOK, viaHTTP.Status)
	require.Equal(t, "400000000000000000", viaHTTP.json(t)["amount"])
	claim, err := e.svc.CreateRefund(ctx, owner, inv.ID, "claim", invoice.RefundParams{Amount: amt("1")})
	require.NoError(t, err)
	require.Equal(t, store.OutboundAwaitingDestination, claim.Status)
	require.NotEmpty(t, claim.ClaimURL, "a claim link, in the creating answer")
	got, err := e.svc.Refund(ctx, m.ID, claim.ID)
	require.NoError(t, err)
	require.Empty(t, got.ClaimURL, "and never again")

	// What is left: 1 coin less 0.4 less 1 wei, as the HTTP API counts.
	res = e.refund(m.APIKey, inv.ID, "rest", `{"reason":"full","destination":"`+dest.Hex()+`"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, "599999999999999999", res.json(t)["amount"])

	// An approval needs a second principal.
	_, err = e.svc.CreateRefund(ctx, owner, inv.ID, "x", invoice.RefundParams{Reason: "nonsense"})
	require.Equal(t, "invalid_field", invoice.ErrorCode(err))
	require.Equal(t, http.StatusOK, e.do("PUT", "/v1/merchant/payout-settings", m.APIKey, `{"assets":[{"asset":"ETH","approval_threshold":"10"}]}`).Status)
	p, err := e.svc.CreatePayout(ctx, owner, "big", invoice.PayoutParams{Amount: amt("11"), Destination: dest})
	require.NoError(t, err)
	require.Equal(t, store.OutboundAwaitingApproval, p.Status)
	_, err = e.svc.Approve(ctx, owner, p.ID)
	require.Equal(t, "approval_same_key", invoice.ErrorCode(err))
	_, approverID := e.scopedKey(m.APIKey, store.ScopeApprove)
	approver := owner
	approver.KeyID = approverID
	ok, err := e.svc.Approve(ctx, approver, p.ID)
	require.NoError(t, err)
	require.Equal(t, store.OutboundQueued, ok.Status)
	_, err = e.svc.Cancel(ctx, owner, p.ID)
	require.NoError(t, err)
	_, err = e.svc.Cancel(ctx, owner, p.ID)
	require.Equal(t, "state_conflict", invoice.ErrorCode(err))

	page, err := e.svc.ListRefunds(ctx, m.ID, invoice.OutboundQuery{InvoiceID: inv.ID})
	require.NoError(t, err)
	require.Len(t, page.Data, 3)
	pays, err := e.svc.ListPayouts(ctx, m.ID, invoice.OutboundQuery{Status: store.OutboundCancelled})
	require.NoError(t, err)
	require.Len(t, pays.Data, 1)
	_, err = e.svc.Payout(ctx, m.ID+1000, p.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another merchant's")

	n := 0
	for entry, err := range e.svc.Ledger(ctx, m.ID, invoice.LedgerQuery{}) {
		require.NoError(t, err)
		require.Equal(t, "payment", entry.Kind)
		n++
	}
	require.Equal(t, 1, n)
}

// A host gets or creates its merchant by its own id at every start: no
// stored API key; it reads the webhook secret it verifies with.
func TestGoAPI_EnsureMerchant_OnceByExternalID(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		p := invoice.MerchantParams{Name: "Shop", SettlementAddress: common.HexToAddress("0xa0Ee7A142d267C1f36714E4a8F75612F20a79720")}
		const n = 6
		ids := make(chan int64, n)
		created := make(chan bool, n)
		errs := make(chan error, n)
		for range n {
			go func() {
				m, c, err := e.svc.EnsureMerchant(ctx, "shop-42", p)
				ids <- m.ID
				created <- c
				errs <- err
			}()
		}
		first, made := int64(0), 0
		for range n {
			require.NoError(t, <-errs)
			id := <-ids
			if first == 0 {
				first = id
			}
			require.Equal(t, first, id, "one merchant")
			if <-created {
				made++
			}
		}
		require.Equal(t, 1, made)
		owner, err := e.svc.Owner(ctx, first)
		require.NoError(t, err)
		inv, err := e.svc.CreateInvoice(ctx, owner, "k", invoice.InvoiceParams{AmountFormatted: "1"})
		require.NoError(t, err)
		require.Equal(t, "1000000000000000000", inv.Amount.String())
		secret, err := e.svc.WebhookSecret(ctx, first)
		require.NoError(t, err)
		require.Regexp(t, `^whsec_`, secret)
		_, _, err = e.svc.EnsureMerchant(ctx, "", p)
		require.ErrorIs(t, err, invoice.ErrInvalidMerchant)
	})
}
