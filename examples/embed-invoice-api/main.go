// Command embed-invoice-api mounts evmpay's invoice API in your own net/http
// server, beside your own routes.
//
//	go run ./examples/embed-invoice-api -addr 127.0.0.1:8090
//
// It keeps its state in a SQLite file, creates a merchant and prints its
// api_key and a curl command. Deposit addresses come from PAY_XPUB (an
// account xpub, as printed by `payd xpub`); without it, a throwaway mnemonic
// is generated — fine for trying it, never for real money.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store/sqlite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "embed-invoice-api:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("embed-invoice-api", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	db := fs.String("db", filepath.Join(os.TempDir(), "evmpay-embed.db"), "SQLite file")
	chainID := fs.Uint64("chain-id", 1337, "EIP-155 chain id of the chain you take payments on")
	if err := fs.Parse(args); err != nil {
		return err
	}

	// 1. The store: SQLite here; postgres.Open for production.
	st, err := sqlite.Open(ctx, *db, sqlite.Config{})
	if err != nil {
		return err
	}
	defer st.Close()

	// 2. Credentials from your PAY_SECRET_KEY (≥ 32 bytes, from a secret
	// store in production).
	secret := []byte(getenv("PAY_SECRET_KEY"))
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	}
	creds, err := invoice.NewCredentials(secret)
	if err != nil {
		return err
	}

	// 3. The public-only deriver: this process can hand out deposit
	// addresses but never spend from them.
	deriver, err := deriverFrom(getenv("PAY_XPUB"), stdout)
	if err != nil {
		return err
	}

	// 4. The invoice API on your own mux, beside your own routes.
	svc, err := invoice.New(st, creds, deriver, *chainID, invoice.Config{})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	svc.Routes(mux)
	mux.HandleFunc("GET /shop/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "your own routes live here too")
	})

	m, err := svc.CreateMerchant(ctx, invoice.MerchantParams{
		Name:              "example shop",
		SettlementAddress: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"),
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	fmt.Fprintf(stdout, "api_key %s\n", m.APIKey)
	fmt.Fprintf(stdout, "try: curl -s -X POST http://%s/v1/invoices -H 'Authorization: Bearer %s' -H 'Idempotency-Key: k1' -H 'Content-Type: application/json' -d '{\"amount_wei\":\"1000\"}'\n",
		ln.Addr(), m.APIKey)

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func deriverFrom(xpub string, stdout io.Writer) (*hdwallet.Deriver, error) {
	if xpub != "" {
		return hdwallet.NewDeriver(xpub)
	}
	m, err := hdwallet.GenerateMnemonic(24)
	if err != nil {
		return nil, err
	}
	w, err := hdwallet.NewWallet(m, "")
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(stdout, "PAY_XPUB not set: using a throwaway wallet (its funds are unrecoverable)")
	return w.Deriver(), nil
}
