package dashboard

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// Payment links: a reusable public link (/pay/<slug>) that makes an
// invoice per visit through the Go API — at a fixed price (in an asset or
// a fiat currency) or for an amount the payer enters within bounds — and
// sends the payer to the checkout page.

type linkView struct {
	store.PaymentLink
	URL      string
	Invoices int
	Paid     []string
}

func (d *Dashboard) linkURL(slug string) string {
	return d.base.Scheme + "://" + d.base.Host + d.url("/pay/"+slug)
}

func (d *Dashboard) handleLinks(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	ctx := r.Context()
	ls, err := d.st.ListPaymentLinks(ctx, s.Principal.Merchant.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	var out []linkView
	for _, l := range ls {
		v := linkView{PaymentLink: l, URL: d.linkURL(l.Slug)}
		ids, err := d.st.ListPaymentLinkInvoices(ctx, l.ID, 1000)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		v.Invoices = len(ids)
		taken := map[string]store.Amount{}
		assets := map[string]store.Asset{}
		for _, id := range ids {
			inv, err := d.api.Invoice(ctx, s.Principal.Merchant.ID, id)
			if errors.Is(err, store.ErrNotFound) {
				continue // archived
			}
			if err != nil {
				d.fail(w, r, err)
				return
			}
			if inv.Status == store.StatusConfirmed || inv.Status == store.StatusSettled || inv.Status == store.StatusPaid {
				taken[inv.Asset.Symbol] = add(taken[inv.Asset.Symbol], inv.Paid)
				assets[inv.Asset.Symbol] = inv.Asset
			}
		}
		for sym, a := range taken {
			v.Paid = append(v.Paid, assets[sym].Format(a)+" "+sym)
		}
		out = append(out, v)
	}
	d.show(w, r, "links", "links", map[string]any{"Links": out, "Assets": d.api.Assets()})
}

func (d *Dashboard) handleCreateLink(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	now := d.now()
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	l := store.PaymentLink{MerchantID: s.Principal.Merchant.ID, Slug: base64.RawURLEncoding.EncodeToString(b),
		Name: strings.TrimSpace(r.PostFormValue("name")), Description: strings.TrimSpace(r.PostFormValue("description")),
		Active: true, CreatedAt: now, UpdatedAt: now}
	if l.Name == "" || len(l.Name) > 200 || len(l.Description) > 1000 {
		d.fail(w, r, problem.OfField(problem.CodeInvalidField, "name", "a name of 1 to 200 bytes"))
		return
	}
	switch r.PostFormValue("pricing") {
	case "fiat":
		f, err := store.ParseFiat(strings.TrimSpace(r.PostFormValue("amount")), r.PostFormValue("currency"))
		if err != nil {
			d.fail(w, r, problem.OfField(problem.CodeInvalidAmount, "amount", err.Error()))
			return
		}
		l.PriceAmount, l.PriceCurrency = f.Amount(), f.Currency.Code
	case "open":
		a, err := d.asset(r.PostFormValue("asset"))
		if err != nil {
			d.fail(w, r, err)
			return
		}
		lo, err1 := a.Parse(strings.TrimSpace(r.PostFormValue("min")))
		hi, err2 := a.Parse(strings.TrimSpace(r.PostFormValue("max")))
		if err1 != nil || err2 != nil || lo.IsZero() || lo.Cmp(hi) > 0 {
			d.fail(w, r, problem.OfField(problem.CodeInvalidAmount, "min", "a minimum and a maximum, 0 < min ≤ max"))
			return
		}
		l.Asset, l.MinAmount, l.MaxAmount = a.Symbol, &lo, &hi
	default:
		a, err := d.asset(r.PostFormValue("asset"))
		if err != nil {
			d.fail(w, r, err)
			return
		}
		amt, err := a.Parse(strings.TrimSpace(r.PostFormValue("amount")))
		if err != nil || amt.IsZero() {
			d.fail(w, r, problem.OfField(problem.CodeInvalidAmount, "amount", "a positive amount of the asset"))
			return
		}
		l.Asset, l.Amount = a.Symbol, &amt
	}
	if err := d.st.CreatePaymentLink(r.Context(), &l); err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "payment_link.create", "payment link "+strconv.FormatInt(l.ID, 10), l.Name)
	d.redirect(w, r, "/links", "link_created")
}

// asset finds an accepted asset by symbol ("" or the native symbol: the
// native coin).
func (d *Dashboard) asset(sym string) (store.Asset, error) {
	as := d.api.Assets()
	for _, a := range as {
		if strings.EqualFold(a.Symbol, sym) || (sym == "" && a.IsNative()) {
			return a, nil
		}
	}
	return store.Asset{}, problem.OfField(problem.CodeUnknownAsset, "asset", "not an asset this service accepts")
}

func (d *Dashboard) handleLinkActive(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	active := r.PostFormValue("active") == "true"
	if err := d.st.SetPaymentLinkActive(r.Context(), s.Principal.Merchant.ID, pathID(r), active, d.now()); err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "payment_link.active", "payment link "+r.PathValue("id"), strconv.FormatBool(active))
	d.redirect(w, r, "/links", "saved")
}

// The payer's side.

func (d *Dashboard) payLink(r *http.Request) (store.PaymentLink, store.Asset, error) {
	l, err := d.st.GetPaymentLinkBySlug(r.Context(), r.PathValue("slug"))
	if err != nil {
		return l, store.Asset{}, err
	}
	if !l.Active {
		return l, store.Asset{}, store.ErrNotFound
	}
	var a store.Asset
	if l.PriceCurrency == "" {
		if a, err = d.asset(l.Asset); err != nil {
			return l, a, err
		}
	}
	return l, a, nil
}

func (d *Dashboard) handlePayPage(w http.ResponseWriter, r *http.Request) {
	l, a, err := d.payLink(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	m, err := d.api.Owner(r.Context(), l.MerchantID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	v := map[string]any{"Link": l, "Asset": a, "Merchant": m.Merchant.Name}
	if l.Amount != nil {
		v["Amount"] = a.Format(*l.Amount)
	}
	if l.MinAmount != nil {
		v["Min"], v["Max"] = a.Format(*l.MinAmount), a.Format(*l.MaxAmount)
	}
	d.show(w, r, "pay", "pay_title", v)
}

// handlePay makes the visit's invoice, as the merchant's own key (the
// payer is nobody's user), and sends the payer to its checkout page.
func (d *Dashboard) handlePay(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if ok, _ := d.limits.allow(d.clientAddr(r), d.now()); !ok {
		d.fail(w, r, problem.Of(problem.CodeRateLimited, "too many payments started from this address; retry in a minute"))
		return
	}
	l, a, err := d.payLink(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	owner, err := d.api.Owner(ctx, l.MerchantID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	p := invoice.InvoiceParams{Description: l.Name, OrderID: "link-" + l.Slug}
	switch {
	case l.PriceCurrency != "":
		p.Price = &invoice.Price{Amount: l.PriceAmount, Currency: l.PriceCurrency}
	case l.Amount != nil:
		p.Asset, p.Amount = a.Symbol, l.Amount
	default:
		amt, err := a.Parse(strings.TrimSpace(r.PostFormValue("amount")))
		if err != nil || amt.Cmp(*l.MinAmount) < 0 || amt.Cmp(*l.MaxAmount) > 0 {
			pd := d.data(r, "pay", "pay_title", map[string]any{"Link": l, "Asset": a, "Merchant": owner.Merchant.Name,
				"Min": a.Format(*l.MinAmount), "Max": a.Format(*l.MaxAmount)})
			pd.Error = pd.L.T("pay_amount_bounds", a.Format(*l.MinAmount), a.Format(*l.MaxAmount), a.Symbol)
			d.render(w, r, http.StatusBadRequest, pd)
			return
		}
		p.Asset, p.Amount = a.Symbol, &amt
	}
	created, err := d.api.CreateInvoice(ctx, owner, formKey(), p)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if err := d.st.AddPaymentLinkInvoice(ctx, l.ID, created.ID); err != nil {
		d.logError(ctx, "payment link invoice", err)
	}
	d.audit(ctx, l.MerchantID, nil, "payer", "payment_link.invoice", "invoice "+strconv.FormatInt(created.ID, 10),
		"payment link "+strconv.FormatInt(l.ID, 10))
	http.Redirect(w, r, created.CheckoutURL, http.StatusSeeOther)
}
