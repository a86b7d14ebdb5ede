package dashboard

import (
	"context"
	"log/slog"

	"github.com/evmpay/evmpay/store"
)

// roleScopes maps a dashboard role onto the API key scopes
// (docs/dashboard.md): a user acts through the Go API as a principal
// with these scopes, and every action is checked against them on the
// server. The owner also does what only the merchant's own key may
// (settlement address, API keys, payout settings, users): ownerOnly.
func roleScopes(role string) store.Scopes {
	switch role {
	case store.RoleOwner:
		return store.Scopes(store.AllScopes())
	case store.RoleApprover:
		return store.Scopes{store.ScopeRead, store.ScopeApprove}
	case store.RoleAccountant:
		return store.Scopes{store.ScopeRead, store.ScopeRefunds, store.ScopePayouts}
	case store.RoleDeveloper:
		return store.Scopes{store.ScopeRead, store.ScopeInvoices, store.ScopeAdmin}
	case store.RoleViewer:
		return store.Scopes{store.ScopeRead}
	}
	return nil
}

// scopeOwner is the pseudo-scope of what only an owner may do.
const scopeOwner = "owner"

// may reports whether the session's user may use scope (or scopeOwner).
func (s *session) may(scope string) bool {
	if s == nil {
		return false
	}
	if scope == scopeOwner {
		return s.User.Role == store.RoleOwner
	}
	return s.Principal.Has(scope)
}

// audit appends an entry to the merchant's audit log. A failure is logged:
// the action it records has already happened.
func (d *Dashboard) audit(ctx context.Context, merchantID int64, userID *int64, actor, action, subject, detail string) {
	e := store.AuditEntry{MerchantID: merchantID, UserID: userID, Actor: actor, Action: action, Subject: subject,
		Detail: truncate(detail, 500), At: d.now()}
	if err := d.st.AppendAudit(context.WithoutCancel(ctx), &e); err != nil {
		d.logError(ctx, "audit log", err)
		return
	}
	d.cfg.Logger.InfoContext(ctx, "dashboard: "+action, slog.Int64("merchant_id", merchantID), slog.String("subject", subject))
}

// auditAs records what the session's user did.
func (d *Dashboard) auditAs(ctx context.Context, s *session, action, subject, detail string) {
	uid := s.User.ID
	d.audit(ctx, s.User.MerchantID, &uid, s.User.Email, action, subject, detail)
}
