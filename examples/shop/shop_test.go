package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest"
	"github.com/evmpay/evmpay/hosts/service"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
)

// The shop's business cases, each on the test kit's simulated chain with
// evmpay wired by hosts/service as the shop wires it: the order follows
// the invoice's webhooks.

var payTo = common.HexToAddress("0x000000000000000000000000000000000000bEEF")

// shopRig is the shop running: evmpay's workers, its HTTP server (the
// webhooks come back to it), the kit's chain.
type shopRig struct {
	t    *testing.T
	env  *evmpaytest.Env
	shop *Shop
	ctx  context.Context
}

func newShop(t *testing.T, mutate ...func(*service.Config)) *shopRig {
	t.Helper()
	env := evmpaytest.New(t, evmpaytest.Config{NoServices: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := service.Config{Store: env.Store, RPC: env.Chain.RPC(), Wallet: env.Wallet,
		SecretKey: []byte("a-test-secret-key-of-32-bytes!!!"), AllowPrivateWebhooks: true,
		Confirmations: 3, PollInterval: 5 * time.Millisecond, Backfill: true} // index from block 0: a payment mined before the indexer starts is seen
	cfg.Webhook.Schedule = []time.Duration{0, 10 * time.Millisecond} // a webhook refused at once is retried soon
	cfg.Logger = slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	for _, m := range mutate {
		m(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := service.New(ctx, cfg)
	require.NoError(t, err)
	var out strings.Builder
	shop, err := NewShop(ctx, svc, payTo, "http://"+ln.Addr().String()+"/hooks/evmpay", &out)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, svc, shop, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return &shopRig{t: t, env: env, shop: shop, ctx: ctx}
}

// testLog writes the service's log lines to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// until waits for the order to reach status, mining a block each time the
// shop has not changed for a while (the confirmations need blocks).
func (r *shopRig) until(id int64, status string) Order {
	r.t.Helper()
	return r.wait(id, status, true)
}

// wait waits for the order to reach status, mining blocks as until does
// when mine is set; without, only what the chain holds already moves it
// (a status that more blocks would move past).
func (r *shopRig) wait(id int64, status string, mine bool) Order {
	r.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		changed := r.shop.Changed()
		o, _ := r.shop.Get(id)
		if o.Status == status {
			return o
		}
		select {
		case <-changed:
		case <-time.After(20 * time.Millisecond):
			if mine {
				r.env.Chain.Mine(1)
			}
		case <-deadline:
			inv, _ := r.env.Store.GetInvoice(r.ctx, o.InvoiceID)
			ds, _ := r.env.Store.ListDeliveries(r.ctx, store.DeliveryFilter{MerchantID: inv.MerchantID, Limit: 100})
			var seen []string
			for _, d := range ds {
				seen = append(seen, fmt.Sprintf("%s %s attempt %d %q", d.EventType, d.Status, d.Attempt, d.LastError))
			}
			r.t.Fatalf("order %d never %s: %+v; invoice %s paid %s; deliveries %v", id, status, o, inv.Status, inv.PaidWei, seen)
		}
	}
}

func TestShop_OrderPaidWhenTheInvoiceIsConfirmed(t *testing.T) {
	t.Parallel()
	r := newShop(t)
	o, err := r.shop.Place(r.ctx, "0.25", "")
	require.NoError(t, err)
	require.Equal(t, Unpaid, o.Status)
	r.env.Chain.Pay(o.PaymentURI)
	paid := r.until(o.ID, Paid)
	require.Empty(t, paid.Missing)
	inv := r.env.WaitInvoice(o.InvoiceID, store.StatusSettled)
	require.Equal(t, "250000000000000000", inv.PaidWei.String())
	require.Equal(t, "250000000000000000", r.env.Chain.Balance(nil, payTo).String(), "the shop's money reached its address")
}

// payPart pays part of an order: amount wei of the coin to its invoice's
// deposit address.
func (r *shopRig) payPart(o Order, wei int64) {
	r.t.Helper()
	inv, err := r.env.Store.GetInvoice(r.ctx, o.InvoiceID)
	require.NoError(r.t, err)
	r.env.Chain.Transfer(r.env.Chain.Accounts()[0], nil, inv.DepositAddress, big.NewInt(wei))
}

func TestShop_UnderpaidOrderShowsWhatIsMissing_ThenPaid(t *testing.T) {
	t.Parallel()
	r := newShop(t)
	o, err := r.shop.Place(r.ctx, "0.25", "")
	require.NoError(t, err)
	r.payPart(o, 100000000000000000)
	under := r.until(o.ID, Underpaid)
	require.Equal(t, "0.15", under.Missing)
	r.payPart(o, 150000000000000000)
	r.until(o.ID, Paid)
}

func TestShop_AReorgTakesThePaymentBack_OrderUnpaidAgain(t *testing.T) {
	t.Parallel()
	r := newShop(t)
	o, err := r.shop.Place(r.ctx, "0.25", "")
	require.NoError(t, err)
	r.env.Chain.Mine(3) // a reorg reaching block 1 would be another chain, not a reorg
	before := r.env.Chain.Head()
	receipt := r.env.Chain.Pay(o.PaymentURI)
	r.wait(o.ID, PaymentSeen, false) // no block on top: it cannot be confirmed
	// The block with the payment, and one on top, are replaced by blocks
	// without it (the payer's transaction is replaced at its nonce).
	r.env.Chain.Reorg(int(r.env.Chain.Head()-before), receipt.TxHash)
	unpaid := r.until(o.ID, Unpaid)
	require.Empty(t, unpaid.Missing)
	// Paid again, for real this time.
	r.env.Chain.Pay(o.PaymentURI)
	r.until(o.ID, Paid)
}

func TestShop_PartialRefundOfAPaidOrder(t *testing.T) {
	t.Parallel()
	r := newShop(t)
	o, err := r.shop.Place(r.ctx, "0.25", "")
	require.NoError(t, err)
	r.env.Chain.Pay(o.PaymentURI)
	r.until(o.ID, Paid)
	// Once the invoice is swept, refunds leave from the shop's payout
	// wallet, which the shop funds (before the sweep they leave from the
	// deposit address).
	var wallet invoice.PayoutWallet
	require.Eventually(t, func() bool {
		wallet, err = r.shop.svc.Invoices.PayoutWallet(r.ctx, r.shop.merchant.Merchant.ID)
		return err == nil
	}, time.Minute, 10*time.Millisecond, "the sweep role records the payout wallet")
	r.env.Chain.Transfer(r.env.Chain.Accounts()[1], nil, common.Address(wallet.Address), big.NewInt(1e17))
	customer := common.HexToAddress("0x00000000000000000000000000000000000c0ffe")
	ref, err := r.shop.Refund(r.ctx, o.ID, "0.05", customer)
	require.NoError(t, err)
	require.Equal(t, "50000000000000000", ref.Amount.String())
	done := r.env.WaitOutbound(ref.ID, store.OutboundConfirmed)
	require.NotNil(t, done.TxHash)
	require.Equal(t, "50000000000000000", r.env.Chain.Balance(nil, customer).String(), "the customer got exactly the refund")
	got, _ := r.shop.Get(o.ID)
	require.Equal(t, Refunded, got.Status)
	require.Equal(t, []int64{ref.ID}, got.Refunds)
	_, err = r.shop.Refund(r.ctx, o.ID, "0.21", customer)
	require.ErrorContains(t, err, "refund_exceeds_received", "never more than was paid")
}

func TestShop_OrderPricedInEuros(t *testing.T) {
	t.Parallel()
	rates := map[pricing.Pair]store.Decimal{{Base: "ETH", Quote: "EUR"}: store.MustParseDecimal("2000")}
	p, err := pricing.New([]pricing.Source{pricing.NewFixed("shop-a", rates, nil), pricing.NewFixed("shop-b", rates, nil)},
		pricing.Config{Assets: []string{"ETH"}, Currencies: []string{"EUR"}})
	require.NoError(t, err)
	r := newShop(t, func(c *service.Config) { c.Pricer = p })
	o, err := r.shop.Place(r.ctx, "49.90", "EUR")
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(o.PaymentURI, "?value=24950000000000000"), "49.90 EUR at 2,000 EUR the coin: %s", o.PaymentURI)
	r.env.Chain.Pay(o.PaymentURI)
	r.until(o.ID, Paid)
	require.Equal(t, 0, new(big.Int).SetUint64(24950000000000000).Cmp(r.env.WaitInvoice(o.InvoiceID, store.StatusSettled).PaidWei.Big()))
}

// The shop's HTTP API places and reads orders.
func TestShop_HTTPAPI(t *testing.T) {
	t.Parallel()
	r := newShop(t)
	mux := http.NewServeMux()
	r.shop.Routes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	res, err := http.Post(srv.URL+"/orders", "application/json", strings.NewReader(`{"price":"0.5"}`))
	require.NoError(t, err)
	var o Order
	require.NoError(t, json.NewDecoder(res.Body).Decode(&o))
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)
	require.Equal(t, Unpaid, o.Status)
	require.Contains(t, o.PaymentURI, "?value=500000000000000000")
	res, err = http.Get(srv.URL + "/orders/" + strconv.FormatInt(o.ID, 10))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	res, err = http.Post(srv.URL+"/orders", "application/json", strings.NewReader(`{"price":"-1"}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Equal(t, "invalid_amount\n", string(body), "evmpay's code for a bad price")
	res, err = http.Get(srv.URL + "/orders/999")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}
