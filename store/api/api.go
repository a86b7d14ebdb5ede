// Package api holds the JSON of evmpay's HTTP API and webhooks: the
// invoice, merchant and payment as clients see them, built from the store's
// rows by NewInvoice, NewMerchant and NewPayment. The rows are the
// database's; these types are the contract (docs/versioning.md: within /v1
// members are only added). Renaming a column cannot change them, and a
// golden test pins each one's JSON, so a change of the API is a visible
// diff.
//
// It sits on the ground floor, beside store, because the invoice API
// (invoice), the events that settlement and sweep write (InvoiceEvent) and
// the webhooks that deliver them all carry the same invoice JSON, and no
// concern package may import a sibling.
package api

import (
	"encoding/json"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

// Invoice is an invoice as the merchant API shows it, and as every
// invoice.* event carries it (webhook data). Every invoice carries its
// asset and its amounts in base units and formatted; a native-coin invoice
// also keeps amount_wei and paid_wei, documented aliases of amount and
// paid (the JSON of the first release).
type Invoice struct {
	ID         int64  `json:"id"`
	MerchantID int64  `json:"merchant_id"`
	Status     string `json:"status"`
	// Asset is what the invoice is paid in: {"symbol", "address" (null for
	// the native coin), "decimals"}.
	Asset           store.Asset  `json:"asset"`
	Amount          store.Amount `json:"amount"`
	AmountFormatted string       `json:"amount_formatted"`
	Paid            store.Amount `json:"paid"`
	PaidFormatted   string       `json:"paid_formatted"`
	// AmountWei and PaidWei are Amount and Paid of a native-coin invoice,
	// kept for clients of the first release; absent on token invoices.
	AmountWei      *store.Amount         `json:"amount_wei,omitempty"`
	PaidWei        *store.Amount         `json:"paid_wei,omitempty"`
	ChainID        uint64                `json:"chain_id"`
	DepositAddress store.ChecksumAddress `json:"deposit_address"`
	PaymentURI     string                `json:"payment_uri"`
	OrderID        string                `json:"order_id,omitempty"`
	Description    string                `json:"description,omitempty"`
	Metadata       store.RawJSON         `json:"metadata,omitempty"`
	RedirectURL    string                `json:"redirect_url,omitempty"`
	Underpaid      bool                  `json:"underpaid"`
	Overpaid       bool                  `json:"overpaid"`
	PaidLate       bool                  `json:"paid_late"`
	NeedsAttention bool                  `json:"needs_attention"`
	ExpiresAt      time.Time             `json:"expires_at"`
	PaidAt         *time.Time            `json:"paid_at,omitempty"`
	ConfirmedAt    *time.Time            `json:"confirmed_at,omitempty"`
	SettledAt      *time.Time            `json:"settled_at,omitempty"`
	CreatedAt      time.Time             `json:"created_at"`
	UpdatedAt      time.Time             `json:"updated_at"`
	SweepStatus    string                `json:"sweep_status"`
	SweepTxHash    *common.Hash          `json:"sweep_tx_hash"`
	SweepError     string                `json:"sweep_error"`
	// SweptWei is what the sweep moved to the merchant, in base units of
	// the invoice's asset (the name is the first release's); DustWei the
	// native coin left at the deposit address. Both set once SWEPT.
	SweptWei *store.Amount `json:"swept_wei,omitempty"`
	DustWei  *store.Amount `json:"dust_wei,omitempty"`
}

// DefaultNativeSymbol names the native coin of an invoice whose row has no
// symbol (one created before invoices recorded it).
const DefaultNativeSymbol = "ETH"

// NewInvoice is an invoice's JSON.
func NewInvoice(inv store.Invoice) Invoice {
	a := inv.Asset()
	if a.IsNative() && a.Symbol == "" {
		a.Symbol = DefaultNativeSymbol
	}
	out := Invoice{
		ID: inv.ID, MerchantID: inv.MerchantID, Status: inv.Status,
		Asset: a, Amount: inv.AmountWei, AmountFormatted: a.Format(inv.AmountWei),
		Paid: inv.PaidWei, PaidFormatted: a.Format(inv.PaidWei),
		ChainID: inv.ChainID, DepositAddress: store.ChecksumAddress(inv.DepositAddress), PaymentURI: inv.PaymentURI,
		OrderID: inv.OrderID, Description: inv.Description, Metadata: inv.Metadata, RedirectURL: inv.RedirectURL,
		Underpaid: inv.Underpaid, Overpaid: inv.Overpaid, PaidLate: inv.PaidLate, NeedsAttention: inv.NeedsAttention,
		ExpiresAt: inv.ExpiresAt.UTC(), PaidAt: utc(inv.PaidAt), ConfirmedAt: utc(inv.ConfirmedAt),
		SettledAt: utc(inv.SettledAt), CreatedAt: inv.CreatedAt.UTC(), UpdatedAt: inv.UpdatedAt.UTC(),
		SweepStatus: inv.SweepStatus, SweepTxHash: inv.SweepTxHash, SweepError: inv.SweepError,
		SweptWei: inv.SweptWei, DustWei: inv.DustWei,
	}
	if a.IsNative() {
		amount, paid := inv.AmountWei, inv.PaidWei
		out.AmountWei, out.PaidWei = &amount, &paid
	}
	return out
}

// Merchant is a merchant's profile as the merchant and admin APIs show it
// (never its credentials, except where they are created: see invoice).
type Merchant struct {
	ID                int64                 `json:"id"`
	Name              string                `json:"name"`
	APIKeyPrefix      string                `json:"api_key_prefix"`
	WebhookURL        string                `json:"webhook_url"`
	SettlementAddress store.ChecksumAddress `json:"settlement_address"`
	CreatedAt         time.Time             `json:"created_at"`
	UpdatedAt         time.Time             `json:"updated_at"`
	DisabledAt        *time.Time            `json:"disabled_at,omitempty"`
}

// NewMerchant is a merchant's JSON.
func NewMerchant(m store.Merchant) Merchant {
	return Merchant{ID: m.ID, Name: m.Name, APIKeyPrefix: m.APIKeyPrefix, WebhookURL: m.WebhookURL,
		SettlementAddress: store.ChecksumAddress(m.SettlementAddress), CreatedAt: m.CreatedAt.UTC(),
		UpdatedAt: m.UpdatedAt.UTC(), DisabledAt: utc(m.DisabledAt)}
}

// Payment is a payment to an invoice: its transaction (and the Transfer
// log of a token payment), the asset that arrived, the amount in that
// asset's base units and formatted, its block, and whether it counts
// toward the invoice (a payment in another asset never does).
type Payment struct {
	TxHash          common.Hash           `json:"tx_hash"`
	LogIndex        *int                  `json:"log_index,omitempty"`
	From            store.ChecksumAddress `json:"from"`
	Asset           store.Asset           `json:"asset"`
	Amount          store.Amount          `json:"amount"`
	AmountFormatted string                `json:"amount_formatted,omitempty"`
	BlockNumber     uint64                `json:"block_number"`
	Late            bool                  `json:"late"`
	WrongAsset      bool                  `json:"wrong_asset"`
	SeenAt          time.Time             `json:"seen_at"`
}

// NewPayment is a payment's JSON. assets name and format the asset that
// arrived (the invoice's, and the service's other accepted assets); one not
// among them is named by its token address alone, without a formatted
// amount.
func NewPayment(p store.Payment, assets ...store.Asset) Payment {
	out := Payment{TxHash: p.TxHash, From: store.ChecksumAddress(p.From), Amount: p.AmountWei,
		BlockNumber: p.BlockNumber, Late: p.Late, WrongAsset: p.WrongAsset, SeenAt: p.CreatedAt.UTC()}
	if p.LogIndex != store.NativeLogIndex {
		li := p.LogIndex
		out.LogIndex = &li
	}
	out.Asset = store.Asset{Address: p.Token}
	known := false
	for _, a := range assets {
		if store.SameToken(a.Token(), p.Token) {
			out.Asset, known = a, true
			break
		}
	}
	if out.Asset.IsNative() && !known {
		out.Asset.Decimals, known = store.NativeDecimals, true
	}
	if known {
		out.AmountFormatted = out.Asset.Format(p.AmountWei)
	}
	return out
}

// InvoiceEvent returns the event of type typ about inv, its data the
// invoice's JSON at this moment (what the webhook delivers). extra members
// join the invoice's (invoice.wrong_asset adds wrong_asset_payments).
func InvoiceEvent(typ string, inv store.Invoice, at time.Time, extra map[string]any) (store.Event, error) {
	data, err := json.Marshal(NewInvoice(inv))
	if err != nil {
		return store.Event{}, err
	}
	if len(extra) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return store.Event{}, err
		}
		for k, v := range extra {
			b, err := json.Marshal(v)
			if err != nil {
				return store.Event{}, err
			}
			m[k] = b
		}
		if data, err = json.Marshal(m); err != nil {
			return store.Event{}, err
		}
	}
	return store.Event{Type: typ, MerchantID: inv.MerchantID, InvoiceID: inv.ID, Data: data, CreatedAt: at}, nil
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
