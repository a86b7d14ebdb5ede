package store

import (
	"encoding/json"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Merchant is an account that takes payments. Credentials are stored only as
// hashes or ciphertext.
type Merchant struct {
	ID   int64  `db:"id" json:"id"`
	Name string `db:"name" json:"name"`
	// APIKeyDigest is HMAC-SHA256(PAY_SECRET_KEY, api_key): the lookup key.
	APIKeyDigest []byte `db:"api_key_digest" json:"-"`
	// APIKeyHash is the Argon2id hash of the api_key in PHC string format.
	APIKeyHash string `db:"api_key_hash" json:"-"`
	// APIKeyPrefix is the first characters of the api_key, safe to display.
	APIKeyPrefix string `db:"api_key_prefix" json:"api_key_prefix"`
	WebhookURL   string `db:"webhook_url" json:"webhook_url"`
	// WebhookSecretCiphertext is the webhook secret sealed with AES-256-GCM.
	WebhookSecretCiphertext []byte         `db:"webhook_secret_ciphertext" json:"-"`
	SettlementAddress       common.Address `db:"settlement_address" json:"settlement_address"`
	CreatedAt               time.Time      `db:"created_at" json:"created_at"`
	UpdatedAt               time.Time      `db:"updated_at" json:"updated_at"`
	// DisabledAt, when set, makes every credential of the merchant invalid.
	DisabledAt *time.Time `db:"disabled_at" json:"disabled_at,omitempty"`
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

// Invoice is a request for payment to a deposit address of its own.
//
// Its JSON form is the invoice as the merchant API shows it (webhook event
// data is a snapshot of it); fields tagged json:"-" are internal.
type Invoice struct {
	ID              int64          `db:"id" json:"id"`
	MerchantID      int64          `db:"merchant_id" json:"merchant_id"`
	Status          string         `db:"status" json:"status"`
	AmountWei       Amount         `db:"amount_wei" json:"amount_wei"`
	PaidWei         Amount         `db:"paid_wei" json:"paid_wei"`
	ChainID         uint64         `db:"chain_id" json:"chain_id"`
	DepositAddress  common.Address `db:"deposit_address" json:"deposit_address"`
	DerivationIndex uint32         `db:"derivation_index" json:"-"`
	// PaymentURI is the EIP-681 request, fixed at creation.
	PaymentURI  string  `db:"payment_uri" json:"payment_uri"`
	OrderID     string  `db:"order_id" json:"order_id,omitempty"`
	Description string  `db:"description" json:"description,omitempty"`
	Metadata    RawJSON `db:"metadata" json:"metadata,omitempty"`
	// RedirectURL is where the checkout page sends the payer back once the
	// invoice is paid; "" for none. Fixed at creation.
	RedirectURL string `db:"redirect_url" json:"redirect_url,omitempty"`
	// LookupTokenHash is SHA-256 of the public lookup token.
	LookupTokenHash []byte `db:"lookup_token_hash" json:"-"`
	Underpaid       bool   `db:"underpaid" json:"underpaid"`
	Overpaid        bool   `db:"overpaid" json:"overpaid"`
	PaidLate        bool   `db:"paid_late" json:"paid_late"`
	// NeedsAttention flags an invoice an operator must look at (for example
	// a settled invoice whose payment was reorged out).
	NeedsAttention bool       `db:"needs_attention" json:"needs_attention"`
	ExpiresAt      time.Time  `db:"expires_at" json:"expires_at"`
	PaidAt         *time.Time `db:"paid_at" json:"paid_at,omitempty"`
	ConfirmedAt    *time.Time `db:"confirmed_at" json:"confirmed_at,omitempty"`
	SettledAt      *time.Time `db:"settled_at" json:"settled_at,omitempty"`
	CreatedAt      time.Time  `db:"created_at" json:"created_at"`
	UpdatedAt      time.Time  `db:"updated_at" json:"updated_at"`

	SweepStatus string       `db:"sweep_status" json:"sweep_status"`
	SweepTxHash *common.Hash `db:"sweep_tx_hash" json:"sweep_tx_hash"`
	SweepError  string       `db:"sweep_error" json:"sweep_error"`
	// SweptWei is what reached the settlement address; DustWei what was left
	// at the deposit address after the sweep.
	SweptWei           *Amount    `db:"swept_wei" json:"swept_wei,omitempty"`
	DustWei            *Amount    `db:"dust_wei" json:"dust_wei,omitempty"`
	SweepAttempts      int        `db:"sweep_attempts" json:"-"`
	SweepNextAttemptAt *time.Time `db:"sweep_next_attempt_at" json:"-"`
	SweepLockedUntil   *time.Time `db:"sweep_locked_until" json:"-"`

	// Version increases with every update; UpdateInvoice uses it for
	// optimistic concurrency.
	Version int64 `db:"version" json:"-"`

	// The invoice's asset, fixed at creation (see Asset): TokenAddress is
	// nil for the native coin, else the ERC-20 contract; AssetSymbol and
	// AssetDecimals are snapshots of the token's configuration. AmountWei,
	// PaidWei, SweptWei and DustWei are base units of this asset.
	TokenAddress  *common.Address `db:"token_address" json:"-"`
	AssetSymbol   string          `db:"asset_symbol" json:"-"`
	AssetDecimals uint8           `db:"asset_decimals" json:"-"`
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

// TokenAmounts is what the JSON of a token invoice shows instead of
// amount_wei and paid_wei: the asset ({"symbol", "address" EIP-55,
// "decimals"}) and the amounts in base units (decimal strings) and
// formatted ("12.5"). Embed a *TokenAmounts in a view struct, nil for a
// native-coin invoice, so that native JSON stays as it was.
type TokenAmounts struct {
	Asset           Asset  `json:"asset"`
	Amount          Amount `json:"amount"`
	AmountFormatted string `json:"amount_formatted"`
	Paid            Amount `json:"paid"`
	PaidFormatted   string `json:"paid_formatted"`
}

// TokenAmounts returns the invoice's token amounts; nil for a native-coin
// invoice.
func (inv *Invoice) TokenAmounts() *TokenAmounts {
	if !inv.IsToken() {
		return nil
	}
	a := inv.Asset()
	return &TokenAmounts{Asset: a, Amount: inv.AmountWei, AmountFormatted: a.Format(inv.AmountWei),
		Paid: inv.PaidWei, PaidFormatted: a.Format(inv.PaidWei)}
}

// MarshalInvoiceJSON encodes inv as events carry it (webhook data): a
// native-coin invoice exactly as json.Marshal(inv); a token invoice with
// the TokenAmounts members instead of amount_wei and paid_wei (members in
// name order, which JSON does not make significant).
func MarshalInvoiceJSON(inv Invoice) ([]byte, error) {
	ta := inv.TokenAmounts()
	if ta == nil {
		return inv.MarshalJSON() // what json.Marshal(inv) writes, without compacting it again
	}
	type plain Invoice // no MarshalJSON to be promoted
	return json.Marshal(struct {
		plain
		DepositAddress ChecksumAddress `json:"deposit_address"`
		// Shadow (and, being nil, leave out) the wei members.
		AmountWei *Amount `json:"amount_wei,omitempty"`
		PaidWei   *Amount `json:"paid_wei,omitempty"`
		*TokenAmounts
	}{plain: plain(inv), DepositAddress: ChecksumAddress(inv.DepositAddress), TokenAmounts: ta})
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
