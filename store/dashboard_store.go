package store

import (
	"context"
	"time"
)

// DashboardStore keeps the merchant dashboard's records (issue #35).
type DashboardStore interface {
	// CreateDashboardUser inserts u and sets its ID; ErrConflict when the
	// email is taken, ErrNotFound when the merchant does not exist.
	CreateDashboardUser(ctx context.Context, u *DashboardUser) error
	GetDashboardUser(ctx context.Context, id int64) (DashboardUser, error)
	// GetDashboardUserByEmail finds a user by email (compared lower case).
	GetDashboardUserByEmail(ctx context.Context, email string) (DashboardUser, error)
	// ListDashboardUsers lists a merchant's users by id.
	ListDashboardUsers(ctx context.Context, merchantID int64) ([]DashboardUser, error)
	// UpdateDashboardUser writes every mutable field of u (name, role,
	// password hash, TOTP, sign-in counters, disabled, updated_at).
	UpdateDashboardUser(ctx context.Context, u DashboardUser) error
	// RecordFailedSignIn adds one failed sign-in to the user's count, in
	// one statement (concurrent failures all count); when the count
	// reaches max it locks the user until lockUntil. It returns the user
	// as written.
	RecordFailedSignIn(ctx context.Context, userID int64, max int, lockUntil, at time.Time) (DashboardUser, error)
	// UseTOTPStep records step as the user's last accepted TOTP step if it
	// is later than the recorded one; false when it is not (a code used
	// twice).
	UseTOTPStep(ctx context.Context, userID, step int64) (bool, error)

	CreateDashboardSession(ctx context.Context, s *DashboardSession) error
	// GetDashboardSessionByHash returns the session whose token hashes to
	// hash (revoked and expired ones too: the caller checks).
	GetDashboardSessionByHash(ctx context.Context, hash []byte) (DashboardSession, error)
	// TouchDashboardSession sets the session's last_seen_at and
	// expires_at.
	TouchDashboardSession(ctx context.Context, id int64, seen, expires time.Time) error
	// PassSecondFactor marks the session as having passed a second factor
	// at at (and no longer pending).
	PassSecondFactor(ctx context.Context, id int64, at time.Time) error
	// ListDashboardSessions lists a user's sessions not revoked, newest
	// first.
	ListDashboardSessions(ctx context.Context, userID int64) ([]DashboardSession, error)
	// RevokeDashboardSession revokes the user's session id.
	RevokeDashboardSession(ctx context.Context, userID, id int64, at time.Time) error
	// RevokeDashboardSessions revokes every session of the user but
	// except (0: all); it returns how many.
	RevokeDashboardSessions(ctx context.Context, userID, except int64, at time.Time) (int64, error)

	// CreatePasskey stores a credential; ErrConflict when its credential
	// id is registered already.
	CreatePasskey(ctx context.Context, p *Passkey) error
	ListPasskeys(ctx context.Context, userID int64) ([]Passkey, error)
	GetPasskeyByCredentialID(ctx context.Context, credentialID []byte) (Passkey, error)
	// UpdatePasskeyUse stores the credential record after a sign-in (its
	// sign count) and when it was used.
	UpdatePasskeyUse(ctx context.Context, id int64, credential []byte, at time.Time) error
	DeletePasskey(ctx context.Context, userID, id int64) error

	CreateDashboardLink(ctx context.Context, l *DashboardLink) error
	// UseDashboardLink marks the unused, unexpired link of kind with this
	// token hash used at at and returns it; ErrNotFound otherwise (also
	// when another use won the race).
	UseDashboardLink(ctx context.Context, kind string, hash []byte, at time.Time) (DashboardLink, error)
	// ListDashboardLinks lists a merchant's links not used nor expired at
	// at, newest first.
	ListDashboardLinks(ctx context.Context, merchantID int64, at time.Time) ([]DashboardLink, error)

	// AppendAudit adds an entry and sets its ID.
	AppendAudit(ctx context.Context, e *AuditEntry) error
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)

	// CreatePaymentLink inserts l and sets its ID (ErrConflict on a slug
	// taken).
	CreatePaymentLink(ctx context.Context, l *PaymentLink) error
	GetPaymentLink(ctx context.Context, id int64) (PaymentLink, error)
	GetPaymentLinkBySlug(ctx context.Context, slug string) (PaymentLink, error)
	ListPaymentLinks(ctx context.Context, merchantID int64) ([]PaymentLink, error)
	// SetPaymentLinkActive turns a merchant's link on or off.
	SetPaymentLinkActive(ctx context.Context, merchantID, id int64, active bool, at time.Time) error
	// AddPaymentLinkInvoice records that the link made the invoice.
	AddPaymentLinkInvoice(ctx context.Context, linkID, invoiceID int64) error
	// SearchInvoices lists a merchant's invoices matching f, newest first
	// (the dashboard's invoice list and search; indexed lookups, never a
	// scan of other merchants' rows).
	SearchInvoices(ctx context.Context, f InvoiceSearch) ([]Invoice, error)

	// InvoiceVolumes returns what merchantID's invoices created in
	// [from, to) (whole UTC days) took per day, chain and asset, by day,
	// chain, then token; days without invoices are left out. PostgreSQL reads the
	// roll-up its trigger maintains; SQLite (the embedded store) sums in
	// Go, exactly.
	InvoiceVolumes(ctx context.Context, merchantID int64, from, to time.Time) ([]DailyVolume, error)

	// ListPaymentLinkInvoices lists the ids of the invoices a link made,
	// newest first, at most limit.
	ListPaymentLinkInvoices(ctx context.Context, linkID int64, limit int) ([]int64, error)
}
