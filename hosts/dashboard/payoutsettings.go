package dashboard

import (
	"net/http"
	"strings"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// Payout limits: per asset the approval threshold, daily limit and
// payout-wallet reserve, the allowlist and the paying wallets — the
// owner's, through the Go API (invoice.Service.PutPayoutSettings), in the
// asset's units on the page and base units in the API.

type assetLimits struct {
	Symbol                    string
	Threshold, Daily, Reserve string
}

type payoutView struct {
	Assets           []assetLimits
	AllowlistEnabled bool
	Allowlist        string
	PayingWallets    string
}

func (d *Dashboard) payoutView(r *http.Request) (payoutView, error) {
	s := sessionOf(r)
	ps, err := d.api.PayoutSettings(r.Context(), s.Principal.Merchant.ID)
	if err != nil {
		return payoutView{}, err
	}
	v := payoutView{AllowlistEnabled: ps.AllowlistEnabled}
	for _, a := range d.api.Assets() {
		l := assetLimits{Symbol: a.Symbol}
		for _, as := range ps.Assets {
			if strings.EqualFold(as.Asset, a.Symbol) {
				l.Threshold, l.Daily, l.Reserve = fmtAmount(a, as.ApprovalThreshold), fmtAmount(a, as.DailyLimit), fmtAmount(a, as.Reserve)
			}
		}
		v.Assets = append(v.Assets, l)
	}
	var al, pw []string
	for _, a := range ps.Allowlist {
		al = append(al, a.String())
	}
	for _, a := range ps.PayingWallets {
		pw = append(pw, a.String())
	}
	v.Allowlist, v.PayingWallets = strings.Join(al, "\n"), strings.Join(pw, "\n")
	return v, nil
}

func fmtAmount(a store.Asset, x *store.Amount) string {
	if x == nil {
		return ""
	}
	return a.Format(*x)
}

func (d *Dashboard) handlePayoutSettings(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	var ps invoice.PayoutSettings
	for _, a := range d.api.Assets() {
		as := invoice.AssetSettings{Asset: a.Symbol}
		set := false
		for _, f := range []struct {
			name string
			to   **store.Amount
		}{{"threshold_", &as.ApprovalThreshold}, {"daily_", &as.DailyLimit}, {"reserve_", &as.Reserve}} {
			v := strings.TrimSpace(r.PostFormValue(f.name + a.Symbol))
			if v == "" {
				continue
			}
			x, err := a.Parse(v)
			if err != nil {
				d.fail(w, r, problem.OfField(problem.CodeInvalidAmount, f.name+a.Symbol, "an amount of "+a.Symbol+" such as 1.5"))
				return
			}
			*f.to, set = &x, true
		}
		if set {
			ps.Assets = append(ps.Assets, as)
		}
	}
	ps.AllowlistEnabled = r.PostFormValue("allowlist_enabled") == "on"
	for _, f := range []struct {
		name string
		to   *[]store.ChecksumAddress
	}{{"allowlist", &ps.Allowlist}, {"paying_wallets", &ps.PayingWallets}} {
		for _, line := range strings.Fields(r.PostFormValue(f.name)) {
			a, err := store.ParseAddress(line)
			if err != nil {
				d.fail(w, r, problem.OfField(problem.CodeInvalidAddress, f.name, line+" is not an address (a mixed-case one must have its EIP-55 checksum)"))
				return
			}
			*f.to = append(*f.to, store.ChecksumAddress(a))
		}
	}
	if _, err := d.api.PutPayoutSettings(r.Context(), s.Principal, ps); err != nil {
		d.fail(w, r, err)
		return
	}
	var limits []string
	for _, as := range ps.Assets {
		limits = append(limits, as.Asset)
	}
	d.auditAs(r.Context(), s, "payout_settings.change", "merchant "+itoa64(s.Principal.Merchant.ID),
		"limits for "+strings.Join(limits, ", ")+"; allowlist "+map[bool]string{true: "on", false: "off"}[ps.AllowlistEnabled])
	d.redirect(w, r, "/settings", "saved")
}
