// Command shop is a small order system that takes its payments with
// evmpay: an order becomes an invoice (priced in the coin or in euros), the
// order is paid when evmpay says the invoice is confirmed, a payment a
// reorg took back puts it back to unpaid, an underpaid order shows what is
// missing, and a refund gives part of it back. It uses evmpay's Go API and
// hosts/service only — no HTTP between the shop and evmpay.
//
//	RPC_URL=http://127.0.0.1:8545 MNEMONIC='…' PAY_SECRET_KEY='…32+ bytes…' SETTLEMENT_ADDRESS=0x… go run ./examples/shop
//
// shop_test.go runs its business cases on the test kit (hosts/evmpaytest).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/hosts/service"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/webhook"
)

// Order statuses: what the shop tells its customer.
const (
	Unpaid      = "UNPAID"       // waiting for the payment
	PaymentSeen = "PAYMENT_SEEN" // paid on chain, not final yet: do not ship
	Underpaid   = "UNDERPAID"    // less than the price arrived: Missing says how much
	Paid        = "PAID"         // confirmed: ship it
	Refunded    = "REFUNDED"     // some or all of it given back (RefundedFormatted)
	Expired     = "EXPIRED"      // never paid in time
)

// Order is one order of the shop.
type Order struct {
	ID int64 `json:"id"`
	// Price is the order's price: an amount of the coin ("0.25") or, with
	// Currency, of a fiat currency ("49.90" EUR).
	Price    string `json:"price"`
	Currency string `json:"currency,omitempty"`
	Status   string `json:"status"`
	// InvoiceID, PaymentURI and CheckoutURL are evmpay's: where the
	// customer pays.
	InvoiceID   int64  `json:"invoice_id"`
	PaymentURI  string `json:"payment_uri"`
	CheckoutURL string `json:"checkout_url"`
	// Missing is what an underpaid order still needs, in the invoice's
	// asset.
	Missing string `json:"missing,omitempty"`
	// Refunds are the refunds given, by evmpay's id.
	Refunds []int64 `json:"refunds,omitempty"`
	// lastEvent orders the webhooks: an older one arriving late is
	// ignored (docs/webhook.md, "Ordering").
	lastEvent int64
}

// Shop is the order system: its orders, and evmpay acting for its
// merchant.
type Shop struct {
	svc      *service.Service
	merchant invoice.Principal
	verifier *webhook.Verifier
	out      io.Writer

	mu     sync.Mutex
	orders map[int64]*Order
	byInv  map[int64]int64 // invoice id → order id
	next   int64
	wake   chan struct{} // closed and renewed at every change: tests and long polls wait on it
}

// NewShop makes the shop's merchant in evmpay (or finds it again: its
// external id is the shop's name) with its webhooks coming to webhookURL.
func NewShop(ctx context.Context, svc *service.Service, payTo common.Address, webhookURL string, out io.Writer) (*Shop, error) {
	m, _, err := svc.Invoices.EnsureMerchant(ctx, "example-shop", invoice.MerchantParams{Name: "Example shop",
		SettlementAddress: payTo, WebhookURL: webhookURL})
	if err != nil {
		return nil, err
	}
	owner, err := svc.Invoices.Owner(ctx, m.ID)
	if err != nil {
		return nil, err
	}
	secret, err := svc.Invoices.WebhookSecret(ctx, m.ID)
	if err != nil {
		return nil, err
	}
	v, err := webhook.NewVerifier(secret)
	if err != nil {
		return nil, err
	}
	return &Shop{svc: svc, merchant: owner, verifier: v, out: out, orders: map[int64]*Order{}, byInv: map[int64]int64{},
		wake: make(chan struct{})}, nil
}

// Place takes an order for price (of the coin, or of currency) and makes
// its invoice; placing the same order id again returns it as it is.
func (s *Shop) Place(ctx context.Context, price, currency string) (Order, error) {
	s.mu.Lock()
	s.next++
	id := s.next
	s.mu.Unlock()
	params := invoice.InvoiceParams{AmountFormatted: price, OrderID: strconv.FormatInt(id, 10)}
	if currency != "" {
		params = invoice.InvoiceParams{Price: &invoice.Price{Amount: price, Currency: currency}, OrderID: params.OrderID}
	}
	inv, err := s.svc.Invoices.CreateInvoice(ctx, s.merchant, "order-"+params.OrderID, params)
	if err != nil {
		return Order{}, fmt.Errorf("order %d: %w", id, err)
	}
	o := &Order{ID: id, Price: price, Currency: currency, Status: Unpaid, InvoiceID: inv.ID, PaymentURI: inv.PaymentURI,
		CheckoutURL: inv.CheckoutURL}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orders[id], s.byInv[inv.ID] = o, id
	s.changed()
	return *o, nil
}

// Get returns an order.
func (s *Shop) Get(id int64) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		return Order{}, false
	}
	c := *o
	c.Refunds = append([]int64(nil), o.Refunds...)
	return c, true
}

// Changed returns a channel closed at the next change of any order.
func (s *Shop) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wake
}

func (s *Shop) changed() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// Refund gives back part of a paid order: amount of the invoice's asset
// ("0.05"), to the customer's address.
func (s *Shop) Refund(ctx context.Context, id int64, amount string, to common.Address) (invoice.OutboundView, error) {
	o, ok := s.Get(id)
	if !ok {
		return invoice.OutboundView{}, fmt.Errorf("no order %d", id)
	}
	if o.Status != Paid && o.Status != Refunded {
		return invoice.OutboundView{}, fmt.Errorf("order %d is %s: only a paid order is refunded", id, o.Status)
	}
	r, err := s.svc.Invoices.CreateRefund(ctx, s.merchant, o.InvoiceID, fmt.Sprintf("refund-%d-%d", id, len(o.Refunds)+1),
		invoice.RefundParams{AmountFormatted: amount, Destination: &to, Reference: "order " + strconv.FormatInt(id, 10)})
	if err != nil {
		return invoice.OutboundView{}, fmt.Errorf("order %d: refund: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orders[id].Refunds = append(s.orders[id].Refunds, r.ID)
	s.orders[id].Status = Refunded
	s.changed()
	return r.OutboundView, nil
}

// Hooks receives evmpay's webhooks: it verifies each one's signature
// before reading it, and moves the order its invoice belongs to.
func (s *Shop) Hooks() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil || s.verifier.Verify(r.Header, body) != nil {
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		var p webhook.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, "not a webhook", http.StatusBadRequest)
			return
		}
		if err := s.handle(p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// handle moves an order by one of its invoice's events.
func (s *Shop) handle(p webhook.Payload) error {
	if !isInvoiceEvent(p.Type) {
		return nil // refunds, payouts: the shop reads them from the Go API when it needs to
	}
	var inv struct {
		ID     int64        `json:"id"`
		Status string       `json:"status"`
		Amount store.Amount `json:"amount"`
		Paid   store.Amount `json:"paid"`
		Asset  store.Asset  `json:"asset"`
	}
	if err := json.Unmarshal(p.Data, &inv); err != nil {
		return fmt.Errorf("%s: %w", p.Type, err)
	}
	seq, err := strconv.ParseInt(p.ID[len("evt_"):], 10, 64)
	if err != nil {
		return errors.New("webhook id is not evt_<n>")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orders[s.byInv[inv.ID]]
	if o == nil || seq <= o.lastEvent {
		return nil // another shop's invoice, or an older state arriving late
	}
	o.lastEvent = seq
	switch p.Type {
	case store.EventInvoicePaid, store.EventInvoiceOverpaid:
		if o.Status == Unpaid || o.Status == Underpaid {
			o.Status, o.Missing = PaymentSeen, ""
		}
	case store.EventInvoiceUnderpaid:
		missing := new(store.Amount)
		if inv.Amount.Cmp(inv.Paid) > 0 {
			d, _ := store.AmountFromBig(inv.Amount.Big().Sub(inv.Amount.Big(), inv.Paid.Big()))
			missing = &d
		}
		o.Status, o.Missing = Underpaid, inv.Asset.Format(*missing)
	case store.EventInvoiceConfirmed:
		if o.Status != Refunded {
			o.Status, o.Missing = Paid, ""
		}
	case store.EventInvoiceReverted:
		// A reorg took the payment back: nothing is paid until it comes again.
		o.Status, o.Missing = Unpaid, ""
	case store.EventInvoiceExpired:
		if o.Status == Unpaid || o.Status == Underpaid {
			o.Status = Expired
		}
	}
	fmt.Fprintf(s.out, "order %d %s (%s)\n", o.ID, o.Status, p.Type)
	s.changed()
	return nil
}

func isInvoiceEvent(typ string) bool { return len(typ) > 8 && typ[:8] == "invoice." }

// Routes are the shop's own HTTP API: place an order, read it.
func (s *Shop) Routes(mux *http.ServeMux) {
	mux.Handle("POST /hooks/evmpay", s.Hooks())
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Price, Currency string }
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10)).Decode(&req); err != nil {
			http.Error(w, "want {\"price\": \"0.25\"} or {\"price\": \"49.90\", \"currency\": \"EUR\"}", http.StatusBadRequest)
			return
		}
		o, err := s.Place(r.Context(), req.Price, req.Currency)
		if err != nil {
			http.Error(w, invoice.ErrorCode(err), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusCreated, o)
	})
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		o, ok := s.Get(id)
		if !ok {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, http.StatusOK, o)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
