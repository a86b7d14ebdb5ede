package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/dashboard"
	"github.com/evmpay/evmpay/hosts/evmpaytest"
	"github.com/evmpay/evmpay/store"
)

// A payment link paid end to end on a real (simulated) chain with every
// worker running (hosts/evmpaytest): the merchant makes the link in the
// dashboard, a payer opens it and is sent to the checkout page of a new
// invoice, pays its payment URI, and the links page shows what the link
// has taken once the invoice is confirmed.
func TestPaymentLink_PaidEndToEndOnTheChain(t *testing.T) {
	t.Parallel()
	env := evmpaytest.New(t, evmpaytest.Config{})
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	public := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	d, err := dashboard.New(env.Invoices, env.Store, dashboard.Config{PublicURL: public + "/dashboard", SecretKey: testSecretKey})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/dashboard/", d)
	srv.Config.Handler = mux
	_, err = d.EnsureUser(ctx, env.Merchant.ID, "owner@example.com", store.RoleOwner, testPassword)
	require.NoError(t, err)
	b := newBrowser(t, srv.URL)
	b.signIn("owner@example.com")

	p := b.post("/dashboard/links", url.Values{"name": {"Espresso"}, "pricing": {"fixed"}, "amount": {"0.002"}, "asset": {"ETH"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	links := b.get("/dashboard/links")
	m := regexp.MustCompile(`/dashboard/pay/([A-Za-z0-9_-]+)`).FindStringSubmatch(links.Body)
	require.NotNil(t, m)

	payer := newBrowser(t, srv.URL)
	page := payer.get("/dashboard/pay/" + m[1])
	require.Equal(t, http.StatusOK, page.Status)
	require.Contains(t, page.Body, "0.002 ETH")
	p = payer.post("/dashboard/pay/"+m[1], nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Contains(t, p.Location, "/checkout#", "to the checkout page, the lookup token in the fragment")

	l, err := env.Store.GetPaymentLinkBySlug(ctx, m[1])
	require.NoError(t, err)
	ids, err := env.Store.ListPaymentLinkInvoices(ctx, l.ID, 10)
	require.NoError(t, err)
	require.Len(t, ids, 1, "one visit, one invoice")
	inv, err := env.Invoices.Invoice(ctx, env.Merchant.ID, ids[0])
	require.NoError(t, err)
	require.Equal(t, "2000000000000000", inv.Amount.String())
	require.Equal(t, "Espresso", inv.Description)

	env.Chain.Pay(inv.PaymentURI)
	env.WaitInvoice(inv.ID, store.StatusConfirmed)
	links = b.get("/dashboard/links")
	require.Contains(t, links.Body, "0.002 ETH", "what the link has taken")
	require.Regexp(t, `<td class="num">1</td>`, links.Body, "one invoice")

	// A disabled link makes no invoice.
	p = b.post("/dashboard/links/"+itoa(l.ID)+"/active", url.Values{"active": {"false"}})
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Equal(t, http.StatusNotFound, payer.post("/dashboard/pay/"+m[1], nil).Status)
}

// A refund above the approval threshold, on a paid and confirmed invoice:
// an accountant makes it, an approver (another person) approves it, and
// the audit log says who did which.
func TestRefund_AboveTheThreshold_MadeByOneUserApprovedByAnother(t *testing.T) {
	t.Parallel()
	env := evmpaytest.New(t, evmpaytest.Config{})
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	public := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	d, err := dashboard.New(env.Invoices, env.Store, dashboard.Config{PublicURL: public + "/dashboard", SecretKey: testSecretKey})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/dashboard/", d)
	srv.Config.Handler = mux
	for _, u := range [][2]string{{"acc@example.com", store.RoleAccountant}, {"boss@example.com", store.RoleApprover}} {
		_, err := d.EnsureUser(ctx, env.Merchant.ID, u[0], u[1], testPassword)
		require.NoError(t, err)
	}
	th := store.NewAmount(1000)
	require.NoError(t, env.Store.PutPayoutPolicy(ctx, store.PayoutPolicy{MerchantID: env.Merchant.ID,
		Assets: []store.AssetPolicy{{ApprovalThreshold: &th}}}))
	inv := env.CreateInvoice(`{"amount_wei": "500000000000000000"}`)
	rcpt := env.Chain.Pay(inv.PaymentURI)
	env.WaitInvoice(inv.ID, store.StatusConfirmed)

	acc := newBrowser(t, srv.URL)
	acc.signIn("acc@example.com")
	ov := acc.get("/dashboard/")
	require.Equal(t, http.StatusOK, ov.Status)
	require.Regexp(t, `<th scope="row">ETH</th><td class="num">0.5</td><td class="num">0.5</td>`, ov.Body,
		"today's and this month's volume, from the roll-up")
	require.Contains(t, ov.Body, `<title>`+time.Now().UTC().Format(time.DateOnly)+`: 0.5</title>`, "today's bar in the chart")
	found := acc.get("/dashboard/invoices?q=" + rcpt.TxHash.Hex())
	require.Equal(t, http.StatusOK, found.Status)
	require.Contains(t, found.Body, `href="/dashboard/invoices/`+itoa(inv.ID)+`"`, "found by the paying transaction's hash")
	page := acc.get("/dashboard/invoices/" + itoa(inv.ID))
	require.Equal(t, http.StatusOK, page.Status)
	require.Contains(t, page.Body, "Payment", "the payment is on the timeline")
	p := acc.post("/dashboard/invoices/"+itoa(inv.ID)+"/refunds", url.Values{"key": {formKey(t, page.Body)}, "reason": {"partial"},
		"amount": {"0.1"}, "destination": {"0x00000000000000000000000000000000000000bb"}, "paid_by": {"service"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	list := acc.get("/dashboard/refunds")
	id := obRe.FindStringSubmatch(list.Body)[1]
	require.Contains(t, list.Body, "AWAITING_APPROVAL")

	boss := newBrowser(t, srv.URL)
	boss.signIn("boss@example.com")
	require.Equal(t, http.StatusSeeOther, boss.post("/dashboard/outbounds/"+id+"/approve", nil).Status)
	require.Contains(t, boss.get("/dashboard/refunds").Body, "boss@example.com", "approved by, on the list")

	es, err := env.Store.ListAudit(ctx, store.AuditFilter{MerchantID: env.Merchant.ID})
	require.NoError(t, err)
	var trail []string
	for _, a := range es {
		if a.Subject == "refund "+id {
			trail = append(trail, a.Actor+" "+a.Action)
		}
	}
	require.Equal(t, []string{"boss@example.com refund.approve", "acc@example.com refund.create"}, trail)
}
