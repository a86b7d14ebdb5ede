package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Kinds of outbound transfers: money the service sends out of its custody
// (or asks the merchant to send) rather than takes in. Refunds and payouts
// are one record and one engine (docs/refunds.md).
const (
	// OutboundRefund gives a payer money back for an invoice.
	OutboundRefund = "REFUND"
	// OutboundPayout sends a merchant's money to an address it names.
	OutboundPayout = "PAYOUT"
)

// Outbound statuses. An outbound moves forward only:
//
//	AWAITING_DESTINATION → AWAITING_APPROVAL → QUEUED → BROADCAST → CONFIRMED
//	                                         ↘ AWAITING_PAYMENT ↗ (merchant-paid)
//
// skipping the gates it does not need, and may end FAILED or CANCELLED
// before anything was sent (FAILED after a send only when the chain proves
// the transaction can never be mined, or it reverted).
const (
	// OutboundAwaitingDestination: a refund made without a destination
	// waits for the payer to name one on the claim page.
	OutboundAwaitingDestination = "AWAITING_DESTINATION"
	// OutboundAwaitingApproval: above the merchant's threshold, it waits
	// for a second API key with the approve scope.
	OutboundAwaitingApproval = "AWAITING_APPROVAL"
	// OutboundQueued: the service will send it (service-paid).
	OutboundQueued = "QUEUED"
	// OutboundAwaitingPayment: a payment request was issued to the
	// merchant (merchant-paid); the service watches the chain for it.
	OutboundAwaitingPayment = "AWAITING_PAYMENT"
	// OutboundBroadcast: its transaction is on its way (signed and sent,
	// or seen on chain), not yet confirmed.
	OutboundBroadcast = "BROADCAST"
	// OutboundConfirmed: its transaction has the confirmations.
	OutboundConfirmed = "CONFIRMED"
	// OutboundFailed: it was not (and will not be) sent; Error says why.
	OutboundFailed = "FAILED"
	// OutboundCancelled: the merchant cancelled it, or an approver
	// rejected it, before anything was sent.
	OutboundCancelled = "CANCELLED"
)

// OutboundStatuses lists every status, in lifecycle order.
func OutboundStatuses() []string {
	return []string{OutboundAwaitingDestination, OutboundAwaitingApproval, OutboundQueued, OutboundAwaitingPayment,
		OutboundBroadcast, OutboundConfirmed, OutboundFailed, OutboundCancelled}
}

// OutboundOpen reports whether an outbound in this status still counts
// against what may be refunded and against the daily limits: everything
// but FAILED and CANCELLED.
func OutboundOpen(status string) bool {
	return status != OutboundFailed && status != OutboundCancelled
}

// OpenOutboundStatuses lists the statuses OutboundOpen holds for: a filter
// of the outbounds that count.
func OpenOutboundStatuses() []string {
	var open []string
	for _, st := range OutboundStatuses() {
		if OutboundOpen(st) {
			open = append(open, st)
		}
	}
	return open
}

// Who pays an outbound.
const (
	// PaidByService: the service sends it from a wallet it holds (the
	// merchant's payout wallet, or the deposit address the money is still
	// at).
	PaidByService = "SERVICE"
	// PaidByMerchant: the service issues a payment request (EIP-681) that
	// the merchant pays from any wallet, and recognises it on chain.
	PaidByMerchant = "MERCHANT"
)

// Where a service-paid outbound leaves from, chosen by the engine when it
// signs.
const (
	// SourcePayoutWallet: the merchant's payout wallet.
	SourcePayoutWallet = "PAYOUT_WALLET"
	// SourceDeposit: the invoice's deposit address, before its sweep.
	SourceDeposit = "DEPOSIT"
)

// Outbound is one refund or payout: a row of the outbounds table. Its
// JSON, as clients see it, is store/api's Refund or Payout.
type Outbound struct {
	ID int64 `db:"id"`
	// ChainID is the chain the refund or payout is sent on: the chain of
	// the store handle that created it (CreateOutbound sets it).
	ChainID    uint64 `db:"chain_id"`
	Kind       string `db:"kind"`
	MerchantID int64  `db:"merchant_id"`
	// InvoiceID is the refunded invoice; nil for a payout.
	InvoiceID *int64 `db:"invoice_id"`
	// BatchID groups the payouts of one batch request; "" for none.
	BatchID string `db:"batch_id"`
	// Reason is a refund's reason (RefundOverpayment, …); "" for a payout.
	Reason string `db:"reason"`
	// Reference is the merchant's own text (an order, a ticket).
	Reference string `db:"reference"`
	// The asset sent, fixed at creation: TokenAddress nil for the native
	// coin. Amount is in its base units.
	TokenAddress  *common.Address `db:"token_address"`
	AssetSymbol   string          `db:"asset_symbol"`
	AssetDecimals uint8           `db:"asset_decimals"`
	Amount        Amount          `db:"amount"`
	// Fiat is set when the amount was asked for in fiat: the fiat amount
	// (currency and minor units), the rate it was converted at and which
	// rate that was ("locked": the invoice's quote; "current").
	FiatCurrency string  `db:"fiat_currency"`
	FiatMinor    *Amount `db:"fiat_minor"`
	FiatRate     string  `db:"fiat_rate"`
	FiatRateKind string  `db:"fiat_rate_kind"`
	// Destination receives the money; nil until the payer names it on the
	// claim page.
	Destination *common.Address `db:"destination"`
	PaidBy      string          `db:"paid_by"`
	// PaymentURI is a merchant-paid outbound's payment request (EIP-681:
	// exactly Amount of the asset to Destination), set once the
	// destination is known; "" otherwise.
	PaymentURI string `db:"payment_uri"`
	// Source is where a service-paid outbound left from (SourcePayoutWallet,
	// SourceDeposit); "" until it is signed, and for merchant-paid ones.
	Source string `db:"source"`
	// FromAddress is the sending address once known: the wallet that
	// signed, or the address a merchant-paid transfer came from.
	FromAddress *common.Address `db:"from_address"`
	Status      string          `db:"status"`
	// Error is why it FAILED, or the last reason it is waiting (a payout
	// wallet too low, a fee ceiling); "" when all is well.
	Error string `db:"error"`
	// ClaimTokenHash is SHA-256 of the claim link's token; nil when the
	// refund was made with a destination.
	ClaimTokenHash []byte `db:"claim_token_hash"`
	// CreatedByKey is the API key that made it: 0 for the merchant's own
	// key, else an APIKey's id. ApprovedByKey is the key that approved it
	// (never the creator's).
	CreatedByKey  int64      `db:"created_by_key"`
	NeedsApproval bool       `db:"needs_approval"`
	ApprovedByKey *int64     `db:"approved_by_key"`
	ApprovedAt    *time.Time `db:"approved_at"`
	// CreatedByUser and ApprovedByUser are the dashboard users behind the
	// keys (0 / nil: an API key alone): approval needs a second person.
	CreatedByUser  int64  `db:"created_by_user"`
	ApprovedByUser *int64 `db:"approved_by_user"`
	// The transaction that carries it: the one the service signed, or the
	// merchant's transfer it recognised (LogIndex set for a token
	// transfer), and its block once mined.
	TxHash      *common.Hash `db:"tx_hash"`
	LogIndex    *int         `db:"log_index"`
	BlockNumber *uint64      `db:"block_number"`
	// CreatedBlock is the indexed head when it was made: a merchant-paid
	// transfer is looked for only above it.
	CreatedBlock uint64 `db:"created_block"`
	// Attempts counts the engine's retries (replacements), bounded like a
	// sweep's.
	Attempts      int        `db:"attempts"`
	NextAttemptAt *time.Time `db:"next_attempt_at"`
	LockedUntil   *time.Time `db:"locked_until"`
	CreatedAt     time.Time  `db:"created_at"`
	UpdatedAt     time.Time  `db:"updated_at"`
	BroadcastAt   *time.Time `db:"broadcast_at"`
	ConfirmedAt   *time.Time `db:"confirmed_at"`
	// SubmittedTxHash is the transaction a merchant named as the payment
	// of its merchant-paid request; the engine takes it once indexed if it
	// pays the request (docs/refunds.md). Nil when none was named.
	SubmittedTxHash *common.Hash `db:"submitted_tx_hash"`
	// Version increases with every update (optimistic concurrency).
	Version int64 `db:"version"`
}

// Asset returns the outbound's asset.
func (o *Outbound) Asset() Asset {
	if o.TokenAddress == nil || *o.TokenAddress == (common.Address{}) {
		return NativeAsset(o.AssetSymbol)
	}
	t := *o.TokenAddress
	return Asset{Symbol: o.AssetSymbol, Address: &t, Decimals: o.AssetDecimals}
}

// SetAsset records a as the outbound's asset (at creation).
func (o *Outbound) SetAsset(a Asset) {
	o.TokenAddress, o.AssetSymbol, o.AssetDecimals = a.Token(), a.Symbol, a.Decimals
	if o.TokenAddress == nil {
		o.AssetDecimals = NativeDecimals
	}
}

// Refund reasons.
const (
	RefundOverpayment = "overpayment"
	RefundWrongAsset  = "wrong_asset"
	// RefundWrongNetwork returns a payment that arrived on another chain
	// than its invoice's (Payment.WrongNetwork), on that chain.
	RefundWrongNetwork = "wrong_network"
	RefundLatePayment  = "late_payment"
	RefundFull         = "full"
	RefundPartial      = "partial"
)

// OutboundFilter selects outbounds for ListOutbounds, newest first. Zero
// fields do not filter.
type OutboundFilter struct {
	MerchantID int64
	Kind       string
	InvoiceID  int64
	BatchID    string
	Statuses   []string
	PaidBy     string
	// CreatedAfter (inclusive) bounds the creation time.
	CreatedAfter time.Time
	// BeforeID continues a listing: only ids smaller than it.
	BeforeID int64
	// Limit defaults to 100; at most 1000.
	Limit int
}

// API key scopes: what a key may do. The merchant's own key (the one made
// with the merchant) has every scope; keys made with POST
// /v1/merchant/api-keys have the ones they were given.
const (
	// ScopeRead: read invoices, refunds, payouts, the ledger, deliveries,
	// the merchant's profile and settings.
	ScopeRead = "read"
	// ScopeInvoices: create invoices.
	ScopeInvoices = "invoices"
	// ScopeRefunds: create and cancel refunds.
	ScopeRefunds = "refunds"
	// ScopePayouts: create and cancel payouts.
	ScopePayouts = "payouts"
	// ScopeApprove: approve or reject refunds and payouts waiting for
	// approval (never one the same key made).
	ScopeApprove = "approve"
	// ScopeAdmin: manage the merchant's profile (name, webhook_url,
	// underpayment tolerance), its webhook secret, branding and webhook
	// deliveries (replays). Never where the money goes: the settlement
	// address, API keys and payout settings are the merchant's own key's
	// alone (the owner).
	ScopeAdmin = "admin"
)

// AllScopes lists every scope.
func AllScopes() []string {
	return []string{ScopeRead, ScopeInvoices, ScopeRefunds, ScopePayouts, ScopeApprove, ScopeAdmin}
}

// Scopes is a set of scopes, stored as comma-separated text.
type Scopes []string

// Has reports whether s holds scope.
func (s Scopes) Has(scope string) bool { return slices.Contains(s, scope) }

// Value implements driver.Valuer.
func (s Scopes) Value() (driver.Value, error) { return strings.Join(s, ","), nil }

// Scan implements sql.Scanner.
func (s *Scopes) Scan(src any) error {
	var text string
	switch v := src.(type) {
	case string:
		text = v
	case []byte:
		text = string(v)
	case nil:
	default:
		return fmt.Errorf("scan scopes: unsupported type %T", src)
	}
	*s = nil
	for _, p := range strings.Split(text, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

// APIKey is an additional API key of a merchant, with scopes. The
// merchant's own key lives on the merchant row and has every scope.
type APIKey struct {
	ID         int64  `db:"id"`
	MerchantID int64  `db:"merchant_id"`
	Name       string `db:"name"`
	// Digest is HMAC-SHA256(PAY_SECRET_KEY, key): the lookup key. Hash is
	// its Argon2id hash; Prefix its first characters, safe to show.
	Digest    []byte     `db:"digest"`
	Hash      string     `db:"hash"`
	Prefix    string     `db:"prefix"`
	Scopes    Scopes     `db:"scopes"`
	CreatedAt time.Time  `db:"created_at"`
	RevokedAt *time.Time `db:"revoked_at"`
}

// AssetPolicy is a merchant's limits for one asset. Nil amounts are off.
type AssetPolicy struct {
	// Token is the asset (nil: the native coin).
	Token *common.Address `json:"token"`
	// ApprovalThreshold: a service-paid refund or payout above it waits
	// for a second key's approval.
	ApprovalThreshold *Amount `json:"approval_threshold,omitempty"`
	// DailyLimit caps what service-paid refunds and payouts may send in
	// any 24 hours.
	DailyLimit *Amount `json:"daily_limit,omitempty"`
	// Reserve is what the sweep keeps in the payout wallet: while the
	// payout wallet holds less, an invoice's sweep goes there instead of
	// to the settlement address.
	Reserve *Amount `json:"reserve,omitempty"`
}

// PayoutPolicy is a merchant's controls on the money the service sends out
// for it. The zero value has no threshold, no limit, no reserve and no
// allowlist.
type PayoutPolicy struct {
	MerchantID int64
	Assets     []AssetPolicy
	// AllowlistEnabled restricts payouts (not refunds) to Allowlist.
	AllowlistEnabled bool
	Allowlist        []common.Address
	// PayingWallets are the merchant's own wallets that pay its
	// merchant-paid refunds and payouts: a transfer from one of them of
	// exactly a request's asset and amount to its destination is taken as
	// that request's payment without being named (docs/refunds.md).
	PayingWallets []common.Address
	UpdatedAt     time.Time
}

// Pays reports whether from is one of the merchant's paying wallets.
func (p PayoutPolicy) Pays(from common.Address) bool { return slices.Contains(p.PayingWallets, from) }

// For returns the policy of an asset (the zero AssetPolicy when none).
func (p PayoutPolicy) For(token *common.Address) AssetPolicy {
	for _, a := range p.Assets {
		if SameToken(a.Token, token) {
			return a
		}
	}
	return AssetPolicy{Token: token}
}

// Allowed reports whether a payout may go to dest.
func (p PayoutPolicy) Allowed(dest common.Address) bool {
	return !p.AllowlistEnabled || slices.Contains(p.Allowlist, dest)
}

// Roles of the wallets the service holds keys for (besides deposit
// addresses).
const (
	WalletPayout = "payout" // a merchant's payout wallet
	WalletSweep  = "sweep"  // the sweep wallet
	WalletFunder = "funder" // the gas funder
)

// ServiceWallet is an address the service holds the key of, recorded so
// that every process (the API's included, which holds no key) refuses it
// as a destination, and the ledger's reconciliation knows what to compare.
type ServiceWallet struct {
	Address common.Address `db:"address"`
	Role    string         `db:"role"`
	// MerchantID is the owner of a payout wallet; nil for the others.
	MerchantID *int64    `db:"merchant_id"`
	CreatedAt  time.Time `db:"created_at"`
	// LedgerFromBlock is the block of the wallet's opening balance in the
	// ledger: the balance holds every movement of the blocks up to it, so
	// the wallet's ledger balance is that opening balance plus the entries
	// of later blocks. Nil before the ledger started.
	LedgerFromBlock *uint64 `db:"ledger_from_block"`
}

// Why a transfer does not pay a merchant-paid request (PaysRequest,
// matchSubmitted): the outbound's Error quotes them.
var (
	// ErrNotThisRequest: the transfer is not of exactly the requested
	// asset and amount to the destination.
	ErrNotThisRequest = errors.New("none of its transfers is of exactly the requested asset and amount to the destination")
	// ErrSentByService: the transfer was sent by the service (a wallet it
	// holds, or a transaction it signed): it pays no merchant-paid request.
	ErrSentByService = errors.New("it was sent by a wallet of this service, not by the merchant")
	// ErrTransferTaken: the transfer already pays another refund or payout.
	ErrTransferTaken = errors.New("it already pays another refund or payout")
	// ErrBeforeRequest: the transfer was mined before the request was made.
	ErrBeforeRequest = errors.New("it was mined before the request was made")
)

// PaidWith returns nil when tr moves exactly o's asset and amount to o's
// destination in a block after o was made, else why not. It does not look
// at who sent it (OutboundStore.SentByService, the merchant's paying
// wallets) nor whether another outbound has it.
func (o Outbound) PaidWith(tr InboundTransfer) error {
	if o.Destination == nil || tr.To != *o.Destination || !SameToken(tr.Token, o.TokenAddress) ||
		tr.Amount.Cmp(o.Amount) != 0 {
		return ErrNotThisRequest
	}
	if tr.BlockNumber <= o.CreatedBlock {
		return ErrBeforeRequest
	}
	return nil
}

// TransferReader reads a transaction's transfers from the index (the
// chain store's methods).
type TransferReader interface {
	GetTx(ctx context.Context, hash common.Hash) (Transaction, error)
	ListTokenTransfersByTx(ctx context.Context, hash common.Hash) ([]TokenTransfer, error)
}

// TransfersOf returns the indexed transfers of transaction h — its native
// value, if any, and its token Transfer logs — and whether h is indexed
// at all.
func TransfersOf(ctx context.Context, st TransferReader, h common.Hash) ([]InboundTransfer, bool, error) {
	t, err := st.GetTx(ctx, h)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var out []InboundTransfer
	if t.To != nil && !t.ValueWei.IsZero() {
		out = append(out, InboundTransfer{TxHash: h, BlockNumber: t.BlockNumber, TxIndex: t.Index,
			From: t.From, To: *t.To, Amount: t.ValueWei})
	}
	logs, err := st.ListTokenTransfersByTx(ctx, h)
	if err != nil {
		return nil, false, err
	}
	for _, l := range logs {
		token, li := l.Token, l.LogIndex
		out = append(out, InboundTransfer{TxHash: h, LogIndex: &li, BlockNumber: l.BlockNumber, TxIndex: l.TxIndex,
			Token: &token, From: l.From, To: l.To, Amount: l.Value})
	}
	return out, true, nil
}
