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
	"cmp"
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

	// The members of an invoice priced in a fiat currency (issue 25,
	// docs/pricing.md), absent on one priced in its asset. Such an
	// invoice's asset, amount and payment_uri are those of its first
	// quote, and paid counts that asset only: paid_value is what counts.
	//
	// Price is what the merchant asked: {"amount": "49.90", "currency": "EUR"}.
	Price *store.Fiat `json:"price,omitempty"`
	// Quotes are the locked quotes, one per accepted asset: pay any of
	// them, or parts of several, at the one deposit address.
	Quotes []Quote `json:"quotes,omitempty"`
	// PaidValue is what the payments that count are worth at the locked
	// quotes, in the price's currency (rounded down once).
	PaidValue *store.Fiat `json:"paid_value,omitempty"`
	// UnderpaymentTolerance is the merchant's tolerance as it stood when
	// the invoice was created: paid when paid_value ≥ price − the larger
	// of amount and percent of the price.
	UnderpaymentTolerance *Tolerance `json:"underpayment_tolerance,omitempty"`
	// LateValuation is set when money arrived after the late window: its
	// value at the locked quotes and at the rates of the moment, for the
	// merchant to decide (the invoice stays EXPIRED, needs_attention).
	LateValuation *LateValuation `json:"late_valuation,omitempty"`
	// SweepAsset is the asset swept_wei counts, once the sweep is queued
	// (the other quoted assets that arrived are swept after it).
	SweepAsset *store.Asset `json:"sweep_asset,omitempty"`
	// Payments are the invoice's payments, each with its value at the
	// locked quote of its asset, when the producer has them at hand: the
	// invoice API's reads and the events that payments and sweeps cause.
	Payments []Payment `json:"payments,omitempty"`
}

// Quote is a fiat invoice's locked quote in one asset: pay Amount base
// units of Asset (rounded up: the least amount worth the price at Rate).
type Quote struct {
	// ChainID is the chain the quote is paid on: the invoice's, or another
	// chain the invoice accepts the asset on.
	ChainID         uint64       `json:"chain_id"`
	Asset           store.Asset  `json:"asset"`
	Amount          store.Amount `json:"amount"`
	AmountFormatted string       `json:"amount_formatted"`
	// Rate is the price of one whole unit of Asset in the price's
	// currency, exact.
	Rate store.Decimal `json:"rate"`
	// Pegged: a stablecoin quoted at its peg (its market was within the
	// band); Stale: the last good rate, used because too few sources
	// answered (never older than the pricing's maximum age).
	Pegged bool `json:"pegged"`
	Stale  bool `json:"stale"`
	// Sources are the observations behind Rate (every leg of a crossed
	// rate).
	Sources    []QuoteSource `json:"sources"`
	PaymentURI string        `json:"payment_uri"`
	CreatedAt  time.Time     `json:"created_at"`
	ExpiresAt  time.Time     `json:"expires_at"`
}

// QuoteSource is one observation behind a quote: Rate units of the pair's
// quote currency per whole unit of its base, as Name observed it at
// ObservedAt.
type QuoteSource struct {
	Name       string        `json:"name"`
	Pair       string        `json:"pair"`
	Rate       store.Decimal `json:"rate"`
	ObservedAt time.Time     `json:"observed_at"`
}

// Tolerance is an underpayment tolerance in one currency.
type Tolerance struct {
	Amount  store.Fiat    `json:"amount"`
	Percent store.Decimal `json:"percent"`
}

// LateValuation is what money that arrived after a fiat invoice's late
// window is worth: at the locked quotes and, when a rate could be had, at
// the rates when it was recorded.
type LateValuation struct {
	Locked  store.Fiat  `json:"locked"`
	Current *store.Fiat `json:"current,omitempty"`
	At      time.Time   `json:"at"`
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
	if p := inv.Pricing; p != nil {
		price := p.Price
		paid, _ := inv.PaidFiat()
		out.Price, out.PaidValue = &price, &paid
		out.UnderpaymentTolerance = &Tolerance{Amount: p.Tolerance.Amount, Percent: p.Tolerance.Percent}
		if out.UnderpaymentTolerance.Amount.Currency.Code == "" {
			out.UnderpaymentTolerance.Amount.Currency = p.Price.Currency
		}
		out.Quotes = make([]Quote, len(p.Quotes))
		for i, q := range p.Quotes {
			out.Quotes[i] = NewQuote(q, inv.ChainID)
		}
		if l := inv.LateValuation; l != nil {
			out.LateValuation = &LateValuation{Locked: l.Locked, Current: l.Current, At: l.At.UTC()}
		}
		if sa := inv.SweepAsset; sa != nil {
			a := *sa
			out.SweepAsset = &a
		}
	}
	return out
}

// NewQuote is a locked quote's JSON, of an invoice on chain invoiceChain.
func NewQuote(q store.Quote, invoiceChain uint64) Quote {
	out := Quote{ChainID: q.ChainOf(invoiceChain), Asset: q.Asset, Amount: q.Amount, AmountFormatted: q.Asset.Format(q.Amount), Rate: q.Rate,
		Pegged: q.Pegged, Stale: q.Stale, Sources: make([]QuoteSource, len(q.Sources)), PaymentURI: q.PaymentURI,
		CreatedAt: q.CreatedAt.UTC(), ExpiresAt: q.ExpiresAt.UTC()}
	for i, s := range q.Sources {
		out.Sources[i] = QuoteSource{Name: s.Name, Pair: s.Pair, Rate: s.Rate, ObservedAt: s.At.UTC()}
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
	// UnderpaymentTolerance is how much less than a fiat invoice's price
	// still pays it: the larger of percent of the price and the amount
	// set for the price's currency. New invoices take it as it stands.
	UnderpaymentTolerance MerchantTolerance `json:"underpayment_tolerance"`
}

// SettlementAddressChange is the data of a
// merchant.settlement_address_changed event: where sweeps went before and
// where they go from now on, who changed it and when.
type SettlementAddressChange struct {
	MerchantID int64                 `json:"merchant_id"`
	Previous   store.ChecksumAddress `json:"previous_settlement_address"`
	Current    store.ChecksumAddress `json:"settlement_address"`
	// ChangedBy says who made the change: "owner_key" (the merchant's own
	// API key), "operator", or a dashboard user ("user:<id>").
	ChangedBy string    `json:"changed_by"`
	ChangedAt time.Time `json:"changed_at"`
}

// SettlementAddressChangedEvent is the event of a settlement address
// change, written in the transaction that makes it.
func SettlementAddressChangedEvent(c SettlementAddressChange) (store.Event, error) {
	c.ChangedAt = c.ChangedAt.UTC()
	data, err := json.Marshal(c)
	if err != nil {
		return store.Event{}, err
	}
	return store.Event{Type: store.EventSettlementAddressChanged, MerchantID: c.MerchantID, Data: data,
		CreatedAt: c.ChangedAt}, nil
}

// MerchantTolerance is a merchant's underpayment tolerance: a percentage
// of the price and absolute amounts, at most one per currency.
type MerchantTolerance struct {
	Percent store.Decimal `json:"percent"`
	Amounts []store.Fiat  `json:"amounts"`
}

// NewMerchant is a merchant's JSON.
func NewMerchant(m store.Merchant) Merchant {
	tol := MerchantTolerance{Percent: m.Tolerance.Percent, Amounts: append([]store.Fiat{}, m.Tolerance.Amounts...)}
	return Merchant{ID: m.ID, Name: m.Name, APIKeyPrefix: m.APIKeyPrefix, WebhookURL: m.WebhookURL,
		SettlementAddress: store.ChecksumAddress(m.SettlementAddress), CreatedAt: m.CreatedAt.UTC(),
		UpdatedAt: m.UpdatedAt.UTC(), DisabledAt: utc(m.DisabledAt), UnderpaymentTolerance: tol}
}

// Payment is a payment to an invoice: its transaction (and the Transfer
// log of a token payment), the asset that arrived, the amount in that
// asset's base units and formatted, its block, and whether it counts
// toward the invoice (a payment in another asset, or on another chain,
// never does).
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
	// WrongNetwork: the payment arrived on another chain than the
	// invoice's, ChainID (both absent for a payment on the invoice's
	// chain). Its asset is named by its token address on that chain
	// alone (the native coin: 18 decimals, no symbol), and BlockNumber is
	// that chain's.
	WrongNetwork bool      `json:"wrong_network,omitempty"`
	ChainID      uint64    `json:"chain_id,omitempty"`
	SeenAt       time.Time `json:"seen_at"`
	// Value is what the payment is worth at its fiat invoice's locked
	// quote of its asset, rounded down (absent for a payment in an asset
	// the invoice did not quote, and on invoices priced in their asset).
	Value *store.Fiat `json:"value,omitempty"`
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
	if p.WrongNetwork {
		// The service's assets are the invoice's chain's: a token address
		// or the native coin of another chain is not one of them.
		out.WrongNetwork, out.ChainID, assets = true, p.ChainID, nil
	}
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

// NewPayments is the JSON of an invoice's payments: each names and
// formats its asset (the invoice's quotes' assets on its chain, then
// assets), and a payment that counts toward a fiat invoice carries its
// value at the locked quote of its asset on the chain it arrived on (a
// token is matched with its chain: the same contract address may be
// quoted on two chains).
func NewPayments(inv store.Invoice, ps []store.Payment, assets ...store.Asset) []Payment {
	if inv.Pricing != nil {
		own := inv.Pricing.QuotesOn(inv.ChainID, inv.ChainID)
		known := make([]store.Asset, 0, len(own)+len(assets))
		for _, q := range own {
			known = append(known, q.Asset)
		}
		assets = append(known, assets...)
	} else {
		assets = append([]store.Asset{inv.Asset()}, assets...)
	}
	out := make([]Payment, len(ps))
	for i, p := range ps {
		out[i] = NewPayment(p, assets...)
		if q, ok := inv.Pricing.QuoteOn(inv.ChainID, cmp.Or(p.ChainID, inv.ChainID), p.Token); ok && p.Counted() {
			if v, err := q.Value(p.AmountWei); err == nil {
				out[i].Value = &v
			}
		}
	}
	return out
}

// InvoiceEvent returns the event of type typ about inv, its data the
// invoice's JSON at this moment (what the webhook delivers). extra members
// join the invoice's (invoice.wrong_asset adds wrong_asset_payments,
// invoice.wrong_network wrong_network_payments).
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
