package dashboard

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/problem"
)

// The merchant's pages. Every read and action goes through the Go API of
// package invoice as the signed-in user's principal (role scopes, user
// id): what the dashboard shows and does is what the API does.

func pathID(r *http.Request) int64 {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0
	}
	return id
}

// formKey is a fresh idempotency key for a creating form: a form
// submitted twice (a double click, a reload) makes one object.
func formKey() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return "dash-" + base64.RawURLEncoding.EncodeToString(b)
}

// Overview.

type assetVolume struct {
	Asset        string
	Today, Month string
}

type overviewView struct {
	Volumes     []assetVolume
	FiatToday   []string
	Chart       chart
	Attention   []api.Invoice
	Approvals   []invoice.OutboundView
	FailedHooks int
	Capped      bool
}

// overviewScan bounds the recent invoices the overview reads for what
// needs attention and today's fiat totals; the volumes come from the
// store's daily roll-up (InvoiceVolumes), whatever the number of invoices.
const overviewScan = 100

func (d *Dashboard) handleOverview(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	ctx := r.Context()
	now := d.now()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	from := day.AddDate(0, 0, -29)
	if month.Before(from) {
		from = month
	}
	v := overviewView{}
	vols, err := d.st.InvoiceVolumes(ctx, s.Principal.Merchant.ID, from, day.AddDate(0, 0, 1))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	today, monthSum := map[string]store.Amount{}, map[string]store.Amount{}
	assets := map[string]store.Asset{}
	daily := map[string]map[string]store.Amount{} // asset → day → amount
	// With several chains an asset is named with its chain (USDC@1337):
	// two chains' native coins, or tokens of one symbol, are not summed.
	chains := d.severalChains()
	for _, vol := range vols {
		if vol.Paid.IsZero() {
			continue
		}
		a := d.chainAssetOf(vol.ChainID, vol.Token)
		sym := a.Symbol
		if chains {
			sym = fmt.Sprintf("%s@%d", a.Symbol, vol.ChainID)
		}
		assets[sym] = a
		if daily[sym] == nil {
			daily[sym] = map[string]store.Amount{}
		}
		k := vol.Day.Format(time.DateOnly)
		daily[sym][k] = add(daily[sym][k], vol.Paid)
		if !vol.Day.Before(month) {
			monthSum[sym] = add(monthSum[sym], vol.Paid)
		}
		if !vol.Day.Before(day) {
			today[sym] = add(today[sym], vol.Paid)
		}
	}
	fiatToday := map[string]store.Fiat{}
	q := invoice.InvoiceQuery{CreatedAfter: from, Limit: overviewScan}
	seen := 0
	for {
		page, err := d.api.ListInvoices(ctx, s.Principal.Merchant.ID, q)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		for _, inv := range page.Data {
			seen++
			if inv.NeedsAttention || inv.Underpaid || inv.PaidLate || inv.SweepStatus == "FAILED" {
				if len(v.Attention) < 20 {
					v.Attention = append(v.Attention, inv.Invoice)
				}
			}
			if inv.PaidValue != nil && !inv.CreatedAt.Before(day) {
				fiatToday[inv.PaidValue.Currency.Code] = addFiat(fiatToday[inv.PaidValue.Currency.Code], *inv.PaidValue)
			}
		}
		if !page.HasMore || seen >= overviewScan {
			v.Capped = page.HasMore
			break
		}
		q.Cursor = *page.NextCursor
	}
	syms := make([]string, 0, len(assets))
	for sym := range assets {
		syms = append(syms, sym)
	}
	sort.Strings(syms)
	for _, sym := range syms {
		a := assets[sym]
		v.Volumes = append(v.Volumes, assetVolume{Asset: sym, Today: a.Format(today[sym]), Month: a.Format(monthSum[sym])})
	}
	v.FiatToday = sortedFiat(fiatToday)
	v.Chart = dailyChart(day, 30, syms, assets, daily)
	for _, list := range []func() (invoice.OutboundPage, error){
		func() (invoice.OutboundPage, error) {
			return d.api.ListRefunds(ctx, s.Principal.Merchant.ID, invoice.OutboundQuery{Status: store.OutboundAwaitingApproval})
		},
		func() (invoice.OutboundPage, error) {
			return d.api.ListPayouts(ctx, s.Principal.Merchant.ID, invoice.OutboundQuery{Status: store.OutboundAwaitingApproval})
		},
	} {
		page, err := list()
		if err != nil {
			d.fail(w, r, err)
			return
		}
		v.Approvals = append(v.Approvals, page.Data...)
	}
	if ds, err := d.deliveries(r, "status=failed&limit=100"); err == nil {
		v.FailedHooks = len(ds.Data)
	}
	d.show(w, r, "overview", "overview", v)
}

// severalChains reports whether the service creates invoices on more
// than one chain: then the pages name an asset's or invoice's chain.
func (d *Dashboard) severalChains() bool { return len(d.api.ChainIDs()) > 1 }

// assetOf names a token (nil: the native coin) by the service's assets.
func (d *Dashboard) assetOf(token *common.Address) store.Asset {
	return findAsset(d.api.Assets(), token)
}

// chainAssetOf is assetOf among the assets of chain id (the first chain's
// when the API creates no invoices on it).
func (d *Dashboard) chainAssetOf(id uint64, token *common.Address) store.Asset {
	if as, ok := d.api.ChainAssets(id); ok {
		return findAsset(as, token)
	}
	return d.assetOf(token)
}

// findAsset is the asset of as with token (nil: the native coin), else
// one named by the token's address.
func findAsset(as []store.Asset, token *common.Address) store.Asset {
	for _, a := range as {
		if (token == nil && a.IsNative()) || (token != nil && a.Address != nil && *a.Address == *token) {
			return a
		}
	}
	if token == nil {
		return store.NativeAsset(api.DefaultNativeSymbol)
	}
	return store.Asset{Symbol: token.Hex(), Address: token}
}

func add(a, b store.Amount) store.Amount {
	s, ok := a.Add(b)
	if !ok {
		return a
	}
	return s
}

func addFiat(a, b store.Fiat) store.Fiat {
	if a.Currency.Code == "" {
		return b
	}
	a.Minor = add(a.Minor, b.Minor)
	return a
}

func sortedFiat(m map[string]store.Fiat) []string {
	var out []string
	for _, f := range m {
		out = append(out, f.String())
	}
	sort.Strings(out)
	return out
}

// Invoices.

type invoicesView struct {
	Page    invoice.InvoicePage
	Filter  url.Values
	Next    string
	CSV     string
	Assets  []store.Asset
	Status  []string
	Created *invoice.Created
}

var invoiceStatuses = []string{"PENDING", "PAID", "CONFIRMED", "SETTLED", "EXPIRED"}

// invoiceQuery reads the list's filters from the query string: status,
// dates, asset, an amount range in the asset's units, a search term.
func (d *Dashboard) invoiceQuery(q url.Values) (invoice.InvoiceSearch, error) {
	var iq invoice.InvoiceSearch
	for _, st := range q["status"] {
		if st != "" {
			iq.Statuses = append(iq.Statuses, st)
		}
	}
	for _, b := range []struct {
		name string
		t    *time.Time
		add  int
	}{{"from", &iq.CreatedAfter, 0}, {"to", &iq.CreatedBefore, 1}} {
		if v := q.Get(b.name); v != "" {
			t, err := time.Parse("2006-01-02", v)
			if err != nil {
				return iq, problem.OfField(problem.CodeInvalidParameter, b.name, b.name+" must be a date, YYYY-MM-DD")
			}
			*b.t = t.AddDate(0, 0, b.add)
		}
	}
	iq.Asset, iq.Query, iq.Cursor = q.Get("asset"), q.Get("q"), q.Get("cursor")
	for _, b := range []struct {
		name string
		to   **store.Amount
	}{{"min", &iq.MinAmount}, {"max", &iq.MaxAmount}} {
		v := strings.TrimSpace(q.Get(b.name))
		if v == "" {
			continue
		}
		a, err := d.asset(iq.Asset)
		if err != nil || iq.Asset == "" {
			return iq, problem.OfField(problem.CodeInvalidParameter, "asset", "an amount range needs an asset")
		}
		amt, err := a.Parse(v)
		if err != nil {
			return iq, problem.OfField(problem.CodeInvalidAmount, b.name, b.name+" must be an amount of "+a.Symbol)
		}
		*b.to = &amt
	}
	return iq, nil
}

func (d *Dashboard) handleInvoices(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	q := r.URL.Query()
	iq, err := d.invoiceQuery(q)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	iq.Limit = 25
	page, err := d.api.SearchInvoices(r.Context(), s.Principal.Merchant.ID, iq)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	v := invoicesView{Page: page, Filter: q, Assets: d.api.Assets(), Status: invoiceStatuses}
	filters := url.Values{}
	for k, vs := range q {
		if k != "cursor" && k != "msg" && k != "lang" {
			filters[k] = vs
		}
	}
	if page.NextCursor != nil {
		n := url.Values{}
		for k, vs := range filters {
			n[k] = vs
		}
		n.Set("cursor", *page.NextCursor)
		v.Next = d.url("/invoices") + "?" + n.Encode()
	}
	v.CSV = d.url("/invoices.csv") + "?" + filters.Encode()
	d.show(w, r, "invoices", "invoices", v)
}

// csvExportMax bounds one CSV export.
const csvExportMax = 100_000

func (d *Dashboard) handleInvoicesCSV(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	iq, err := d.invoiceQuery(r.URL.Query())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	iq.Cursor, iq.Limit = "", 100
	first, err := d.api.SearchInvoices(r.Context(), s.Principal.Merchant.ID, iq)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="invoices.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"id", "status", "asset", "amount", "amount_formatted", "paid", "paid_formatted", "price",
		"deposit_address", "order_id", "description", "underpaid", "overpaid", "paid_late", "created_at", "paid_at",
		"confirmed_at", "settled_at", "sweep_status", "payment_tx_hashes"})
	page, n := first, 0
	for {
		for _, inv := range page.Data {
			price := ""
			if inv.Price != nil {
				price = inv.Price.String()
			}
			var txs []string
			for _, p := range inv.Payments {
				txs = append(txs, p.TxHash.Hex())
			}
			_ = cw.Write([]string{strconv.FormatInt(inv.ID, 10), inv.Status, inv.Asset.Symbol, inv.Amount.String(),
				inv.AmountFormatted, inv.Paid.String(), inv.PaidFormatted, price, inv.DepositAddress.String(),
				csvSafe(inv.OrderID), csvSafe(inv.Description), strconv.FormatBool(inv.Underpaid),
				strconv.FormatBool(inv.Overpaid), strconv.FormatBool(inv.PaidLate), rfc3339(&inv.CreatedAt),
				rfc3339(inv.PaidAt), rfc3339(inv.ConfirmedAt), rfc3339(inv.SettledAt), inv.SweepStatus,
				strings.Join(txs, " ")})
			n++
		}
		if !page.HasMore || n >= csvExportMax {
			break
		}
		iq.Cursor = *page.NextCursor
		if page, err = d.api.SearchInvoices(r.Context(), s.Principal.Merchant.ID, iq); err != nil {
			d.logError(r.Context(), "invoices csv", err)
			break
		}
	}
	cw.Flush()
	d.auditAs(r.Context(), s, "invoices.export", "", strconv.Itoa(n)+" invoices")
}

// csvSafe keeps a cell a spreadsheet would run as a formula as text.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func rfc3339(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func (d *Dashboard) handleNewInvoicePage(w http.ResponseWriter, r *http.Request) {
	d.show(w, r, "newinvoice", "new_invoice", map[string]any{"Key": formKey(), "Assets": d.assetChoices()})
}

// assetChoice is an option of the new-invoice form's asset list.
type assetChoice struct{ Value, Label string }

// assetChoices are the assets an invoice may be created in: by symbol
// with one chain; with several, each chain's as SYMBOL@chain (the form's
// network and asset in one choice).
func (d *Dashboard) assetChoices() []assetChoice {
	var out []assetChoice
	if !d.severalChains() {
		for _, a := range d.api.Assets() {
			out = append(out, assetChoice{a.Symbol, a.Symbol})
		}
		return out
	}
	for _, id := range d.api.ChainIDs() {
		as, _ := d.api.ChainAssets(id)
		for _, a := range as {
			v := a.Symbol + "@" + strconv.FormatUint(id, 10)
			out = append(out, assetChoice{v, v})
		}
	}
	return out
}

// chosenAsset reads the form's asset choice: a symbol, or SYMBOL@chain
// when the deployment serves several chains (chain 0: the API's default).
func (d *Dashboard) chosenAsset(v string) (symbol string, chain uint64) {
	i := strings.LastIndex(v, "@")
	if i < 0 || !d.severalChains() {
		return v, 0
	}
	id, err := strconv.ParseUint(v[i+1:], 10, 64)
	if err != nil {
		return v, 0 // the API refuses the symbol and says why
	}
	return v[:i], id
}

func (d *Dashboard) handleCreateInvoice(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	asset, chain := d.chosenAsset(r.PostFormValue("asset"))
	p := invoice.InvoiceParams{Asset: asset, ChainID: chain, AmountFormatted: strings.TrimSpace(r.PostFormValue("amount")),
		OrderID: r.PostFormValue("order_id"), Description: r.PostFormValue("description")}
	if c := r.PostFormValue("currency"); c != "" {
		p.Price = &invoice.Price{Amount: p.AmountFormatted, Currency: c}
		p.AmountFormatted, p.Asset = "", ""
	}
	if m, err := strconv.Atoi(r.PostFormValue("expires_minutes")); err == nil && m > 0 {
		p.ExpiresIn = time.Duration(m) * time.Minute
	}
	key := r.PostFormValue("key")
	created, err := d.api.CreateInvoice(r.Context(), s.Principal, key, p)
	if err != nil {
		pd := d.data(r, "newinvoice", "new_invoice", map[string]any{"Key": key, "Assets": d.assetChoices(), "Form": r.PostForm})
		pd.Error = problemOf(err).Detail
		d.render(w, r, problemOf(err).Status, pd)
		return
	}
	if !created.Replayed {
		d.auditAs(r.Context(), s, "invoice.create", "invoice "+strconv.FormatInt(created.ID, 10), created.AmountFormatted+" "+created.Asset.Symbol)
	}
	// The checkout link holds the payer's lookup token: shown once, here.
	d.show(w, r, "created", "invoice_created", created)
}

type invoiceView struct {
	Inv        invoice.View
	Refunds    []invoice.OutboundView
	Deliveries []delivery
	Timeline   []event
	Key        string
	Assets     []store.Asset
	// Chains: the deployment serves several chains, so the page names the
	// invoice's (and a payment's on another chain).
	Chains bool
}

type event struct {
	At   time.Time
	What string // message key
	Arg  string
	Tx   string
}

func (d *Dashboard) handleInvoice(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	ctx := r.Context()
	inv, err := d.api.Invoice(ctx, s.Principal.Merchant.ID, pathID(r))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	refunds, err := d.api.ListRefunds(ctx, s.Principal.Merchant.ID, invoice.OutboundQuery{InvoiceID: inv.ID, Limit: 100})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	v := invoiceView{Inv: inv, Refunds: refunds.Data, Key: formKey(), Assets: d.api.Assets(), Chains: d.severalChains()}
	if ds, err := d.deliveries(r, "since="+url.QueryEscape(inv.CreatedAt.UTC().Format(time.RFC3339))+"&limit=100"); err == nil {
		for _, dl := range ds.Data {
			if dl.InvoiceID == inv.ID {
				v.Deliveries = append(v.Deliveries, dl)
			}
		}
	}
	tl := []event{{At: inv.CreatedAt, What: "tl_created", Arg: inv.AmountFormatted + " " + inv.Asset.Symbol}}
	for _, p := range inv.Payments {
		arg := p.AmountFormatted + " " + p.Asset.Symbol + " · block " + strconv.FormatUint(p.BlockNumber, 10)
		if p.WrongNetwork {
			arg += " · chain " + strconv.FormatUint(p.ChainID, 10)
		}
		tl = append(tl, event{At: p.SeenAt, What: "tl_payment", Arg: arg, Tx: p.TxHash.Hex()})
	}
	for _, st := range []struct {
		t   *time.Time
		key string
	}{{inv.PaidAt, "tl_paid"}, {inv.ConfirmedAt, "tl_confirmed"}, {inv.SettledAt, "tl_settled"}} {
		if st.t != nil {
			e := event{At: *st.t, What: st.key}
			if st.key == "tl_settled" && inv.SweepTxHash != nil {
				e.Tx = inv.SweepTxHash.Hex()
			}
			tl = append(tl, e)
		}
	}
	for _, dl := range v.Deliveries {
		at := dl.CreatedAt
		if dl.LastAttemptAt != nil {
			at = *dl.LastAttemptAt
		}
		code := "—"
		if dl.ResponseStatus != nil {
			code = strconv.Itoa(*dl.ResponseStatus)
		}
		tl = append(tl, event{At: at, What: "tl_webhook", Arg: dl.EventType + " · " + dl.Status + " · " + code +
			" · #" + strconv.Itoa(dl.Attempt)})
	}
	for _, o := range v.Refunds {
		e := event{At: o.CreatedAt, What: "tl_refund", Arg: o.AmountFormatted + " " + o.Asset.Symbol + " · " + o.Status}
		if o.TxHash != nil {
			e.Tx = o.TxHash.Hex()
		}
		tl = append(tl, e)
	}
	sort.SliceStable(tl, func(i, j int) bool { return tl[i].At.Before(tl[j].At) })
	v.Timeline = tl
	d.show(w, r, "invoice", "invoice", v)
}

func (d *Dashboard) handleCreateRefund(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	id := pathID(r)
	p := invoice.RefundParams{Reason: r.PostFormValue("reason"), AmountFormatted: strings.TrimSpace(r.PostFormValue("amount")),
		PaidBy: r.PostFormValue("paid_by"), Reference: r.PostFormValue("reference")}
	if p.Reason != "partial" && p.Reason != "" {
		p.AmountFormatted = ""
	}
	if dest := strings.TrimSpace(r.PostFormValue("destination")); dest != "" {
		a, err := store.ParseAddress(dest)
		if err != nil {
			d.fail(w, r, problem.OfField(problem.CodeInvalidAddress, "destination", "the destination is not an address (a mixed-case one must have its EIP-55 checksum)"))
			return
		}
		p.Destination = &a
	}
	o, err := d.api.CreateRefund(r.Context(), s.Principal, id, r.PostFormValue("key"), p)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if !o.Replayed {
		d.auditAs(r.Context(), s, "refund.create", "refund "+strconv.FormatInt(o.ID, 10),
			"invoice "+strconv.FormatInt(id, 10)+", "+o.AmountFormatted+" "+o.Asset.Symbol+", "+o.Status)
	}
	if o.ClaimURL != "" {
		d.show(w, r, "claim", "refund_created", o)
		return
	}
	d.redirect(w, r, "/invoices/"+strconv.FormatInt(id, 10), "refund_created")
}

// Refunds and payouts.

type outboundsView struct {
	Kind   string
	Page   invoice.OutboundPage
	Status string
	Next   string
	Key    string
	Assets []store.Asset
	Users  map[int64]string
}

func (d *Dashboard) listOutbounds(w http.ResponseWriter, r *http.Request, kind string) {
	s := sessionOf(r)
	q := invoice.OutboundQuery{Status: r.URL.Query().Get("status"), Cursor: r.URL.Query().Get("cursor"), Limit: 25}
	var page invoice.OutboundPage
	var err error
	if kind == "refunds" {
		page, err = d.api.ListRefunds(r.Context(), s.Principal.Merchant.ID, q)
	} else {
		page, err = d.api.ListPayouts(r.Context(), s.Principal.Merchant.ID, q)
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	v := outboundsView{Kind: kind, Page: page, Status: q.Status, Key: formKey(), Assets: d.api.Assets(), Users: map[int64]string{}}
	if page.NextCursor != nil {
		v.Next = d.url("/"+kind) + "?" + url.Values{"status": {q.Status}, "cursor": {*page.NextCursor}}.Encode()
	}
	us, err := d.st.ListDashboardUsers(r.Context(), s.Principal.Merchant.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	for _, u := range us {
		v.Users[u.ID] = u.Email
	}
	d.show(w, r, "outbounds", kind, v)
}

func (d *Dashboard) handleRefunds(w http.ResponseWriter, r *http.Request) {
	d.listOutbounds(w, r, "refunds")
}
func (d *Dashboard) handlePayouts(w http.ResponseWriter, r *http.Request) {
	d.listOutbounds(w, r, "payouts")
}

func (d *Dashboard) handleCreatePayout(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	dest, err := store.ParseAddress(strings.TrimSpace(r.PostFormValue("destination")))
	if err != nil {
		d.fail(w, r, problem.OfField(problem.CodeInvalidAddress, "destination", "the destination is not an address (a mixed-case one must have its EIP-55 checksum)"))
		return
	}
	p := invoice.PayoutParams{Asset: r.PostFormValue("asset"), AmountFormatted: strings.TrimSpace(r.PostFormValue("amount")),
		Destination: dest, PaidBy: r.PostFormValue("paid_by"), Reference: r.PostFormValue("reference")}
	o, err := d.api.CreatePayout(r.Context(), s.Principal, r.PostFormValue("key"), p)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if !o.Replayed {
		d.auditAs(r.Context(), s, "payout.create", "payout "+strconv.FormatInt(o.ID, 10),
			o.AmountFormatted+" "+o.Asset.Symbol+" to "+dest.Hex()+", "+o.Status)
	}
	d.redirect(w, r, "/payouts", "payout_created")
}

// outboundAction approves, rejects or cancels a refund or payout.
func (d *Dashboard) outboundAction(w http.ResponseWriter, r *http.Request, action string) {
	s := sessionOf(r)
	ctx := r.Context()
	id := pathID(r)
	kind := "refund"
	o, err := d.api.Refund(ctx, s.Principal.Merchant.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		kind = "payout"
		o, err = d.api.Payout(ctx, s.Principal.Merchant.ID, id)
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if action == "cancel" && ((kind == "refund" && !s.may(store.ScopeRefunds)) || (kind == "payout" && !s.may(store.ScopePayouts))) {
		d.forbidden(w, r)
		return
	}
	var out invoice.OutboundView
	switch action {
	case "approve":
		out, err = d.api.Approve(ctx, s.Principal, id)
	case "reject":
		out, err = d.api.Reject(ctx, s.Principal, id)
	default:
		out, err = d.api.Cancel(ctx, s.Principal, id)
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(ctx, s, kind+"."+action, kind+" "+strconv.FormatInt(id, 10),
		o.AmountFormatted+" "+o.Asset.Symbol+", "+o.Status+" → "+out.Status)
	d.redirect(w, r, "/"+kind+"s", kind+"_"+action)
}

func (d *Dashboard) handleApprove(w http.ResponseWriter, r *http.Request) {
	d.outboundAction(w, r, "approve")
}
func (d *Dashboard) handleReject(w http.ResponseWriter, r *http.Request) {
	d.outboundAction(w, r, "reject")
}
func (d *Dashboard) handleCancel(w http.ResponseWriter, r *http.Request) {
	d.outboundAction(w, r, "cancel")
}

// Ledger.

func (d *Dashboard) handleLedgerPage(w http.ResponseWriter, r *http.Request) {
	d.show(w, r, "ledger", "ledger", nil)
}

func ledgerQuery(q url.Values) (invoice.LedgerQuery, error) {
	var lq invoice.LedgerQuery
	for _, b := range []struct {
		name string
		t    *time.Time
		add  int
	}{{"from", &lq.From, 0}, {"to", &lq.To, 1}} {
		if v := q.Get(b.name); v != "" {
			t, err := time.Parse("2006-01-02", v)
			if err != nil {
				return lq, problem.OfField(problem.CodeInvalidParameter, b.name, b.name+" must be a date, YYYY-MM-DD")
			}
			*b.t = t.AddDate(0, 0, b.add)
		}
	}
	return lq, nil
}

func (d *Dashboard) handleLedgerCSV(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	lq, err := ledgerQuery(r.URL.Query())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="ledger.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"id", "kind", "at", "invoice_id", "outbound_id", "asset", "amount", "amount_formatted", "from",
		"to", "tx_hash", "log_index", "block_number", "fiat_currency", "fiat_value", "reverses"})
	n := 0
	for e, err := range d.api.Ledger(r.Context(), s.Principal.Merchant.ID, lq) {
		if err != nil {
			d.logError(r.Context(), "ledger csv", err)
			break
		}
		_ = cw.Write([]string{strconv.FormatInt(e.ID, 10), e.Kind, e.At.UTC().Format(time.RFC3339), i64(e.InvoiceID),
			i64(e.OutboundID), e.Asset.Symbol, e.Amount.String(), e.AmountFormatted, addr(e.From), addr(e.To),
			hash(e.TxHash), intp(e.LogIndex), u64(e.BlockNumber), e.FiatCurrency, e.FiatValue, i64(e.Reverses)})
		n++
	}
	cw.Flush()
	d.auditAs(r.Context(), s, "ledger.export", "", "csv, "+strconv.Itoa(n)+" entries")
}

func (d *Dashboard) handleLedgerJSONL(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	lq, err := ledgerQuery(r.URL.Query())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("Content-Disposition", `attachment; filename="ledger.jsonl"`)
	enc := json.NewEncoder(w)
	n := 0
	for e, err := range d.api.Ledger(r.Context(), s.Principal.Merchant.ID, lq) {
		if err != nil {
			d.logError(r.Context(), "ledger jsonl", err)
			break
		}
		_ = enc.Encode(e)
		n++
	}
	d.auditAs(r.Context(), s, "ledger.export", "", "jsonl, "+strconv.Itoa(n)+" entries")
}

func i64(p *int64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatInt(*p, 10)
}

func u64(p *uint64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatUint(*p, 10)
}

func intp(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}

func addr(a *store.ChecksumAddress) string {
	if a == nil {
		return ""
	}
	return a.String()
}

func hash(h *common.Hash) string {
	if h == nil {
		return ""
	}
	return h.Hex()
}

// Webhooks: the deliveries API, called in process as the user's merchant.

type delivery struct {
	ID             int64      `json:"id"`
	EventType      string     `json:"event_type"`
	InvoiceID      int64      `json:"invoice_id"`
	Status         string     `json:"status"`
	Delivered      bool       `json:"delivered"`
	ResponseStatus *int       `json:"response_status"`
	Attempt        int        `json:"attempt"`
	LastAttemptAt  *time.Time `json:"last_attempt_at"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastError      string     `json:"last_error"`
	CreatedAt      time.Time  `json:"created_at"`
	FailureReason  string     `json:"failure_reason"`
}

type deliveryPage struct {
	Data       []delivery `json:"data"`
	NextCursor *string    `json:"next_cursor"`
}

type principalKey struct{}

// DeliveriesAuthenticator authenticates the dashboard's in-process calls
// to the webhook deliveries API (webhook.NewDeliveriesAPI's
// Authenticator): the signed-in user's merchant, with read for GET and
// admin for replays, like an API key's scopes.
type DeliveriesAuthenticator struct{}

// Authenticate implements webhook.Authenticator.
func (DeliveriesAuthenticator) Authenticate(r *http.Request) (store.Merchant, error) {
	p, ok := r.Context().Value(principalKey{}).(invoice.Principal)
	if !ok {
		return store.Merchant{}, invoice.ErrUnauthorized
	}
	scope := store.ScopeAdmin
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		scope = store.ScopeRead
	}
	if !p.Has(scope) {
		return store.Merchant{}, problem.Of(problem.CodeInsufficientScope, "your role lacks the "+strconv.Quote(scope)+" scope")
	}
	return p.Merchant, nil
}

// callDeliveries calls the deliveries API in process.
func (d *Dashboard) callDeliveries(r *http.Request, method, path string) (*httptest.ResponseRecorder, error) {
	if d.cfg.Deliveries == nil {
		return nil, errors.New("dashboard: no deliveries API configured")
	}
	req := httptest.NewRequestWithContext(r.Context(), method, path, nil)
	req = req.WithContext(contextWithPrincipal(r.Context(), sessionOf(r).Principal))
	rec := httptest.NewRecorder()
	d.cfg.Deliveries.ServeHTTP(rec, req)
	return rec, nil
}

func (d *Dashboard) deliveries(r *http.Request, query string) (deliveryPage, error) {
	rec, err := d.callDeliveries(r, http.MethodGet, "/v1/webhook-deliveries?"+query)
	if err != nil {
		return deliveryPage{}, err
	}
	if rec.Code != http.StatusOK {
		return deliveryPage{}, errorf("deliveries API answered %d: %s", rec.Code, rec.Body.String())
	}
	var p deliveryPage
	err = json.Unmarshal(rec.Body.Bytes(), &p)
	return p, err
}

func (d *Dashboard) handleWebhooks(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	q := url.Values{"limit": {"50"}}
	if st := r.URL.Query().Get("status"); st != "" {
		q.Set("status", st)
	}
	if c := r.URL.Query().Get("cursor"); c != "" {
		q.Set("cursor", c)
	}
	v := map[string]any{"Status": q.Get("status"), "WebhookURL": s.Principal.Merchant.WebhookURL}
	if d.cfg.Deliveries != nil {
		page, err := d.deliveries(r, q.Encode())
		if err != nil {
			d.fail(w, r, err)
			return
		}
		v["Page"] = page
		if page.NextCursor != nil {
			v["Next"] = d.url("/webhooks") + "?" + url.Values{"status": {q.Get("status")}, "cursor": {*page.NextCursor}}.Encode()
		}
	}
	d.show(w, r, "webhooks", "webhooks", v)
}

func (d *Dashboard) handleReplay(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	id := pathID(r)
	rec, err := d.callDeliveries(r, http.MethodPost, "/v1/webhook-deliveries/"+strconv.FormatInt(id, 10)+"/replay")
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if rec.Code >= 300 {
		var pb struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &pb)
		if pb.Code == "" {
			pb.Code = problem.CodeInternal
		}
		d.fail(w, r, problem.Of(pb.Code, pb.Detail))
		return
	}
	d.auditAs(r.Context(), s, "webhook.replay", "delivery "+strconv.FormatInt(id, 10), "")
	d.redirect(w, r, "/webhooks", "replayed")
}

// handleRotateSecret gives the merchant a new webhook signing secret,
// shown once; deliveries are signed with it from now on.
func (d *Dashboard) handleRotateSecret(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	_, secret, err := d.api.RotateWebhookSecret(r.Context(), s.Principal.Merchant.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "webhook_secret.rotate", "merchant "+strconv.FormatInt(s.Principal.Merchant.ID, 10), "")
	d.show(w, r, "secretmade", "webhook_secret_made", secret)
}

// Settings.

func (d *Dashboard) handleSettings(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	pv, err := d.payoutView(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	v := map[string]any{"M": s.Principal.Merchant, "Fresh": d.freshSecondFactor(s), "TOTP": s.User.TOTPEnabledAt != nil, "Payout": pv}
	d.show(w, r, "settings", "settings", v)
}

func (d *Dashboard) handleProfile(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	name, hook := strings.TrimSpace(r.PostFormValue("name")), strings.TrimSpace(r.PostFormValue("webhook_url"))
	u := invoice.MerchantUpdate{Name: &name, WebhookURL: &hook}
	if pct := strings.TrimSpace(r.PostFormValue("tolerance_percent")); pct != "" {
		dec, err := store.ParseDecimal(pct)
		if err != nil {
			d.fail(w, r, problem.OfField(problem.CodeInvalidField, "tolerance_percent", "the tolerance is a percentage such as 0.5"))
			return
		}
		tol := s.Principal.Merchant.Tolerance
		tol.Percent = dec
		u.Tolerance = &tol
	}
	m, err := d.api.UpdateMerchant(r.Context(), s.Principal.Merchant.ID, u)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "merchant.update", "merchant "+strconv.FormatInt(m.ID, 10), "name, webhook URL "+hook+", tolerance "+m.Tolerance.Percent.String()+" %")
	d.redirect(w, r, "/settings", "saved")
}

// handleSettlementAddress changes where every sweep goes: the owner's
// alone, and only within FreshSecondFactor of a passkey or TOTP check.
func (d *Dashboard) handleSettlementAddress(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	if !d.freshSecondFactor(s) {
		d.auditAs(r.Context(), s, "settlement_address.refused", "merchant "+strconv.FormatInt(s.Principal.Merchant.ID, 10),
			"no fresh second factor")
		pv, err := d.payoutView(r)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		pd := d.data(r, "settings", "settings", map[string]any{"M": s.Principal.Merchant, "Fresh": false,
			"TOTP": s.User.TOTPEnabledAt != nil, "Payout": pv})
		pd.Error = pd.L.T("needs_fresh_second_factor")
		d.render(w, r, http.StatusForbidden, pd)
		return
	}
	a, err := store.ParseAddress(strings.TrimSpace(r.PostFormValue("settlement_address")))
	if err != nil {
		d.fail(w, r, problem.OfField(problem.CodeInvalidAddress, "settlement_address", "not an address (a mixed-case one must have its EIP-55 checksum)"))
		return
	}
	prev := s.Principal.Merchant.SettlementAddress
	m, err := d.api.UpdateMerchant(r.Context(), s.Principal.Merchant.ID, invoice.MerchantUpdate{SettlementAddress: &a,
		ChangedBy: "user:" + strconv.FormatInt(s.User.ID, 10)})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "settlement_address.change", "merchant "+strconv.FormatInt(m.ID, 10),
		prev.Hex()+" → "+m.SettlementAddress.Hex())
	d.redirect(w, r, "/settings", "settlement_changed")
}

// Users and the audit log (owner).

func (d *Dashboard) handleUsers(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	us, err := d.st.ListDashboardUsers(r.Context(), s.Principal.Merchant.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	links, err := d.st.ListDashboardLinks(r.Context(), s.Principal.Merchant.ID, d.now())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.show(w, r, "users", "users", map[string]any{"Users": us, "Roles": store.DashboardRoles(), "Links": links})
}

func (d *Dashboard) handleInvite(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	email := strings.ToLower(strings.TrimSpace(r.PostFormValue("email")))
	role := r.PostFormValue("role")
	if !strings.Contains(email, "@") || len(email) > 254 || !slices.Contains(store.DashboardRoles(), role) {
		d.fail(w, r, problem.OfField(problem.CodeInvalidField, "email", "an email address and one of the roles"))
		return
	}
	link, err := d.newLink(r.Context(), store.DashboardLink{Kind: store.LinkInvitation, MerchantID: s.Principal.Merchant.ID,
		Email: email, Role: role, CreatedBy: s.User.Email})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "invitation.create", email, "role "+role)
	if d.mailLink(r.Context(), email, "You are invited to "+s.Principal.Merchant.Name+"'s evmpay dashboard", link) {
		d.show(w, r, "linkmade", "invitation_made", map[string]string{"Email": email, "Sent": "1"})
		return
	}
	d.show(w, r, "linkmade", "invitation_made", map[string]string{"Link": link, "Email": email})
}

func (d *Dashboard) userOfMerchant(r *http.Request) (store.DashboardUser, error) {
	u, err := d.st.GetDashboardUser(r.Context(), pathID(r))
	if err == nil && u.MerchantID != sessionOf(r).Principal.Merchant.ID {
		err = store.ErrNotFound
	}
	return u, err
}

func (d *Dashboard) handleUserRole(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	u, err := d.userOfMerchant(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	role := r.PostFormValue("role")
	if !slices.Contains(store.DashboardRoles(), role) {
		d.fail(w, r, problem.OfField(problem.CodeInvalidField, "role", "one of the roles"))
		return
	}
	if u.ID == s.User.ID && role != store.RoleOwner {
		d.fail(w, r, problem.Of(problem.CodeStateConflict, "you cannot take your own owner role away: another owner can"))
		return
	}
	prev := u.Role
	u.Role, u.UpdatedAt = role, d.now()
	if err := d.st.UpdateDashboardUser(r.Context(), u); err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "user.role", "user "+strconv.FormatInt(u.ID, 10), u.Email+": "+prev+" → "+role)
	d.redirect(w, r, "/users", "saved")
}

func (d *Dashboard) handleUserDisable(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	u, err := d.userOfMerchant(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if u.ID == s.User.ID {
		d.fail(w, r, problem.Of(problem.CodeStateConflict, "you cannot disable yourself"))
		return
	}
	now := d.now()
	u.DisabledAt, u.UpdatedAt = &now, now
	if err := d.st.UpdateDashboardUser(r.Context(), u); err != nil {
		d.fail(w, r, err)
		return
	}
	if _, err := d.st.RevokeDashboardSessions(r.Context(), u.ID, 0, now); err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "user.disable", "user "+strconv.FormatInt(u.ID, 10), u.Email)
	d.redirect(w, r, "/users", "saved")
}

func (d *Dashboard) handleResetLink(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	u, err := d.userOfMerchant(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	uid := u.ID
	link, err := d.newLink(r.Context(), store.DashboardLink{Kind: store.LinkReset, MerchantID: u.MerchantID, UserID: &uid,
		CreatedBy: s.User.Email})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "reset_link.create", "user "+strconv.FormatInt(u.ID, 10), u.Email)
	if d.mailLink(r.Context(), u.Email, "Set a new password for your evmpay dashboard", link) {
		d.show(w, r, "linkmade", "reset_link_made", map[string]string{"Email": u.Email, "Sent": "1"})
		return
	}
	d.show(w, r, "linkmade", "reset_link_made", map[string]string{"Link": link, "Email": u.Email})
}

func (d *Dashboard) handleAudit(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	before, _ := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	es, err := d.st.ListAudit(r.Context(), store.AuditFilter{MerchantID: s.Principal.Merchant.ID, BeforeID: before,
		Action: r.URL.Query().Get("action"), Limit: 50})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	v := map[string]any{"Entries": es, "Action": r.URL.Query().Get("action")}
	if len(es) == 50 {
		v["Next"] = d.url("/audit") + "?" + url.Values{"action": {r.URL.Query().Get("action")},
			"before": {strconv.FormatInt(es[len(es)-1].ID, 10)}}.Encode()
	}
	d.show(w, r, "audit", "audit", v)
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
