// Command embed-invoice-api mounts evmpay's invoice API in your own net/http
// server, beside your own routes. It holds only the deposit wallet's
// account xpub (as printed by `payd xpub`): it hands out deposit addresses
// but can never spend from them. examples/merchant-service adds settlement,
// sweep and webhooks.
//
//	PAY_XPUB=xpub… PAY_SECRET_KEY='…32+ bytes…' go run ./examples/embed-invoice-api
package main

import (
	"context"
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

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store/sqlite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, "127.0.0.1:8090", "evmpay-embed.db", os.Getenv, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run serves the invoice API and the shop's own routes on addr until ctx
// ends, with its state in the SQLite file db.
func run(ctx context.Context, addr, db string, getenv func(string) string, out io.Writer) error {
	deriver, err := hdwallet.NewDeriver(getenv("PAY_XPUB"))
	creds, err2 := invoice.NewCredentials([]byte(getenv("PAY_SECRET_KEY")))
	if err := errors.Join(err, err2); err != nil {
		return err
	}
	st, err := sqlite.Open(ctx, db, sqlite.Config{}) // postgres.Open in production
	if err != nil {
		return err
	}
	defer st.Close()
	svc, err := invoice.New(st, creds, deriver, 1337, invoice.Config{}) // your chain's EIP-155 id
	if err != nil {
		return err
	}
	m, err := svc.CreateMerchant(ctx, invoice.MerchantParams{Name: "example shop",
		SettlementAddress: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	svc.Routes(mux) // POST /v1/invoices, GET /v1/invoices/{id}, …
	mux.HandleFunc("GET /shop/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "your own routes live here too")
	})
	fmt.Fprintf(out, "listening on http://%s\napi_key %s\n", ln.Addr(), m.APIKey)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
