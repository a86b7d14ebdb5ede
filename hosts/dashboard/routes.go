package dashboard

import (
	"context"
	"net/http"
	"net/url"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// routes registers every page and action. Each action names the scope
// (or scopeOwner) it needs: the server refuses it to a role without it,
// whatever the page showed.
func (d *Dashboard) routes(mux *http.ServeMux) {
	p := d.prefix
	h := func(pattern string, fn http.HandlerFunc) {
		method, rest, _ := cutSpace(pattern)
		mux.Handle(method+" "+p+rest, fn)
	}
	// Signed out.
	h("GET /assets/{name}", d.serveAsset)
	h("GET /sign-in", d.public(d.handleSignInPage))
	h("POST /sign-in", d.public(d.handleSignIn))
	h("POST /passkey/assert/begin", d.public(d.handlePasskeyAssertBegin))
	h("POST /passkey/assert/finish", d.public(d.handlePasskeyAssertFinish))
	h("GET /link", d.public(d.handleLinkPage))
	h("POST /link", d.public(d.handleLink))
	h("GET /pay/{slug}", d.public(d.handlePayPage))
	h("POST /pay/{slug}", d.public(d.handlePay))
	// A password sign-in's second factor.
	h("GET /sign-in/second-factor", d.pending(d.handleSecondFactorPage))
	h("POST /sign-in/second-factor", d.pending(d.handleSecondFactor))
	h("POST /sign-out", d.anySession(d.handleSignOut))

	// Signed in.
	h("GET /{$}", d.authed(store.ScopeRead, d.handleOverview))
	h("GET /invoices", d.authed(store.ScopeRead, d.handleInvoices))
	h("GET /invoices.csv", d.authed(store.ScopeRead, d.handleInvoicesCSV))
	h("GET /invoices/new", d.authed(store.ScopeInvoices, d.handleNewInvoicePage))
	h("POST /invoices", d.authed(store.ScopeInvoices, d.handleCreateInvoice))
	h("GET /invoices/{id}", d.authed(store.ScopeRead, d.handleInvoice))
	h("POST /invoices/{id}/refunds", d.authed(store.ScopeRefunds, d.handleCreateRefund))
	h("GET /refunds", d.authed(store.ScopeRead, d.handleRefunds))
	h("GET /payouts", d.authed(store.ScopeRead, d.handlePayouts))
	h("POST /payouts", d.authed(store.ScopePayouts, d.handleCreatePayout))
	h("POST /outbounds/{id}/approve", d.authed(store.ScopeApprove, d.handleApprove))
	h("POST /outbounds/{id}/reject", d.authed(store.ScopeApprove, d.handleReject))
	h("POST /outbounds/{id}/cancel", d.authed(store.ScopeRead, d.handleCancel)) // refunds or payouts: checked per kind
	h("GET /ledger", d.authed(store.ScopeRead, d.handleLedgerPage))
	h("GET /ledger.csv", d.authed(store.ScopeRead, d.handleLedgerCSV))
	h("GET /ledger.jsonl", d.authed(store.ScopeRead, d.handleLedgerJSONL))
	h("GET /webhooks", d.authed(store.ScopeRead, d.handleWebhooks))
	h("POST /webhooks/{id}/replay", d.authed(store.ScopeAdmin, d.handleReplay))
	h("POST /webhooks/secret/rotate", d.authed(store.ScopeAdmin, d.handleRotateSecret))
	h("GET /links", d.authed(store.ScopeRead, d.handleLinks))
	h("POST /links", d.authed(store.ScopeInvoices, d.handleCreateLink))
	h("POST /links/{id}/active", d.authed(store.ScopeInvoices, d.handleLinkActive))
	h("GET /settings", d.authed(store.ScopeRead, d.handleSettings))
	h("GET /branding", d.authed(store.ScopeRead, d.handleBranding))
	h("GET /branding/logo", d.authed(store.ScopeRead, d.handleBrandingLogo))
	h("POST /branding", d.authed(store.ScopeAdmin, d.handlePutBranding))
	h("POST /settings/profile", d.authed(store.ScopeAdmin, d.handleProfile))
	h("POST /settings/settlement-address", d.authed(scopeOwner, d.handleSettlementAddress))
	h("POST /settings/payout", d.authed(scopeOwner, d.handlePayoutSettings))
	h("GET /users", d.authed(scopeOwner, d.handleUsers))
	h("POST /users/invite", d.authed(scopeOwner, d.handleInvite))
	h("POST /users/{id}/role", d.authed(scopeOwner, d.handleUserRole))
	h("POST /users/{id}/disable", d.authed(scopeOwner, d.handleUserDisable))
	h("POST /users/{id}/reset-link", d.authed(scopeOwner, d.handleResetLink))
	h("GET /audit", d.authed(scopeOwner, d.handleAudit))
	h("GET /api-keys", d.authed(scopeOwner, d.handleAPIKeys))
	h("POST /api-keys", d.authed(scopeOwner, d.handleCreateAPIKey))
	h("POST /api-keys/{id}/revoke", d.authed(scopeOwner, d.handleRevokeAPIKey))
	h("GET /account", d.authed(store.ScopeRead, d.handleAccount))
	h("POST /account/password", d.authed(store.ScopeRead, d.handlePassword))
	h("POST /account/totp/begin", d.authed(store.ScopeRead, d.handleTOTPBegin))
	h("POST /account/totp/confirm", d.authed(store.ScopeRead, d.handleTOTPConfirm))
	h("POST /account/totp/disable", d.authed(store.ScopeRead, d.handleTOTPDisable))
	h("POST /account/second-factor", d.authed(store.ScopeRead, d.handleReauthTOTP))
	h("POST /account/passkeys/begin", d.authed(store.ScopeRead, d.handlePasskeyRegisterBegin))
	h("POST /account/passkeys/finish", d.authed(store.ScopeRead, d.handlePasskeyRegisterFinish))
	h("POST /account/passkeys/{id}/delete", d.authed(store.ScopeRead, d.handlePasskeyDelete))
	h("POST /account/sessions/{id}/revoke", d.authed(store.ScopeRead, d.handleRevokeSession))
	h("POST /account/sessions/revoke-others", d.authed(store.ScopeRead, d.handleRevokeOthers))
	mux.Handle(p+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pd := d.data(r, "error", "error_title", nil)
		pd.Error = pd.L.T("not_found")
		d.render(w, r, http.StatusNotFound, pd)
	}))
}

func cutSpace(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

func withSession(r *http.Request, s *session) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
}

// public serves a page that needs no session (it may have one).
func (d *Dashboard) public(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := d.loadSession(r)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if s != nil && !s.Pending {
			r = withSession(r, s)
		}
		fn(w, r)
	}
}

// pending serves the second-factor step of a password sign-in.
func (d *Dashboard) pending(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := d.loadSession(r)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if s == nil {
			d.redirect(w, r, "/sign-in", "")
			return
		}
		if !s.Pending {
			d.redirect(w, r, "/", "")
			return
		}
		fn(w, withSession(r, s))
	}
}

func (d *Dashboard) anySession(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := d.loadSession(r)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if s == nil {
			d.redirect(w, r, "/sign-in", "")
			return
		}
		fn(w, withSession(r, s))
	}
}

// authed serves what a signed-in user whose role has scope may use.
func (d *Dashboard) authed(scope string, fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := d.loadSession(r)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		switch {
		case s == nil && wantsJSON(r):
			problem.Write(w, problem.Of(problem.CodeUnauthorized, "sign in first"))
			return
		case s == nil:
			next := ""
			if r.Method == http.MethodGet {
				next = "?next=" + url.QueryEscape(r.URL.RequestURI())
			}
			http.Redirect(w, r, d.url("/sign-in"+next), http.StatusSeeOther)
			return
		case s.Pending:
			d.redirect(w, r, "/sign-in/second-factor", "")
			return
		}
		if !s.may(scope) {
			d.forbidden(w, r)
			return
		}
		fn(w, withSession(r, s))
	}
}
