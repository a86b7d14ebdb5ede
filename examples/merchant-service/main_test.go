package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest"
	"github.com/evmpay/evmpay/hosts/service"
	"github.com/evmpay/evmpay/store"
)

// The service runs on the kit's simulated chain and store: an order made
// through its own route becomes an invoice (the Go API), is paid, settled
// and swept to the merchant, and its webhook route receives each event.
func TestRun_OrderPaidSettledSweptWithWebhooks(t *testing.T) {
	env := evmpaytest.New(t, evmpaytest.Config{NoServices: true}) // the chain, the store, a funded wallet
	payTo := common.HexToAddress("0x000000000000000000000000000000000000bEEF")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var out evmpaytest.Output
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := service.Config{Store: env.Store, RPC: env.Chain.RPC(), Wallet: env.Wallet, SecretKey: []byte("a-test-secret-key-of-32-bytes!!!"),
		AllowPrivateWebhooks: true, PollInterval: 5 * time.Millisecond, Confirmations: 3}
	go func() { done <- run(ctx, cfg, payTo, ln, &out) }()
	out.Wait(t, `listening on`)

	order := func() map[string]any {
		resp, err := http.Post("http://"+ln.Addr().String()+"/orders/1001", "application/json", nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var v map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
		return v
	}
	first := order()
	require.Equal(t, first, order(), "the order's invoice, once")

	env.Chain.Pay(first["pay"].(string))
	settled := env.WaitInvoice(int64(first["invoice_id"].(float64)), store.StatusSettled) // mines as the service settles and sweeps
	require.Equal(t, store.SweepSwept, settled.SweepStatus)
	require.Equal(t, "250000000000000000", env.Chain.Balance(nil, payTo).String(), "swept to the merchant")
	out.Wait(t, `invoice.settled: order 1001\n`)
	require.Regexp(t, `(?s)invoice.paid: order 1001\n.*invoice.confirmed: order 1001\n.*invoice.settled: order 1001\n`, out.String())
	cancel()
	require.NoError(t, <-done)
}
