// Command merchant-service is a merchant's own Go service with evmpay
// inside: its shop route creates invoices through evmpay's Go API, the
// checkout page and evmpay's API are mounted beside it, one of its routes
// receives evmpay's signed webhooks, and evmpay's workers run beside the
// server — all wired by hosts/service from one Config.
//
//	RPC_URL=http://127.0.0.1:8545 MNEMONIC='…' PAY_SECRET_KEY='…32+ bytes…' SETTLEMENT_ADDRESS=0x… go run ./examples/merchant-service
//
// main_test.go runs it on evmpaytest's simulated chain, from order to SETTLED.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"
	"golang.org/x/sync/errgroup"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/service"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store/sqlite"
	"github.com/evmpay/evmpay/webhook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m, err := hdwallet.ParseMnemonic(os.Getenv("MNEMONIC"))
	if err != nil {
		log.Fatal(err)
	}
	w, err := hdwallet.NewWallet(m, "")
	node, err2 := rpc.DialContext(ctx, os.Getenv("RPC_URL"))
	st, err3 := sqlite.Open(ctx, "merchant.db", sqlite.Config{})
	ln, err4 := net.Listen("tcp", "127.0.0.1:8090")
	if err := errors.Join(err, err2, err3, err4); err != nil {
		log.Fatal(err)
	}
	cfg := service.Config{Store: st, RPC: node, Wallet: w, SecretKey: []byte(os.Getenv("PAY_SECRET_KEY")),
		PublicBaseURL: "http://" + ln.Addr().String(), AllowPrivateWebhooks: true} // its own webhooks come back to it on loopback
	if err := run(ctx, cfg, common.HexToAddress(os.Getenv("SETTLEMENT_ADDRESS")), ln, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run serves the shop on ln and runs evmpay beside it until ctx ends.
func run(ctx context.Context, cfg service.Config, payTo common.Address, ln net.Listener, out io.Writer) error {
	svc, err := service.New(ctx, cfg)
	if err != nil {
		return err
	}
	// The merchant is the shop's own, found by its id at every start: no
	// API key to keep.
	m, _, err := svc.Invoices.EnsureMerchant(ctx, "my-shop", invoice.MerchantParams{Name: "my shop",
		SettlementAddress: payTo, WebhookURL: "http://" + ln.Addr().String() + "/hooks/evmpay"})
	shop, err2 := svc.Invoices.Owner(ctx, m.ID)
	secret, err3 := svc.Invoices.WebhookSecret(ctx, m.ID)
	if err := errors.Join(err, err2, err3); err != nil {
		return err
	}
	verifier, err := webhook.NewVerifier(secret)
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("/", svc.Handler()) // the checkout page, evmpay's API
	// The shop's own route: an order becomes an invoice, idempotently by
	// the order's id.
	mux.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		inv, err := svc.Invoices.CreateInvoice(r.Context(), shop, "order-"+id,
			invoice.InvoiceParams{AmountFormatted: "0.25", OrderID: id})
		if err != nil {
			http.Error(w, invoice.ErrorCode(err), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"invoice_id": inv.ID, "pay": inv.PaymentURI, "checkout": inv.CheckoutURL})
	})
	mux.HandleFunc("POST /hooks/evmpay", func(w http.ResponseWriter, r *http.Request) {
		var p webhook.Payload
		var inv struct {
			OrderID string `json:"order_id"`
		} // the members of the invoice this route uses
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil || verifier.Verify(r.Header, body) != nil || json.Unmarshal(body, &p) != nil || json.Unmarshal(p.Data, &inv) != nil {
			http.Error(w, "invalid webhook", http.StatusBadRequest)
			return
		}
		fmt.Fprintf(out, "%s: order %s\n", p.Type, inv.OrderID) // mark the order paid, ship it, …
	})
	fmt.Fprintf(out, "listening on http://%s\n", ln.Addr())

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return svc.Run(gctx) }) // indexer, settlement, sweep, webhooks: the first failure stops all
	g.Go(func() error {
		<-gctx.Done()
		return srv.Shutdown(context.Background())
	})
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return g.Wait()
}
