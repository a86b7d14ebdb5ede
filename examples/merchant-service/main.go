// Command merchant-service is a merchant's own Go service with evmpay
// inside: evmpay's invoice API mounted in its mux beside its own routes —
// one of which receives evmpay's signed webhooks — and the indexer,
// settlement, sweep and webhook dispatcher running beside the server.
//
//	RPC_URL=http://127.0.0.1:8545 MNEMONIC='…' PAY_SECRET_KEY='…32+ bytes…' SETTLEMENT_ADDRESS=0x… go run ./examples/merchant-service
//
// main_test.go runs it on evmpaytest's simulated chain, from invoice to SETTLED.
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
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"golang.org/x/sync/errgroup"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/settlement"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/sqlite"
	"github.com/evmpay/evmpay/sweep"
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
	if err := run(ctx, deps{src: indexer.NewRPCSource(node), chain: ethclient.NewClient(node), st: st, wallet: w,
		secret: []byte(os.Getenv("PAY_SECRET_KEY")), payTo: common.HexToAddress(os.Getenv("SETTLEMENT_ADDRESS"))}, ln, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// deps are what the service takes from outside: main reads them from the
// environment; main_test.go passes evmpaytest's simulated chain and store.
type deps struct {
	src    indexer.Source // indexer.NewRPCSource keeps the node's block hashes (right on Cosmos EVM chains)
	chain  sweep.Chain    // an *ethclient.Client
	st     store.Store
	wallet *hdwallet.Wallet // deposit addresses and the sweep wallet
	secret []byte           // PAY_SECRET_KEY: seals api keys and webhook secrets
	payTo  common.Address   // where sweeps send the merchant's funds
	poll   time.Duration    // how often evmpay polls; 0: its defaults
}

// run serves the shop on ln and runs evmpay's workers beside it until ctx ends.
func run(ctx context.Context, d deps, ln net.Listener, out io.Writer) error {
	chainID, err := d.chain.ChainID(ctx)
	sweepKey, err2 := d.wallet.SweepKey()
	creds, err3 := invoice.NewCredentials(d.secret)
	if err := errors.Join(err, err2, err3); err != nil {
		return err
	}
	invoices, err := invoice.New(d.st, creds, d.wallet.Deriver(), chainID.Uint64(), invoice.Config{})
	ix, err2 := indexer.New(d.src, d.st, indexer.Config{Backfill: true, PollInterval: d.poll})
	settler, err3 := settlement.New(d.st, settlement.Config{PollInterval: d.poll})
	sweeper, err4 := sweep.New(d.st, d.chain, sweep.Keys{Deposits: d.wallet, Wallet: sweep.NewKeySigner(sweepKey)}, sweep.Config{PollInterval: d.poll})
	hooks, err5 := webhook.New(d.st, creds, webhook.Config{PollInterval: d.poll})
	if err := errors.Join(err, err2, err3, err4, err5); err != nil {
		return err
	}
	m, err := invoices.CreateMerchant(ctx, invoice.MerchantParams{Name: "my shop", SettlementAddress: d.payTo,
		WebhookURL: "http://" + ln.Addr().String() + "/hooks/evmpay"})
	if err != nil {
		return err
	}
	verifier, err := webhook.NewVerifier(m.WebhookSecret)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	invoices.Routes(mux) // POST /v1/invoices, GET /v1/invoices/{id}, …
	mux.HandleFunc("POST /hooks/evmpay", func(w http.ResponseWriter, r *http.Request) {
		var p webhook.Payload
		var inv struct{ ID int64 } // the members of the invoice this route uses
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil || verifier.Verify(r.Header, body) != nil || json.Unmarshal(body, &p) != nil || json.Unmarshal(p.Data, &inv) != nil {
			http.Error(w, "invalid webhook", http.StatusBadRequest)
			return
		}
		fmt.Fprintf(out, "%s: invoice %d\n", p.Type, inv.ID) // mark the order paid, ship it, …
	})
	fmt.Fprintf(out, "listening on http://%s\napi_key %s\n", ln.Addr(), m.APIKey)

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	g, ctx := errgroup.WithContext(ctx)
	for _, work := range []func(context.Context) error{invoices.Run, ix.Run, settler.Run, sweeper.Run, hooks.Run} {
		g.Go(func() error { return work(ctx) })
	}
	g.Go(func() error { <-ctx.Done(); return srv.Shutdown(context.Background()) })
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return g.Wait()
}
