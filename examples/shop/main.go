package main

import (
	"context"
	"errors"
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
	"github.com/evmpay/evmpay/store/sqlite"
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
	st, err3 := sqlite.Open(ctx, "shop.db", sqlite.Config{})
	ln, err4 := net.Listen("tcp", "127.0.0.1:8091")
	if err := errors.Join(err, err2, err3, err4); err != nil {
		log.Fatal(err)
	}
	svc, err := service.New(ctx, service.Config{Store: st, RPC: node, Wallet: w, SecretKey: []byte(os.Getenv("PAY_SECRET_KEY")),
		PublicBaseURL: "http://" + ln.Addr().String(), AllowPrivateWebhooks: true}) // the shop receives its webhooks on loopback
	if err != nil {
		log.Fatal(err)
	}
	shop, err := NewShop(ctx, svc, common.HexToAddress(os.Getenv("SETTLEMENT_ADDRESS")), "http://"+ln.Addr().String()+"/hooks/evmpay", os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	if err := serve(ctx, svc, shop, ln); err != nil {
		log.Fatal(err)
	}
}

// serve runs the shop's HTTP API (and evmpay's checkout page beside it) and
// evmpay's workers until ctx ends or one of them fails.
func serve(ctx context.Context, svc *service.Service, shop *Shop, ln net.Listener) error {
	mux := http.NewServeMux()
	shop.Routes(mux)
	mux.Handle("/", svc.Handler()) // the checkout page the orders link to
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return svc.Run(gctx) })
	g.Go(func() error {
		<-gctx.Done()
		return srv.Shutdown(context.Background())
	})
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return g.Wait()
}
