package invoice_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store/sqlite"
)

// Mount the invoice API on your own mux, create a merchant, and create an
// invoice over HTTP with an Idempotency-Key.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "evmpay-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "evmpay.db"), sqlite.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	// PAY_SECRET_KEY (≥ 32 bytes) and the public side of the HD wallet.
	creds, _ := invoice.NewCredentials([]byte("an example secret key of 32+ bytes!"))
	m, _ := hdwallet.ParseMnemonic("test test test test test test test test test test test junk")
	w, _ := hdwallet.NewWallet(m, "")
	svc, err := invoice.New(st, creds, w.Deriver(), 1337, invoice.Config{})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	svc.Routes(mux) // beside your own routes
	srv := httptest.NewServer(mux)
	defer srv.Close()

	merchant, _ := svc.CreateMerchant(ctx, invoice.MerchantParams{
		Name:              "coffee shop",
		SettlementAddress: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"),
	})

	req, _ := http.NewRequest("POST", srv.URL+"/v1/invoices",
		strings.NewReader(`{"amount_wei":"1500000000000000000","order_id":"order-42"}`))
	req.Header.Set("Authorization", "Bearer "+merchant.APIKey)
	req.Header.Set("Idempotency-Key", "order-42")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var inv struct {
		Status     string `json:"status"`
		PaymentURI string `json:"payment_uri"`
		QRPNGURL   string `json:"qr_png_url"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&inv)
	fmt.Println(resp.StatusCode, inv.Status)
	fmt.Println(inv.PaymentURI)
	fmt.Println(inv.QRPNGURL)
	// Output:
	// 201 PENDING
	// ethereum:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266@1337?value=1500000000000000000
	// /v1/invoices/1/qr.png
}
