package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest"
)

// The example serves its own route and the mounted invoice API; an invoice
// it creates has the deposit address the wallet behind its xpub derives,
// and a payment URI the kit's chain can pay.
func TestRun_ServesInvoiceAPIAndOwnRoutes(t *testing.T) {
	env := evmpaytest.New(t, evmpaytest.Config{NoServices: true}) // a chain and a deposit wallet
	getenv := map[string]string{"PAY_XPUB": env.Wallet.Deriver().XPub(), "PAY_SECRET_KEY": "a-test-secret-key-of-32-bytes!!!"}
	var out evmpaytest.Output
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, "127.0.0.1:0", filepath.Join(t.TempDir(), "x.db"), func(k string) string { return getenv[k] }, &out)
	}()
	base, key := out.Wait(t, `listening on (\S+)`)[1], out.Wait(t, `api_key (\S+)`)[1]

	resp, err := http.Get(base + "/shop/hello")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	req, _ := http.NewRequest("POST", base+"/v1/invoices", strings.NewReader(`{"amount_wei":"1000"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", "k1")
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	var inv struct { // the members this test uses
		DepositAddress common.Address `json:"deposit_address"`
		PaymentURI     string         `json:"payment_uri"`
	}
	require.NoError(t, json.Unmarshal(body, &inv))
	first, err := env.Wallet.Address(0)
	require.NoError(t, err)
	require.Equal(t, first, inv.DepositAddress, "the xpub's first deposit address")
	env.Chain.Pay(inv.PaymentURI)
	require.Equal(t, "1000", env.Chain.Balance(nil, first).String())

	cancel()
	require.NoError(t, <-done)
}
