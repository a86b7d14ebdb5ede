package checkout_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/browserwallet"
	"github.com/evmpay/evmpay/hosts/evmpaytest/qrscan"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/invoice/checkout"
)

// TestCheckout_QuotesOnTwoChains_PickedNetworkIsWhatThePageShowsAndTheWalletPays
// runs a fiat invoice whose quotes are USDC on chain 1337 (the top-level
// network, "dev") and USDC on chain 9000 (a listed network, "evmd", whose
// native coin is TEST) in headless Chromium, from a recorded public read:
// the picker names each quote's network; picking the 9000 quote with the
// keyboard switches the page to evmd (name, URI, QR, contract link); the
// wallet is asked to switch to 0x2328, offered evmd as configured, then
// sent the transfer to the 9000 quote's token; a payment on chain 9000
// links to evmd's explorer, one without chain_id to the invoice's chain's.
func TestCheckout_QuotesOnTwoChains_PickedNetworkIsWhatThePageShowsAndTheWalletPays(t *testing.T) {
	t.Parallel()
	const (
		deposit = "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc"
		usdcDev = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
		usdcD   = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
		tok     = "AAAAAAAAAAAAAAAAAAAABA"
		evmdRPC = "http://127.0.0.1:26657/evm"
	)
	uriDev := fmt.Sprintf("ethereum:%s@1337/transfer?address=%s&uint256=25000000", usdcDev, deposit)
	uriD := fmt.Sprintf("ethereum:%s@9000/transfer?address=%s&uint256=24990000", usdcD, deposit)
	quotes := []any{
		map[string]any{"asset": map[string]any{"symbol": "USDC", "address": usdcDev, "decimals": 6}, "chain_id": 1337,
			"amount": "25000000", "paid": "0", "remaining": "25000000", "rate": "1.00", "payment_uri": uriDev},
		map[string]any{"asset": map[string]any{"symbol": "USDC", "address": usdcD, "decimals": 6}, "chain_id": 9000,
			"amount": "24990000", "paid": "0", "remaining": "24990000", "rate": "1.0004", "payment_uri": uriD},
	}
	// invoiceJSON is the public read; delayed, its delayed_chains.
	invoiceJSON := func(status string, paid string, payments []any, delayed ...uint64) []byte {
		m := map[string]any{
			"status": status, "chain_id": 1337, "deposit_address": deposit, "invoice_id": 8, "created_at": "2026-11-21T12:00:00Z",
			"price": map[string]any{"amount": "25.00", "currency": "EUR"}, "paid_value": map[string]any{"amount": paid, "currency": "EUR"},
			"remaining_value": map[string]any{"amount": "25.00", "currency": "EUR"}, "quotes": quotes,
			"payment_uri": uriDev, "expires_at": time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339),
			"merchant_name": "shop", "description": "", "order_id": "", "underpaid": false, "overpaid": false, "paid_late": false,
			"confirmations": 0, "confirmations_required": 12, "payments": payments,
		}
		if len(delayed) > 0 {
			m["delayed_chains"] = delayed
		}
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	var body atomic.Value
	body.Store(invoiceJSON("PENDING", "0.00", []any{}))

	h, err := checkout.New(checkout.Config{ChainName: "dev", RPCURL: "http://127.0.0.1:8546",
		ExplorerTxURL: "https://explorer.example/tx/{tx}", ExplorerAddressURL: "https://explorer.example/address/{address}",
		Networks: []checkout.Network{{ChainID: 9000, Name: "evmd", NativeSymbol: "TEST", RPCURL: evmdRPC,
			ExplorerTxURL: "https://explorer.evmd.example/tx/{tx}", ExplorerAddressURL: "https://explorer.evmd.example/address/{address}"}}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	h.Routes(mux)
	var (
		mu        sync.Mutex
		qrQueries []string
		failures  []string
	)
	authorized := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != "Bearer "+tok {
			w.WriteHeader(http.StatusUnauthorized)
			return false
		}
		return true
	}
	mux.HandleFunc("GET /v1/public/invoice", func(w http.ResponseWriter, r *http.Request) {
		if authorized(w, r) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body.Load().([]byte))
		}
	})
	// The QR code of the quote ?asset= and ?chain_id= name, as the
	// invoice API is to serve it.
	mux.HandleFunc("GET /v1/public/invoice/qr.svg", func(w http.ResponseWriter, r *http.Request) {
		if !authorized(w, r) {
			return
		}
		mu.Lock()
		qrQueries = append(qrQueries, r.URL.RawQuery)
		mu.Unlock()
		uri := uriDev
		if q := r.URL.Query(); q.Get("chain_id") == "9000" && strings.EqualFold(q.Get("asset"), usdcD) {
			uri = uriD
		}
		svg, err := invoice.QRSVG(uri)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "image/svg+xml")
		_, _ = w.Write(svg)
	})
	mux.HandleFunc("GET /v1/public/invoice/branding", func(w http.ResponseWriter, r *http.Request) {
		if authorized(w, r) {
			_, _ = w.Write([]byte(`{}`))
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ctx := headless(t)
	chromedp.ListenTarget(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			failures = append(failures, e.ExceptionDetails.Error())
			mu.Unlock()
		}
	})
	eval := func(js string, out any) {
		t.Helper()
		require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(js, out)))
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		require.Eventually(t, cond, 30*time.Second, 50*time.Millisecond, what)
	}
	require.NoError(t, chromedp.Run(ctx,
		chromedp.EmulateViewport(360, 900),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(browserwallet.Recording).Do(ctx)
			return err
		}),
		chromedp.Navigate(srv.URL+"/checkout#"+tok)))

	// The picker: each quote names its network, and says they differ.
	type pickerView struct {
		Options   []string `json:"options"`
		Checked   int      `json:"checked"`
		Hint      bool     `json:"hint"`
		Described string   `json:"described"`
		Network   string   `json:"network"`
		Guard     string   `json:"guard"`
		Href      string   `json:"href"`
		QR        string   `json:"qr"`
		QRLoaded  bool     `json:"qrLoaded"`
		Contract  string   `json:"contract"`
		Explorer  string   `json:"explorer"`
		Focused   string   `json:"focused"`
	}
	var v pickerView
	look := func() pickerView {
		var v pickerView
		eval(`(() => {
			const q = document.getElementById("qr");
			const inputs = [...document.querySelectorAll("#choices input")];
			return {
				options: [...document.querySelectorAll("#choices label")].map((l) => l.textContent),
				checked: inputs.findIndex((i) => i.checked),
				hint: !document.getElementById("choice-hint").hidden && !document.getElementById("choice").hidden,
				described: document.getElementById("choice").getAttribute("aria-describedby") || "",
				network: document.getElementById("network").textContent,
				guard: document.getElementById("guard").textContent,
				href: document.getElementById("open-wallet").getAttribute("href"),
				qr: q.dataset.uri || "",
				qrLoaded: !!q.getAttribute("src") && q.complete && q.naturalWidth > 0,
				contract: document.getElementById("token-contract").textContent,
				explorer: document.getElementById("token-explorer").href,
				focused: document.activeElement ? document.activeElement.name + ":" + document.activeElement.value : "",
			};
		})()`, &v)
		return v
	}
	until("the picker and the first quote's QR code", func() bool { v = look(); return v.QRLoaded && len(v.Options) == 2 })
	require.Equal(t, []string{"USDC · dev 25 USDC", "USDC · evmd 24.99 USDC"}, v.Options, "each option names its network")
	require.True(t, v.Hint, "the picker says the networks differ")
	require.Equal(t, "choice-hint", v.Described, "and the group is described by it")
	require.Equal(t, 0, v.Checked)
	require.Equal(t, "dev, chain id 1337", v.Network)
	require.Equal(t, uriDev, v.Href)

	// Picked with the keyboard: the arrow key moves to the evmd quote and
	// keeps the focus there.
	require.NoError(t, chromedp.Run(ctx, chromedp.Focus(`#choices input[value="0"]`, chromedp.ByQuery), chromedp.KeyEvent(kb.ArrowDown)))
	until("the page on evmd", func() bool { v = look(); return v.Network == "evmd, chain id 9000" && v.QR == uriD && v.QRLoaded })
	require.Equal(t, 1, v.Checked)
	require.Equal(t, "asset:1", v.Focused, "the focus stays on the picked option")
	require.Contains(t, v.Guard, "evmd, chain id 9000")
	require.Equal(t, uriD, v.Href, "Open in wallet is the 9000 quote's own URI")
	require.Contains(t, v.Href, "@9000/")
	require.Equal(t, usdcD, v.Contract)
	require.Equal(t, "https://explorer.evmd.example/address/"+usdcD, v.Explorer, "the token contract on evmd's explorer")
	// The QR code the page shows is the 9000 quote's, read from the image
	// it was served (as hosts/payd's tests do).
	var dataURL string
	awaited := func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(`(async () => {
		const q = document.getElementById("qr");
		await q.decode();
		const n = q.naturalWidth, c = document.createElement("canvas");
		c.width = c.height = n;
		const g = c.getContext("2d");
		g.imageSmoothingEnabled = false;
		g.fillStyle = "#fff";
		g.fillRect(0, 0, n, n);
		g.drawImage(q, 0, 0, n, n);
		return c.toDataURL("image/png");
	})()`, &dataURL, awaited)))
	png, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(dataURL, "data:image/png;base64,"))
	require.NoError(t, err)
	sym, err := qrscan.ReadPNG(png)
	require.NoError(t, err)
	require.Equal(t, uriD, sym.Text, "the QR code is the 9000 quote's")
	mu.Lock()
	require.Contains(t, qrQueries, url.Values{"asset": {usdcD}, "chain_id": {"9000"}}.Encode(), "the QR asked for by asset and chain")
	mu.Unlock()

	if dir := os.Getenv("CHECKOUT_SCREENSHOTS"); dir != "" {
		// For a person to look at (PNG: quality 100), never an assertion.
		for _, width := range []int64{360, 1280} {
			var shot []byte
			require.NoError(t, chromedp.Run(ctx, chromedp.EmulateViewport(width, 900), chromedp.FullScreenshot(&shot, 100)))
			require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("networks-picker-%d.png", width)), shot, 0o644))
		}
	}

	// Pay with the browser wallet: switch to 0x2328 (unknown: 4902), add
	// evmd as configured, then the transfer on it.
	require.NoError(t, chromedp.Run(ctx, chromedp.Click("#pay-browser", chromedp.ByID)))
	var msg string
	until("the transaction sent", func() bool {
		eval(`document.getElementById("wallet-msg").textContent`, &msg)
		return strings.HasPrefix(msg, "Transaction sent")
	})
	var calls []browserwallet.Call
	eval(`window.__walletCalls`, &calls)
	methods := make([]string, len(calls))
	for i, c := range calls {
		methods[i] = c.Method
	}
	require.Equal(t, []string{"eth_requestAccounts", "wallet_switchEthereumChain", "wallet_addEthereumChain", "eth_sendTransaction"}, methods)
	require.Equal(t, []map[string]any{{"chainId": "0x2328"}}, calls[1].Params)
	require.Equal(t, []map[string]any{{
		"chainId":           "0x2328",
		"chainName":         "evmd",
		"nativeCurrency":    map[string]any{"name": "TEST", "symbol": "TEST", "decimals": float64(18)},
		"rpcUrls":           []any{evmdRPC},
		"blockExplorerUrls": []any{"https://explorer.evmd.example"},
	}}, calls[2].Params, "evmd offered with its own name, coin, RPC URL and explorer")
	want := "0xa9059cbb" + strings.Repeat("0", 24) + strings.ToLower(deposit[2:]) + fmt.Sprintf("%064x", 24990000)
	require.Equal(t, []map[string]any{{"from": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "to": usdcD, "value": "0x0",
		"data": want, "chainId": "0x2328"}}, calls[3].Params, "transfer(deposit, 24.99 USDC) on the 9000 quote's token")

	// evmd's payments are seen late for now (its parts stopped): the
	// picker says so of its quote, and the page, while evmd is picked,
	// tells the payer a payment is safe.
	body.Store(invoiceJSON("PENDING", "0.00", []any{}, 9000))
	note := func() (text string) {
		eval(`(() => { const d = document.getElementById("delayed"); return d.hidden ? "" : d.textContent; })()`, &text)
		return text
	}
	until("the delayed note", func() bool { return note() != "" })
	require.Equal(t, "Payments on evmd, chain id 9000 are seen late right now. A payment you send is safe: it shows here as soon as the network is back.", note())
	v = look()
	require.Equal(t, []string{"USDC · dev 25 USDC", "USDC · evmd (delayed) 24.99 USDC"}, v.Options)
	if dir := os.Getenv("CHECKOUT_SCREENSHOTS"); dir != "" {
		var shot []byte
		require.NoError(t, chromedp.Run(ctx, chromedp.EmulateViewport(360, 900), chromedp.FullScreenshot(&shot, 100)))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "networks-delayed-360.png"), shot, 0o644))
	}
	require.NoError(t, chromedp.Run(ctx, chromedp.Focus(`#choices input[value="1"]`, chromedp.ByQuery), chromedp.KeyEvent(kb.ArrowUp)))
	until("the page back on dev, without the note", func() bool { return look().Network == "dev, chain id 1337" && note() == "" })

	// The receipt: each payment links to its own chain's explorer.
	onD, onDev := "0x"+strings.Repeat("ab", 32), "0x"+strings.Repeat("ef", 32)
	body.Store(invoiceJSON("PAID", "25.00", []any{
		map[string]any{"tx_hash": onD, "chain_id": 9000, "amount": "12000000", "block_number": 42, "seen_at": "2026-11-21T12:01:00Z", "late": false,
			"asset": map[string]any{"symbol": "USDC", "address": usdcD, "decimals": 6}, "value": map[string]any{"amount": "12.00", "currency": "EUR"}},
		map[string]any{"tx_hash": onDev, "amount": "13000000", "block_number": 43, "seen_at": "2026-11-21T12:02:00Z", "late": false,
			"asset": map[string]any{"symbol": "USDC", "address": usdcDev, "decimals": 6}, "value": map[string]any{"amount": "13.00", "currency": "EUR"}},
	}))
	var links []string
	until("the receipt's explorer links", func() bool {
		eval(`[...document.querySelectorAll("#receipt-facts .txs a")].map(a => a.href)`, &links)
		return len(links) == 2
	})
	require.Equal(t, []string{"https://explorer.evmd.example/tx/" + onD, "https://explorer.example/tx/" + onDev}, links,
		"chain_id 9000: evmd's explorer; no chain_id: the invoice's chain's")
	var receipt string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text("#receipt-facts", &receipt, chromedp.ByID)))
	require.Contains(t, receipt, "evmd, chain id 9000; dev, chain id 1337", "the networks the payments arrived on")

	var exceptions []string
	eval(`window.__exceptions`, &exceptions)
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, append(exceptions, failures...), "no exception or CSP violation on the page")
}
