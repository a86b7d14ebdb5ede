package store

import (
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Merchant is an account that takes payments. Credentials are stored only as
// hashes or ciphertext.
type Merchant struct {
	ID   int64  `db:"id"`
	Name string `db:"name"`
	// APIKeyDigest is HMAC-SHA256(PAY_SECRET_KEY, api_key): the lookup key.
	APIKeyDigest []byte `db:"api_key_digest"`
	// APIKeyHash is the Argon2id hash of the api_key in PHC string format.
	APIKeyHash string `db:"api_key_hash"`
	// APIKeyPrefix is the first characters of the api_key, safe to display.
	APIKeyPrefix string `db:"api_key_prefix"`
	WebhookURL   string `db:"webhook_url"`
	// WebhookSecretCiphertext is the webhook secret sealed with AES-256-GCM.
	WebhookSecretCiphertext []byte         `db:"webhook_secret_ciphertext"`
	SettlementAddress       common.Address `db:"settlement_address"`
	CreatedAt               time.Time      `db:"created_at"`
	UpdatedAt               time.Time      `db:"updated_at"`
	// DisabledAt, when set, makes every credential of the merchant invalid.
	DisabledAt *time.Time `db:"disabled_at"`
	// Tolerance is how much less than a fiat invoice's price still pays
	// it; every fiat invoice keeps a snapshot of it from its creation
	// (Pricing.Tolerance).
	Tolerance MerchantTolerance `db:"underpayment_tolerance"`
	// ExternalID is the id a host gives the merchant in its own system
	// (unique; "" for none): invoice.Service.EnsureMerchant finds it by
	// it. Fixed at creation.
	ExternalID string `db:"external_id"`
}

// Invoice statuses. See DESIGN.md §3.
const (
	StatusPending   = "PENDING"
	StatusPaid      = "PAID"
	StatusConfirmed = "CONFIRMED"
	StatusSettled   = "SETTLED"
	StatusExpired   = "EXPIRED"
)

// Sweep statuses of an invoice.
const (
	SweepNone    = "NONE"
	SweepQueued  = "QUEUED"
	SweepFunding = "FUNDING"
	SweepSent    = "SENT"
	SweepSwept   = "SWEPT"
	SweepFailed  = "FAILED"
)

// Invoice is a request for payment to a deposit address of its own: a row
// of the database. Its JSON, as clients see it, is store/api's Invoice.
type Invoice struct {
	ID              int64          `db:"id"`
	MerchantID      int64          `db:"merchant_id"`
	Status          string         `db:"status"`
	AmountWei       Amount         `db:"amount_wei"`
	PaidWei         Amount         `db:"paid_wei"`
	ChainID         uint64         `db:"chain_id"`
	DepositAddress  common.Address `db:"deposit_address"`
	DerivationIndex uint32         `db:"derivation_index"`
	// PaymentURI is the EIP-681 request, fixed at creation.
	PaymentURI  string  `db:"payment_uri"`
	OrderID     string  `db:"order_id"`
	Description string  `db:"description"`
	Metadata    RawJSON `db:"metadata"`
	// RedirectURL is where the checkout page sends the payer back once the
	// invoice is paid; "" for none. Fixed at creation.
	RedirectURL string `db:"redirect_url"`
	// LookupTokenHash is SHA-256 of the public lookup token.
	LookupTokenHash []byte `db:"lookup_token_hash"`
	Underpaid       bool   `db:"underpaid"`
	Overpaid        bool   `db:"overpaid"`
	PaidLate        bool   `db:"paid_late"`
	// NeedsAttention flags an invoice an operator must look at (for example
	// a settled invoice whose payment was reorged out).
	NeedsAttention bool       `db:"needs_attention"`
	ExpiresAt      time.Time  `db:"expires_at"`
	PaidAt         *time.Time `db:"paid_at"`
	ConfirmedAt    *time.Time `db:"confirmed_at"`
	SettledAt      *time.Time `db:"settled_at"`
	CreatedAt      time.Time  `db:"created_at"`
	UpdatedAt      time.Time  `db:"updated_at"`

	SweepStatus string       `db:"sweep_status"`
	SweepTxHash *common.Hash `db:"sweep_tx_hash"`
	SweepError  string       `db:"sweep_error"`
	// SweptWei is what reached the settlement address; DustWei what was left
	// at the deposit address after the sweep.
	SweptWei           *Amount    `db:"swept_wei"`
	DustWei            *Amount    `db:"dust_wei"`
	SweepAttempts      int        `db:"sweep_attempts"`
	SweepNextAttemptAt *time.Time `db:"sweep_next_attempt_at"`
	SweepLockedUntil   *time.Time `db:"sweep_locked_until"`

	// Version increases with every update; UpdateInvoice uses it for
	// optimistic concurrency.
	Version int64 `db:"version"`

	// The invoice's asset, fixed at creation (see Asset): TokenAddress is
	// nil for the native coin, else the ERC-20 contract; AssetSymbol and
	// AssetDecimals are snapshots of the token's configuration. AmountWei,
	// PaidWei, SweptWei and DustWei are base units of this asset.
	TokenAddress  *common.Address `db:"token_address"`
	AssetSymbol   string          `db:"asset_symbol"`
	AssetDecimals uint8           `db:"asset_decimals"`

	// Pricing is set on an invoice priced in a fiat currency (issue 25,
	// docs/pricing.md), fixed at creation: the price, the tolerance and a
	// locked quote per accepted asset. Its first quote is the invoice's
	// asset (TokenAddress…, AmountWei, PaymentURI); a payment in any
	// quoted asset counts. Nil for an invoice priced in its asset.
	Pricing *Pricing `db:"pricing"`
	// PaidValue is what the counted payments of a fiat invoice are worth
	// at its locked quotes, in minor units of its price's currency
	// (settlement sets it; see PaidFiat). PaidWei is then the base units
	// paid in the invoice's own asset (its first quote) only.
	PaidValue *Amount `db:"paid_value"`
	// LateValuation is set when money arrived at a fiat invoice after its
	// late window: both valuations, for the merchant to decide.
	LateValuation *LateValuation `db:"late_valuation"`
	// SweepAsset is the asset a fiat invoice's sweep moves first (chosen
	// by settlement when it queues the sweep: the native coin when some
	// was paid, else the first quoted token paid); the other quoted assets
	// that arrived follow it (docs/tokens.md). Nil for an invoice priced
	// in its asset, whose sweep moves its asset.
	SweepAsset *Asset `db:"sweep_asset"`
}

// Asset returns the invoice's asset. A native-coin invoice always has
// NativeDecimals, whatever was stored.
func (inv *Invoice) Asset() Asset {
	if inv.TokenAddress == nil || *inv.TokenAddress == (common.Address{}) {
		return NativeAsset(inv.AssetSymbol)
	}
	t := *inv.TokenAddress
	return Asset{Symbol: inv.AssetSymbol, Address: &t, Decimals: inv.AssetDecimals}
}

// SetAsset records a as the invoice's asset (use it at creation only).
func (inv *Invoice) SetAsset(a Asset) {
	inv.TokenAddress, inv.AssetSymbol, inv.AssetDecimals = a.Token(), a.Symbol, a.Decimals
	if inv.TokenAddress == nil {
		inv.AssetDecimals = NativeDecimals
	}
}

// IsToken reports whether the invoice is for an ERC-20 token.
func (inv *Invoice) IsToken() bool {
	return inv.TokenAddress != nil && *inv.TokenAddress != (common.Address{})
}

// Idempotency record statuses.
const (
	IdempotencyInFlight = "IN_FLIGHT"
	IdempotencyDone     = "DONE"
)

// IdempotencyRecord remembers a request made with an Idempotency-Key, and
// its response once there is one.
type IdempotencyRecord struct {
	MerchantID int64  `db:"merchant_id"`
	Key        string `db:"key"`
	// RequestHash is SHA-256 of the request (method, path, body).
	RequestHash []byte `db:"request_hash"`
	Status      string `db:"status"`
	// ResponseStatus and ResponseBody are set when Status is DONE. The body
	// may hold a secret shown once (the lookup token), so callers store it
	// sealed.
	ResponseStatus *int   `db:"response_status"`
	ResponseBody   []byte `db:"response_body"`
	InvoiceID      *int64 `db:"invoice_id"`
	// LockedUntil bounds how long an IN_FLIGHT record blocks retries of a
	// request whose process died.
	LockedUntil time.Time `db:"locked_until"`
	CreatedAt   time.Time `db:"created_at"`
	ExpiresAt   time.Time `db:"expires_at"`
}
