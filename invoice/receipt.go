package invoice

import (
	"cmp"
	"context"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

// publicReceipt is what the payer's proof of payment needs besides the
// amounts: which invoice, when it moved, and the transactions that paid
// it (the checkout page links each to the chain's explorer and puts them
// in the receipt it prints and downloads).
type publicReceipt struct {
	InvoiceID   int64      `json:"invoice_id"`
	CreatedAt   time.Time  `json:"created_at"`
	PaidAt      *time.Time `json:"paid_at,omitempty"`
	ConfirmedAt *time.Time `json:"confirmed_at,omitempty"`
	SettledAt   *time.Time `json:"settled_at,omitempty"`
	// Payments are the payments that count toward the invoice, oldest
	// first; empty before the first.
	Payments []publicPayment `json:"payments"`
}

// publicPayment is one payment as the payer sees it: its transaction, its
// amount in base units of the invoice's asset, its block and when
// settlement recorded it.
type publicPayment struct {
	// ChainID is the chain the payment arrived on (the invoice's).
	ChainID     uint64       `json:"chain_id"`
	TxHash      common.Hash  `json:"tx_hash"`
	Amount      store.Amount `json:"amount"`
	BlockNumber uint64       `json:"block_number"`
	SeenAt      time.Time    `json:"seen_at"`
	Late        bool         `json:"late"`
	// Asset and Value are set on a fiat invoice's payments: the asset it
	// arrived in (Amount is in its base units) and its value at the
	// invoice's locked quote of that asset.
	Asset *store.Asset `json:"asset,omitempty"`
	Value *store.Fiat  `json:"value,omitempty"`
}

// payments lists the payments that count toward inv; none are read while
// nothing is paid, so the public read of an unpaid invoice (what most open
// pages poll) stays one lookup.
func (s *Service) payments(ctx context.Context, inv store.Invoice) ([]store.Payment, error) {
	if inv.PaidWei.IsZero() && inv.PaidValue == nil {
		return nil, nil
	}
	ps, err := s.st.ListPaymentsByInvoice(ctx, inv.ID)
	if err != nil {
		return nil, err
	}
	out := ps[:0]
	for _, p := range ps {
		if p.Counted() {
			out = append(out, p)
		}
	}
	return out, nil
}

func receiptOf(inv store.Invoice, ps []store.Payment) publicReceipt {
	r := publicReceipt{InvoiceID: inv.ID, CreatedAt: inv.CreatedAt.UTC(), PaidAt: utc(inv.PaidAt),
		ConfirmedAt: utc(inv.ConfirmedAt), SettledAt: utc(inv.SettledAt), Payments: make([]publicPayment, 0, len(ps))}
	for _, p := range ps {
		pp := publicPayment{ChainID: cmp.Or(p.ChainID, inv.ChainID), TxHash: p.TxHash, Amount: p.AmountWei, BlockNumber: p.BlockNumber,
			SeenAt: p.CreatedAt.UTC(), Late: p.Late}
		if q, ok := inv.Pricing.QuoteOn(inv.ChainID, pp.ChainID, p.Token); ok {
			a := q.Asset
			pp.Asset = &a
			if v, err := q.Value(p.AmountWei); err == nil {
				pp.Value = &v
			}
		}
		r.Payments = append(r.Payments, pp)
	}
	return r
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
