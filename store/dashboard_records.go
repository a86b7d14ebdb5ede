package store

import (
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// The merchant dashboard's records (issue #35, docs/dashboard.md): the
// people who sign in for a merchant, their sessions, second factors,
// one-time links, the audit log of what they did, and payment links.

// Dashboard roles: each maps onto the API key scopes (docs/dashboard.md).
const (
	// RoleOwner may do everything, including what only the merchant's own
	// key may: the settlement address, API keys, payout settings, users.
	RoleOwner = "owner"
	// RoleApprover reads and approves or rejects refunds and payouts.
	RoleApprover = "approver"
	// RoleAccountant reads, makes refunds and payouts, exports the ledger.
	RoleAccountant = "accountant"
	// RoleDeveloper reads, makes invoices, manages webhooks and branding.
	RoleDeveloper = "developer"
	// RoleViewer reads.
	RoleViewer = "viewer"
)

// DashboardRoles lists every role, most powerful first.
func DashboardRoles() []string {
	return []string{RoleOwner, RoleApprover, RoleAccountant, RoleDeveloper, RoleViewer}
}

// DashboardUser is a person who signs in to a merchant's dashboard. The
// email is unique across the service (stored lower case).
type DashboardUser struct {
	ID         int64  `db:"id"`
	MerchantID int64  `db:"merchant_id"`
	Email      string `db:"email"`
	Name       string `db:"name"`
	Role       string `db:"role"`
	// PasswordHash is an Argon2id hash (PHC string); "" until the user
	// sets a password (an invitation not yet accepted).
	PasswordHash string `db:"password_hash"`
	// TOTPSecret is the sealed (AES-256-GCM) TOTP secret, nil without one;
	// TOTPEnabledAt is set once a first code confirmed it.
	TOTPSecret    []byte     `db:"totp_secret"`
	TOTPEnabledAt *time.Time `db:"totp_enabled_at"`
	// TOTPLastStep is the last time step a code was accepted for: a code
	// is never accepted twice.
	TOTPLastStep int64 `db:"totp_last_step"`
	// FailedSignIns counts consecutive failed password sign-ins;
	// LockedUntil is set when they reached the limit.
	FailedSignIns int        `db:"failed_sign_ins"`
	LockedUntil   *time.Time `db:"locked_until"`
	// WebAuthnID is the user handle passkeys are bound to (random bytes).
	WebAuthnID []byte     `db:"webauthn_id"`
	DisabledAt *time.Time `db:"disabled_at"`
	CreatedAt  time.Time  `db:"created_at"`
	UpdatedAt  time.Time  `db:"updated_at"`
}

// DashboardSession is a signed-in browser. The cookie holds a random
// token; only its SHA-256 is stored.
type DashboardSession struct {
	ID         int64     `db:"id"`
	TokenHash  []byte    `db:"token_hash"`
	UserID     int64     `db:"user_id"`
	MerchantID int64     `db:"merchant_id"`
	CreatedAt  time.Time `db:"created_at"`
	LastSeenAt time.Time `db:"last_seen_at"`
	ExpiresAt  time.Time `db:"expires_at"`
	// SecondFactorAt is when the session last passed a second factor
	// (passkey or TOTP): owner actions on where money goes need it recent.
	SecondFactorAt *time.Time `db:"second_factor_at"`
	// Pending is a session that passed the password but still owes its
	// second factor: it may do nothing but pass it.
	Pending   bool       `db:"pending"`
	UserAgent string     `db:"user_agent"`
	RevokedAt *time.Time `db:"revoked_at"`
}

// Passkey is a WebAuthn credential of a dashboard user.
type Passkey struct {
	ID           int64  `db:"id"`
	UserID       int64  `db:"user_id"`
	CredentialID []byte `db:"credential_id"`
	Name         string `db:"name"`
	// Credential is the library's credential record (JSON: public key,
	// sign count, flags, transports).
	Credential []byte     `db:"credential"`
	CreatedAt  time.Time  `db:"created_at"`
	LastUsedAt *time.Time `db:"last_used_at"`
}

// Kinds of one-time dashboard links.
const (
	// LinkInvitation makes a new user of a merchant with a role.
	LinkInvitation = "invitation"
	// LinkReset sets a user's password.
	LinkReset = "reset"
	// LinkSignIn signs a user in once (payd dev's banner).
	LinkSignIn = "sign_in"
)

// DashboardLink is a one-time link (invitation, password reset, sign-in):
// the URL holds a random token, only its SHA-256 is stored, and it is used
// at most once before it expires.
type DashboardLink struct {
	ID         int64  `db:"id"`
	Kind       string `db:"kind"`
	TokenHash  []byte `db:"token_hash"`
	MerchantID int64  `db:"merchant_id"`
	// UserID is the user a reset or sign-in link is for; nil for an
	// invitation, which names the Email and Role of the user to make.
	UserID    *int64     `db:"user_id"`
	Email     string     `db:"email"`
	Role      string     `db:"role"`
	CreatedBy string     `db:"created_by"`
	CreatedAt time.Time  `db:"created_at"`
	ExpiresAt time.Time  `db:"expires_at"`
	UsedAt    *time.Time `db:"used_at"`
}

// AuditEntry is one line of a merchant's audit log: who did what to which
// object. Append-only.
type AuditEntry struct {
	ID         int64 `db:"id"`
	MerchantID int64 `db:"merchant_id"`
	// UserID is the dashboard user who acted; nil for the operator or an
	// API key. Actor is how the log names them ("ana@example.com").
	UserID *int64 `db:"user_id"`
	Actor  string `db:"actor"`
	// Action is a stable name ("refund.approve", "settlement_address.change").
	Action string `db:"action"`
	// Subject names the object ("refund 12"); Detail says more (never a
	// secret).
	Subject string    `db:"subject"`
	Detail  string    `db:"detail"`
	At      time.Time `db:"at"`
}

// AuditFilter selects a merchant's audit entries, newest first.
type AuditFilter struct {
	MerchantID int64
	// BeforeID continues a listing (0: from the newest).
	BeforeID int64
	// Action keeps one action ("" every action).
	Action string
	Limit  int
}

// PaymentLink is a reusable link that makes an invoice per visit: a fixed
// price (Amount of Asset, or PriceAmount of PriceCurrency), or an amount
// of Asset the payer chooses between MinAmount and MaxAmount.
type PaymentLink struct {
	ID         int64 `db:"id"`
	MerchantID int64 `db:"merchant_id"`
	// Slug is the public part of the link's URL (random, not secret).
	Slug        string `db:"slug"`
	Name        string `db:"name"`
	Description string `db:"description"`
	// Asset is the asset's symbol ("" the native coin).
	Asset         string     `db:"asset"`
	Amount        *Amount    `db:"amount"`
	MinAmount     *Amount    `db:"min_amount"`
	MaxAmount     *Amount    `db:"max_amount"`
	PriceAmount   string     `db:"price_amount"`
	PriceCurrency string     `db:"price_currency"`
	Active        bool       `db:"active"`
	CreatedAt     time.Time  `db:"created_at"`
	UpdatedAt     time.Time  `db:"updated_at"`
	DisabledAt    *time.Time `db:"disabled_at"`
}

// InvoiceSearch selects a merchant's invoices, newest first, for the
// dashboard's list: InvoiceFilter's filters plus the asset and, when set,
// exactly one of the lookups (by id, order id, deposit address or the
// hash of a transaction that paid it).
type InvoiceSearch struct {
	InvoiceFilter
	// AssetSet filters by asset: Token nil for the native coin.
	AssetSet bool
	Token    *common.Address
	// The lookups (zero: none). A lookup matches invoices it names and
	// still applies the filters above.
	ID             int64
	OrderID        string
	DepositAddress *common.Address
	TxHash         *common.Hash
}

// DailyVolume is what a merchant's invoices created on Day (UTC) in one
// asset of one chain (Token nil: the chain's native coin) took: how many,
// and the sum of what was paid to them, in the asset's base units. An
// invoice moved to another chain it quoted counts under the asset it is
// paid in.
type DailyVolume struct {
	Day      time.Time
	ChainID  uint64
	Token    *common.Address
	Invoices int64
	Paid     Amount
}
