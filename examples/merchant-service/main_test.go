package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest"
	"github.com/evmpay/evmpay/store"
)

// The service runs on the kit's simulated chain and store: an invoice
// created through its mounted API is paid, settled and swept to the
// merchant, and the service's own route receives each webhook.
func TestRun_InvoicePaidSettledSweptWithWebhooks(t *testing.T) {
	env := evmpaytest.New(t, evmpaytest.Config{NoServices: true}) // the chain, the store, a funded wallet
	payTo := common.HexToAddress("0x000000000000000000000000000000000000bEEF")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var out evmpaytest.Output
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, deps{src: env.Chain.Source(), chain: env.Chain.Client(), st: env.Store, wallet: env.Wallet,
			secret: []byte("a-test-secret-key-of-32-bytes!!!"), payTo: payTo, poll: 5 * time.Millisecond}, ln, &out)
	}()
	apiKey := out.Wait(t, `api_key (\S+)`)[1]

	req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/v1/invoices", strings.NewReader(`{"amount_wei":"250000"}`))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Idempotency-Key", "order-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var inv struct { // the members this test uses
		ID         int64  `json:"id"`
		PaymentURI string `json:"payment_uri"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&inv))

	env.Chain.Pay(inv.PaymentURI)
	settled := env.WaitInvoice(inv.ID, store.StatusSettled) // mines as the service settles and sweeps
	require.Equal(t, store.SweepSwept, settled.SweepStatus)
	require.Equal(t, "250000", env.Chain.Balance(nil, payTo).String(), "swept to the merchant")
	out.Wait(t, `invoice.settled: invoice 1\n`)
	require.Regexp(t, `(?s)invoice.paid: invoice 1\n.*invoice.confirmed: invoice 1\n.*invoice.settled: invoice 1\n`, out.String())
	cancel()
	require.NoError(t, <-done)
}
