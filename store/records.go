package store

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
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
}

// Payment is an on-chain transfer to an invoice's deposit address.
type Payment struct {
	ID        int64       `db:"id" json:"id"`
	InvoiceID int64       `db:"invoice_id" json:"invoice_id"`
	TxHash    common.Hash `db:"tx_hash" json:"tx_hash"`
	// LogIndex is the log of a token transfer; NativeLogIndex for a plain
	// transfer of the native coin.
	LogIndex    int            `db:"log_index" json:"log_index"`
	BlockNumber uint64         `db:"block_number" json:"block_number"`
	BlockHash   common.Hash    `db:"block_hash" json:"block_hash"`
	From        common.Address `db:"from_address" json:"from"`
	AmountWei   Amount         `db:"amount_wei" json:"amount_wei"`
	// Late is true when the payment arrived after the invoice expired.
	Late      bool      `db:"late" json:"late"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

// NativeLogIndex is the LogIndex of a native-coin payment (no log).
const NativeLogIndex = -1

// Block is an indexed block, with the hash the node reported.
type Block struct {
	Number     uint64      `db:"number" json:"number"`
	Hash       common.Hash `db:"hash" json:"hash"`
	ParentHash common.Hash `db:"parent_hash" json:"parent_hash"`
	// Timestamp is the block time in seconds since the Unix epoch.
	Timestamp uint64         `db:"timestamp" json:"timestamp"`
	Miner     common.Address `db:"miner" json:"miner"`
	GasLimit  uint64         `db:"gas_limit" json:"gas_limit"`
	GasUsed   uint64         `db:"gas_used" json:"gas_used"`
	// BaseFeeWei is nil on chains (or blocks) without EIP-1559.
	BaseFeeWei *Amount   `db:"base_fee_wei" json:"base_fee_wei"`
	TxCount    int       `db:"tx_count" json:"tx_count"`
	IndexedAt  time.Time `db:"indexed_at" json:"-"`
}

// Transaction is an indexed transaction.
type Transaction struct {
	Hash        common.Hash    `db:"hash" json:"hash"`
	BlockNumber uint64         `db:"block_number" json:"block_number"`
	BlockHash   common.Hash    `db:"block_hash" json:"block_hash"`
	Index       int            `db:"tx_index" json:"transaction_index"`
	From        common.Address `db:"from_address" json:"from"`
	// To is nil for a contract creation.
	To       *common.Address `db:"to_address" json:"to"`
	ValueWei Amount          `db:"value_wei" json:"value_wei"`
	Nonce    uint64          `db:"nonce" json:"nonce"`
	Gas      uint64          `db:"gas" json:"gas"`
	Type     uint8           `db:"type" json:"type"`
	// GasPriceWei is the legacy gas price, or the effective price when the
	// node reports one; nil when unknown.
	GasPriceWei       *Amount `db:"gas_price_wei" json:"gas_price_wei,omitempty"`
	MaxFeeWei         *Amount `db:"max_fee_wei" json:"max_fee_wei,omitempty"`
	MaxPriorityFeeWei *Amount `db:"max_priority_fee_wei" json:"max_priority_fee_wei,omitempty"`
	Input             []byte  `db:"input" json:"input"`
}

// Reorg records a chain reorganisation the indexer followed.
type Reorg struct {
	ID int64 `db:"id" json:"id"`
	// ForkBlock is the first block number that was replaced (the common
	// ancestor is ForkBlock-1).
	ForkBlock uint64 `db:"fork_block" json:"fork_block"`
	Depth     int    `db:"depth" json:"depth"`
	// OldHashes are the orphaned blocks' hashes, oldest first; NewHashes
	// the replacing blocks known when the reorg was detected.
	OldHashes  HashList  `db:"old_hashes" json:"old_hashes"`
	NewHashes  HashList  `db:"new_hashes" json:"new_hashes"`
	DetectedAt time.Time `db:"detected_at" json:"detected_at"`
}

// Cursor is a named position on the indexed chain (the indexer's head,
// settlement's last processed block).
type Cursor struct {
	Name        string      `db:"name"`
	BlockNumber uint64      `db:"block_number"`
	BlockHash   common.Hash `db:"block_hash"`
	UpdatedAt   time.Time   `db:"updated_at"`
}

// Cursor names.
const (
	CursorIndexer    = "indexer"
	CursorSettlement = "settlement"
)

// Event types emitted by state transitions (the transactional outbox).
const (
	EventInvoicePaid        = "invoice.paid"
	EventInvoiceConfirmed   = "invoice.confirmed"
	EventInvoiceSettled     = "invoice.settled"
	EventInvoiceExpired     = "invoice.expired"
	EventInvoiceUnderpaid   = "invoice.underpaid"
	EventInvoiceReverted    = "invoice.reverted"
	EventInvoiceSweepFailed = "invoice.sweep_failed"
)

// Event is an outbox entry written in the same database transaction as the
// state change it reports. Data is a JSON snapshot of the invoice at that
// moment.
type Event struct {
	ID           int64      `db:"id" json:"id"`
	Type         string     `db:"type" json:"type"`
	MerchantID   int64      `db:"merchant_id" json:"merchant_id"`
	InvoiceID    int64      `db:"invoice_id" json:"invoice_id"`
	Data         RawJSON    `db:"data" json:"data"`
	CreatedAt    time.Time  `db:"created_at" json:"created_at"`
	DispatchedAt *time.Time `db:"dispatched_at" json:"-"`
}

// NewInvoiceEvent returns an event of type typ whose data is a snapshot of
// inv.
func NewInvoiceEvent(typ string, inv Invoice, at time.Time) (Event, error) {
	data, err := json.Marshal(inv)
	if err != nil {
		return Event{}, err
	}
	return Event{Type: typ, MerchantID: inv.MerchantID, InvoiceID: inv.ID, Data: data, CreatedAt: at}, nil
}

// Delivery statuses.
const (
	DeliveryPending   = "PENDING"
	DeliveryDelivered = "DELIVERED"
	DeliveryFailed    = "FAILED"
)

// Delivery is the webhook delivery of one event to its merchant.
type Delivery struct {
	ID         int64  `db:"id" json:"id"`
	EventID    int64  `db:"event_id" json:"event_id"`
	MerchantID int64  `db:"merchant_id" json:"merchant_id"`
	InvoiceID  int64  `db:"invoice_id" json:"invoice_id"`
	EventType  string `db:"event_type" json:"event_type"`
	Status     string `db:"status" json:"status"`
	Delivered  bool   `db:"delivered" json:"delivered"`
	// ResponseStatus is nil on a timeout or network error.
	ResponseStatus *int       `db:"response_status" json:"response_status"`
	Attempt        int        `db:"attempt" json:"attempt"`
	LastAttemptAt  *time.Time `db:"last_attempt_at" json:"last_attempt_at"`
	NextAttemptAt  *time.Time `db:"next_attempt_at" json:"next_attempt_at"`
	LastError      string     `db:"last_error" json:"last_error"`
	LockedUntil    *time.Time `db:"locked_until" json:"-"`
	CreatedAt      time.Time  `db:"created_at" json:"created_at"`
	UpdatedAt      time.Time  `db:"updated_at" json:"updated_at"`
}

// Sweep transaction kinds.
const (
	SweepTxFunding = "FUNDING" // sweep wallet → deposit address (gas)
	SweepTxSweep   = "SWEEP"   // deposit address → settlement address
	SweepTxTopUp   = "TOPUP"   // gas funder → sweep wallet
)

// Sweep transaction statuses.
const (
	SweepTxSigned   = "SIGNED"   // stored, not yet broadcast
	SweepTxSent     = "SENT"     // broadcast, not yet mined
	SweepTxMined    = "MINED"    // included with the confirmations required
	SweepTxReplaced = "REPLACED" // superseded by a transaction with the same nonce
	SweepTxFailed   = "FAILED"   // reverted, or dropped for good
)

// SweepTx is a transaction the sweep worker signed. It is stored before it
// is broadcast, so that a crash re-broadcasts the same bytes.
type SweepTx struct {
	ID int64 `db:"id" json:"id"`
	// InvoiceID is nil for a gas top-up of the sweep wallet.
	InvoiceID         *int64         `db:"invoice_id" json:"invoice_id"`
	Kind              string         `db:"kind" json:"kind"`
	From              common.Address `db:"from_address" json:"from"`
	To                common.Address `db:"to_address" json:"to"`
	Nonce             uint64         `db:"nonce" json:"nonce"`
	ValueWei          Amount         `db:"value_wei" json:"value_wei"`
	GasLimit          uint64         `db:"gas_limit" json:"gas_limit"`
	MaxFeeWei         Amount         `db:"max_fee_wei" json:"max_fee_wei"`
	MaxPriorityFeeWei Amount         `db:"max_priority_fee_wei" json:"max_priority_fee_wei"`
	TxHash            common.Hash    `db:"tx_hash" json:"tx_hash"`
	RawTx             []byte         `db:"raw_tx" json:"-"`
	Status            string         `db:"status" json:"status"`
	BlockNumber       *uint64        `db:"block_number" json:"block_number"`
	GasUsed           *uint64        `db:"gas_used" json:"gas_used"`
	// FeeWei is gas used × effective gas price, once mined.
	FeeWei    *Amount    `db:"fee_wei" json:"fee_wei"`
	CreatedAt time.Time  `db:"created_at" json:"created_at"`
	UpdatedAt time.Time  `db:"updated_at" json:"updated_at"`
	SentAt    *time.Time `db:"sent_at" json:"sent_at"`
	MinedAt   *time.Time `db:"mined_at" json:"mined_at"`
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

// HashList is a list of hashes stored as a JSON array of hex strings.
type HashList []common.Hash

// Value implements driver.Valuer.
func (l HashList) Value() (driver.Value, error) {
	if l == nil {
		l = HashList{}
	}
	b, err := json.Marshal([]common.Hash(l))
	return string(b), err
}

// Scan implements sql.Scanner.
func (l *HashList) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("scan hash list: unsupported type %T", src)
	}
	var hs []common.Hash
	if err := json.Unmarshal(b, &hs); err != nil {
		return fmt.Errorf("scan hash list: %w", err)
	}
	*l = hs
	return nil
}

// RawJSON is JSON text stored in a TEXT column. Its JSON encoding is the
// text itself.
type RawJSON []byte

// Value implements driver.Valuer: the text, or NULL when empty.
func (j RawJSON) Value() (driver.Value, error) {
	if len(j) == 0 {
		return nil, nil
	}
	return string(j), nil
}

// Scan implements sql.Scanner.
func (j *RawJSON) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*j = nil
	case string:
		*j = RawJSON(v)
	case []byte:
		*j = append(RawJSON(nil), v...)
	default:
		return fmt.Errorf("scan json: unsupported type %T", src)
	}
	return nil
}

// MarshalJSON returns the text (null when empty).
func (j RawJSON) MarshalJSON() ([]byte, error) {
	if len(j) == 0 {
		return []byte("null"), nil
	}
	return j, nil
}

// UnmarshalJSON stores a copy of the text.
func (j *RawJSON) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*j = nil
		return nil
	}
	*j = append((*j)[:0], b...)
	return nil
}
