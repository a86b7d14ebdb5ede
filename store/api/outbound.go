package api

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

// Outbound is a refund or a payout as the merchant API shows it, and as
// every refund.* and payout.* event carries it (webhook data). A refund has
// its invoice_id and reason, a payout its batch_id (when made in a batch).
type Outbound struct {
	ID int64 `json:"id"`
	// ChainID is the chain it is sent on: a refund's invoice's, or for a
	// wrong-network refund the chain that money arrived on.
	ChainID uint64 `json:"chain_id"`
	// Kind is "refund" or "payout".
	Kind      string `json:"kind"`
	InvoiceID *int64 `json:"invoice_id,omitempty"`
	BatchID   string `json:"batch_id,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Reference string `json:"reference,omitempty"`
	Status    string `json:"status"`
	// Asset, Amount and AmountFormatted are what is sent, exactly.
	Asset           store.Asset  `json:"asset"`
	Amount          store.Amount `json:"amount"`
	AmountFormatted string       `json:"amount_formatted"`
	// Fiat is the amount asked for in fiat and the rate it was converted
	// at, when it was asked for so.
	Fiat *OutboundFiat `json:"fiat,omitempty"`
	// Destination is null while a refund waits for the payer to name it.
	Destination *store.ChecksumAddress `json:"destination"`
	// PaidBy is "service" (sent from a wallet the service holds) or
	// "merchant" (a payment request the merchant pays).
	PaidBy string `json:"paid_by"`
	// Source is where a service-paid one left from: "payout_wallet" or
	// "deposit"; absent until it is signed.
	Source string                 `json:"source,omitempty"`
	From   *store.ChecksumAddress `json:"from,omitempty"`
	// PaymentURI is a merchant-paid one's payment request (EIP-681), once
	// its destination is known.
	PaymentURI string `json:"payment_uri,omitempty"`
	// Error says why it failed, or why it is waiting.
	Error         string `json:"error,omitempty"`
	NeedsApproval bool   `json:"needs_approval"`
	CreatedByKey  int64  `json:"created_by_key_id"`
	ApprovedByKey *int64 `json:"approved_by_key_id,omitempty"`
	// CreatedByUser and ApprovedByUser are the dashboard users who made
	// and approved it, when people did (docs/dashboard.md).
	CreatedByUser  int64      `json:"created_by_user_id,omitempty"`
	ApprovedByUser *int64     `json:"approved_by_user_id,omitempty"`
	ApprovedAt     *time.Time `json:"approved_at,omitempty"`
	// TxHash is its transaction once signed (or, merchant-paid, seen);
	// LogIndex that of a token transfer recognised; BlockNumber its block
	// once mined.
	TxHash   *common.Hash `json:"tx_hash"`
	LogIndex *int         `json:"log_index,omitempty"`
	// SubmittedTxHash is the transaction the merchant named as a
	// merchant-paid one's payment, until it is taken (then TxHash) or
	// found not to pay it (then Error says why).
	SubmittedTxHash *common.Hash `json:"submitted_tx_hash,omitempty"`
	BlockNumber     *uint64      `json:"block_number,omitempty"`
	CreatedAt       time.Time    `json:"created_at"`
	UpdatedAt       time.Time    `json:"updated_at"`
	BroadcastAt     *time.Time   `json:"broadcast_at,omitempty"`
	ConfirmedAt     *time.Time   `json:"confirmed_at,omitempty"`
}

// OutboundFiat is the fiat side of an outbound asked for in fiat.
type OutboundFiat struct {
	Currency string `json:"currency"`
	// Amount is in the currency's major units ("12.50").
	Amount string `json:"amount"`
	// Rate is the asset's price in the currency it was converted at;
	// RateKind "locked" (the invoice's quote) or "current".
	Rate     string `json:"rate"`
	RateKind string `json:"rate_kind"`
}

// NewOutbound is a refund's or payout's JSON.
func NewOutbound(o store.Outbound) Outbound {
	a := o.Asset()
	if a.IsNative() && a.Symbol == "" {
		a.Symbol = DefaultNativeSymbol
	}
	out := Outbound{
		ID: o.ID, ChainID: o.ChainID, Kind: strings.ToLower(o.Kind), InvoiceID: o.InvoiceID, BatchID: o.BatchID, Reason: o.Reason,
		Reference: o.Reference, Status: o.Status, Asset: a, Amount: o.Amount, AmountFormatted: a.Format(o.Amount),
		PaidBy: strings.ToLower(o.PaidBy), Source: strings.ToLower(o.Source), PaymentURI: o.PaymentURI,
		Error: o.Error, NeedsApproval: o.NeedsApproval, CreatedByKey: o.CreatedByKey, ApprovedByKey: o.ApprovedByKey,
		CreatedByUser: o.CreatedByUser, ApprovedByUser: o.ApprovedByUser,
		ApprovedAt: utc(o.ApprovedAt), TxHash: o.TxHash, LogIndex: o.LogIndex, BlockNumber: o.BlockNumber,
		CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC(), BroadcastAt: utc(o.BroadcastAt),
		ConfirmedAt: utc(o.ConfirmedAt), SubmittedTxHash: o.SubmittedTxHash,
	}
	if o.Destination != nil {
		d := store.ChecksumAddress(*o.Destination)
		out.Destination = &d
	}
	if o.FromAddress != nil {
		f := store.ChecksumAddress(*o.FromAddress)
		out.From = &f
	}
	if o.FiatCurrency != "" && o.FiatMinor != nil {
		out.Fiat = &OutboundFiat{Currency: o.FiatCurrency, Amount: fiatText(o.FiatCurrency, *o.FiatMinor), Rate: o.FiatRate,
			RateKind: o.FiatRateKind}
	}
	return out
}

// OutboundEvent returns the event of type typ about o, its data o's JSON
// at this moment (what the webhook delivers). A payout's event has no
// invoice (0).
func OutboundEvent(typ string, o store.Outbound, at time.Time) (store.Event, error) {
	data, err := json.Marshal(NewOutbound(o))
	if err != nil {
		return store.Event{}, err
	}
	ev := store.Event{Type: typ, MerchantID: o.MerchantID, Data: data, CreatedAt: at}
	if o.InvoiceID != nil {
		ev.InvoiceID = *o.InvoiceID
	}
	return ev, nil
}

// APIKey is a merchant's additional API key as the merchant API shows it
// (never the key itself, except in the response that creates it).
type APIKey struct {
	ID        int64      `json:"id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// NewAPIKey is an API key's JSON.
func NewAPIKey(k store.APIKey) APIKey {
	scopes := []string(k.Scopes)
	if scopes == nil {
		scopes = []string{}
	}
	return APIKey{ID: k.ID, Name: k.Name, Prefix: k.Prefix, Scopes: scopes, CreatedAt: k.CreatedAt.UTC(),
		RevokedAt: utc(k.RevokedAt)}
}

// LedgerEntry is one movement of the ledger as the export shows it (JSON
// lines; the CSV export has the same columns, LedgerCSVHeader).
type LedgerEntry struct {
	ID   int64  `json:"id"`
	Kind string `json:"kind"`
	// At is when the movement happened (its block's time; a reversal's:
	// when it was reversed).
	At         time.Time `json:"at"`
	InvoiceID  *int64    `json:"invoice_id,omitempty"`
	OutboundID *int64    `json:"outbound_id,omitempty"`
	// Asset names the asset (an unconfigured token by its address alone,
	// decimals 0), Amount is in its base units.
	Asset           store.Asset            `json:"asset"`
	Amount          store.Amount           `json:"amount"`
	AmountFormatted string                 `json:"amount_formatted"`
	From            *store.ChecksumAddress `json:"from"`
	To              *store.ChecksumAddress `json:"to"`
	TxHash          *common.Hash           `json:"tx_hash"`
	LogIndex        *int                   `json:"log_index"`
	BlockNumber     *uint64                `json:"block_number"`
	FiatCurrency    string                 `json:"fiat_currency,omitempty"`
	FiatValue       string                 `json:"fiat_value,omitempty"`
	// Reverses is the entry a reversal undoes.
	Reverses   *int64    `json:"reverses,omitempty"`
	RecordedAt time.Time `json:"recorded_at"`
}

// NewLedgerEntry is an entry's JSON; assets name and format its asset (the
// native coin's symbol is the first native asset among them, else
// DefaultNativeSymbol).
func NewLedgerEntry(e store.LedgerEntry, assets ...store.Asset) LedgerEntry {
	out := LedgerEntry{ID: e.ID, Kind: e.Kind, At: e.At.UTC(), InvoiceID: e.InvoiceID, OutboundID: e.OutboundID,
		Amount: e.Amount, TxHash: e.TxHash, LogIndex: e.LogIndex, BlockNumber: e.BlockNumber,
		Reverses: e.Reverses, RecordedAt: e.RecordedAt.UTC()}
	out.Asset = AssetOf(e.Token, assets...)
	out.AmountFormatted = out.Asset.Format(e.Amount)
	if e.From != nil {
		f := store.ChecksumAddress(*e.From)
		out.From = &f
	}
	if e.To != nil {
		t := store.ChecksumAddress(*e.To)
		out.To = &t
	}
	if code, minor, ok := e.Value(); ok {
		out.FiatCurrency, out.FiatValue = code, fiatText(code, minor)
	}
	return out
}

// fiatText is minor units of the currency code as a decimal amount
// ("12.50"); the bare minor units for a code this build does not know.
func fiatText(code string, minor store.Amount) string {
	if c, err := store.LookupCurrency(code); err == nil {
		return store.Fiat{Currency: c, Minor: minor}.Amount()
	}
	return minor.String()
}

// AssetOf names the asset of a token address (nil: the native coin) among
// assets; an unknown token is its address with no symbol and 0 decimals.
func AssetOf(token *common.Address, assets ...store.Asset) store.Asset {
	for _, a := range assets {
		if store.SameToken(a.Token(), token) {
			return a
		}
	}
	if token == nil || *token == (common.Address{}) {
		return store.NativeAsset(DefaultNativeSymbol)
	}
	t := *token
	return store.Asset{Address: &t}
}

// LedgerCSVHeader is the header row of the CSV export.
func LedgerCSVHeader() []string {
	return []string{"id", "kind", "at", "invoice_id", "outbound_id", "asset", "token", "decimals", "amount",
		"amount_formatted", "from", "to", "tx_hash", "log_index", "block_number", "fiat_currency", "fiat_value",
		"reverses", "recorded_at"}
}

// CSV is the entry's CSV row, in LedgerCSVHeader's order: empty cells for
// what is absent, addresses in EIP-55, times in RFC 3339 (UTC).
func (e LedgerEntry) CSV() []string {
	str := func(p *int64) string {
		if p == nil {
			return ""
		}
		return itoa(*p)
	}
	addr := func(a *store.ChecksumAddress) string {
		if a == nil {
			return ""
		}
		return a.String()
	}
	token := ""
	if t := e.Asset.Token(); t != nil {
		token = t.Hex()
	}
	row := []string{itoa(e.ID), e.Kind, e.At.Format(time.RFC3339Nano), str(e.InvoiceID), str(e.OutboundID),
		e.Asset.Symbol, token, itoa(int64(e.Asset.Decimals)), e.Amount.String(), e.AmountFormatted,
		addr(e.From), addr(e.To), "", "", "", e.FiatCurrency, e.FiatValue, str(e.Reverses),
		e.RecordedAt.Format(time.RFC3339Nano)}
	if e.TxHash != nil {
		row[12] = e.TxHash.Hex()
	}
	if e.LogIndex != nil {
		row[13] = itoa(int64(*e.LogIndex))
	}
	if e.BlockNumber != nil {
		row[14] = itoa(int64(*e.BlockNumber))
	}
	return row
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
