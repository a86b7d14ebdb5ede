package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/dashboard"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/webhook"
)

// runDashboardLoad serves the merchant dashboard (hosts/dashboard) on the
// generated database, in this process over loopback HTTP, signs merchant 1
// (a tenth of all invoices) in, and measures p50/p99 of n sequential
// requests per page: the overview, the invoice list and its filters, and
// searches by deposit address, transaction hash and order id.
func runDashboardLoad(ctx context.Context, dbURL string, n int) error {
	st, err := openStore(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	creds, err := invoice.NewCredentials(secretKey)
	if err != nil {
		return err
	}
	mn, err := hdwallet.ParseMnemonic(mnemonic)
	if err != nil {
		return err
	}
	w, err := hdwallet.NewWallet(mn, "")
	if err != nil {
		return err
	}
	svc, err := invoice.New(st, creds, w.Deriver(), chainID, invoice.Config{})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	base := "http://localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	deliveries, err := webhook.NewDeliveriesAPI(st, dashboard.DeliveriesAuthenticator{}, webhook.DeliveriesAPIConfig{})
	if err != nil {
		return err
	}
	d, err := dashboard.New(svc, st, dashboard.Config{PublicURL: base + "/dashboard", SecretKey: secretKey,
		SignInBurst: 1000, Deliveries: deliveries})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/dashboard/", d)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	const password = "scalegen dashboard password"
	if _, err := d.EnsureUser(ctx, 1, "owner@scalegen.example", store.RoleOwner, password); err != nil {
		return err
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.PostForm(base+"/dashboard/sign-in", url.Values{"email": {"owner@scalegen.example"}, "password": {password}})
	if err != nil {
		return err
	}
	res.Body.Close()
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "evmpay_dashboard" {
			cookie = c
		}
	}
	if cookie == nil {
		return fmt.Errorf("scalegen: signing in to the dashboard answered %d", res.StatusCode)
	}

	// Merchant 1's invoices to look up, drawn once; a payment each (the
	// generator writes none) so that a search by transaction hash finds
	// something.
	var ids []int64
	if err := st.DB().SelectContext(ctx, &ids, `SELECT id FROM invoices TABLESAMPLE SYSTEM (1) WHERE merchant_id = 1 LIMIT 200`); err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("scalegen: merchant 1 has no invoices")
	}
	var txs []common.Hash
	for i, id := range ids {
		h := common.Hash(sha256.Sum256([]byte("dashboard payment " + strconv.Itoa(i))))
		p := store.Payment{InvoiceID: id, TxHash: h, LogIndex: store.NativeLogIndex, BlockNumber: uint64(1_000_000 + i),
			BlockHash: h, From: common.BytesToAddress(h[:20]), AmountWei: store.NewAmount(1), CreatedAt: time.Now()}
		if err := st.InsertPayment(ctx, &p); err != nil && !strings.Contains(err.Error(), "conflict") {
			return fmt.Errorf("scalegen: a payment for invoice %d: %w", id, err)
		}
		txs = append(txs, h)
	}
	r := rand.New(rand.NewPCG(5, 6))
	pick := func() int64 { return ids[r.IntN(len(ids))] }
	cases := []struct {
		name string
		path func() string
	}{
		{"overview", func() string { return "/dashboard/" }},
		{"invoices, first page", func() string { return "/dashboard/invoices" }},
		{"invoices, status SETTLED", func() string { return "/dashboard/invoices?status=SETTLED" }},
		{"invoices, status PENDING and PAID", func() string { return "/dashboard/invoices?status=PENDING&status=PAID" }},
		{"invoices, asset ETH, 0.1–1 ETH", func() string { return "/dashboard/invoices?asset=ETH&min=0.1&max=1" }},
		{"invoices, a day 200 days ago", func() string {
			day := time.Now().UTC().AddDate(0, 0, -200).Format(time.DateOnly)
			return "/dashboard/invoices?from=" + day + "&to=" + day
		}},
		{"search: deposit address", func() string {
			return "/dashboard/invoices?q=" + common.BytesToAddress(depositAddress(int(pick()))).Hex()
		}},
		{"search: transaction hash", func() string { return "/dashboard/invoices?q=" + txs[r.IntN(len(txs))].Hex() }},
		{"search: invoice id", func() string { return "/dashboard/invoices?q=" + strconv.FormatInt(pick(), 10) }},
		{"invoice page", func() string { return "/dashboard/invoices/" + strconv.FormatInt(pick(), 10) }},
	}
	fmt.Printf("dashboard on merchant 1; %d sequential requests per page (after a tenth more to warm up)\n\n", n)
	fmt.Printf("| page | p50 | p99 |\n|---|---|---|\n")
	for _, c := range cases {
		var took []time.Duration
		for i := 0; i < n+n/10; i++ {
			req, err := http.NewRequestWithContext(ctx, "GET", base+c.path(), nil)
			if err != nil {
				return err
			}
			req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
			t := time.Now()
			res, err := client.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("scalegen: %s: %s answered %d", c.name, req.URL.Path, res.StatusCode)
			}
			if i >= n/10 {
				took = append(took, time.Since(t))
			}
		}
		p50, p99 := percentiles(took)
		fmt.Printf("| %s | %s | %s |\n", c.name, ms(p50), ms(p99))
	}
	return nil
}
