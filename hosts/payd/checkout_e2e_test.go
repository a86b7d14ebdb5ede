package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"
)

// checkoutDev is a `payd dev` process (in this test process) and the
// chain it runs, for the checkout page's browser tests. Its helpers fail
// its t: a subtest uses dev.in(t).
type checkoutDev struct {
	t         *testing.T
	ctx       context.Context
	base      string // http://127.0.0.1:port
	proxy     string
	chainAddr string
	api       apiClient
	out       *syncBuffer
	tokens    *tokenLog // every lookup token handed out
}

// tokenLog is every lookup token a checkoutDev handed out, whichever
// subtest asked.
type tokenLog struct {
	mu  sync.Mutex
	all []string
}

func (l *tokenLog) add(tok string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, tok)
}

func (l *tokenLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.all...)
}

// in is the same payd dev for a subtest: its helpers fail t, so that a
// failure stops the subtest that saw it, never the test that started payd
// dev ("subtest may have called FailNow on a parent test").
func (d *checkoutDev) in(t *testing.T) *checkoutDev {
	c := *d
	c.t, c.api = t, d.api.in(t)
	return &c
}

func startCheckoutDev(t *testing.T, ctx context.Context) *checkoutDev {
	t.Helper()
	httpAddr, proxyAddr, chainAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	out := &syncBuffer{}
	data := t.TempDir()
	runUntilEnd(t, ctx, "payd dev", func(ctx context.Context) error {
		return run(ctx, []string{"dev", "--http", httpAddr, "--rpc-proxy", proxyAddr, "--chain-rpc", chainAddr,
			"--data", data, "--block-time", "500ms", "--metrics", ""}, out)
	})
	waitHTTP(t, "http://"+httpAddr+"/readyz", 60*time.Second)
	key := apiKeyRe.FindStringSubmatch(out.String())
	require.NotNil(t, key, "the banner prints the demo api_key:\n%s", out.String())
	require.Contains(t, out.String(), "http://"+httpAddr+"/checkout#<lookup_token>", "the banner shows the checkout URL")
	return &checkoutDev{t: t, ctx: ctx, base: "http://" + httpAddr, proxy: "http://" + proxyAddr, chainAddr: chainAddr,
		api: apiClient{t: t, base: "http://" + httpAddr, key: key[1]}, out: out, tokens: &tokenLog{}}
}

// create makes an invoice and returns its create response.
func (d *checkoutDev) create(body map[string]any) map[string]any {
	d.t.Helper()
	status, inv := d.api.do("POST", "/v1/invoices", body, map[string]string{"Idempotency-Key": fmt.Sprint(time.Now().UnixNano())})
	require.Equal(d.t, http.StatusCreated, status, "%v", inv)
	tok := inv["lookup_token"].(string)
	require.Equal(d.t, d.base+"/checkout#"+tok, inv["checkout_url"])
	d.tokens.add(tok)
	return inv
}

// pay sends value wei to the invoice's deposit address with `payd pay`
// (dev account 0) and returns the transaction's hash.
func (d *checkoutDev) pay(inv map[string]any, wei string) string {
	d.t.Helper()
	uri := fmt.Sprintf("ethereum:%s@1337?value=%s", inv["deposit_address"], wei)
	var out bytes.Buffer
	require.NoError(d.t, run(d.ctx, []string{"pay", "--rpc", d.chainAddr, uri}, &out))
	return strings.TrimSpace(out.String())
}

// shop is the merchant's own site, where the page sends the payer back: a
// loopback server (payd dev accepts http redirect_url on loopback).
func newShop(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><title>Shop</title><p>Thank you for your order.</p>")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCheckout_InARealBrowser drives the hosted checkout page in headless
// Chromium against `payd dev` (the whole service on its dev chain), through
// every state: each is asserted, screenshotted at 360 and 1280 px into
// test-output/checkout/ and checked by axe-core.
func TestCheckout_InARealBrowser(t *testing.T) {
	t.Parallel() // its own payd dev and Chromium, on ports the OS picks
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := startCheckoutDev(t, ctx)
	br := newBrowser(t)
	shop := newShop(t)

	// Created first: it expires on the server while the other cases run.
	expiring := dev.create(map[string]any{"amount_wei": "250000000000000000", "expires_in_seconds": 60})

	t.Run("Pending_MobileFirstWithGuardrailsAndAQRDecodingToThePaymentURI", func(t *testing.T) {
		dev := dev.in(t)
		inv := dev.create(map[string]any{"amount_wei": "500000000000000000", "order_id": "A-17", "description": "Two coffees"})
		tb := br.open(t, inv["checkout_url"].(string), 360)
		v := tb.until("the pending invoice with its QR code", 30*time.Second, func(v view) bool { return v.QRLoaded })
		require.Equal(t, []string{"details", "pay"}, v.Shown)
		require.Equal(t, "demo", v.Merchant)
		require.Equal(t, "Two coffees", v.Description)
		require.Equal(t, "A-17", v.Order)
		require.Equal(t, "0.5", v.Amount, "0.5 exactly, from wei")
		require.Equal(t, "ETH", v.Symbol)
		require.Equal(t, "evmpay dev chain, chain id 1337", v.Network)
		require.Equal(t, common.HexToAddress(inv["deposit_address"].(string)).Hex(), v.Address, "EIP-55")
		require.Equal(t, inv["payment_uri"], v.OpenWallet)
		require.Equal(t, "Waiting for your payment.", v.Status)
		require.Equal(t, "Send only ETH on evmpay dev chain, chain id 1337.", v.Guard)
		require.Equal(t, "Paying from an exchange? It may deduct a withdrawal fee: make sure exactly 0.5 ETH arrives.", v.FeeNote)
		require.Regexp(t, `^Expires in 1[45]:[0-5]\d$`, v.Countdown)
		require.Equal(t, inv["payment_uri"], tb.qr(), "the QR code the page was served")
		require.False(t, v.WalletButton, "no browser wallet, no browser-wallet button")

		// A phone cannot scan its own screen: "Open in wallet" comes first.
		require.Less(t, tb.box("open-wallet").Y+tb.box("open-wallet").H, tb.box("qr").Y, "Open in wallet above the QR code at 360 px")
		// Each copy button sits beside the value it copies.
		for value, button := range map[string]string{"amount": "copy-amount", "address": "copy-address"} {
			vb, bb := tb.box(value), tb.box(button)
			require.Greater(t, bb.X, vb.X, "%s is right of %s", button, value)
			require.True(t, bb.Y < vb.Y+vb.H && vb.Y < bb.Y+bb.H, "%s is on the same line as %s: %+v %+v", button, value, bb, vb)
		}
		var copies map[string]string
		require.NoError(t, chromedp.Run(tb.ctx, chromedp.Evaluate(
			`({ amount: document.getElementById("copy-amount").dataset.copy, address: document.getElementById("copy-address").dataset.copy })`, &copies)))
		require.Equal(t, map[string]string{"amount": "0.5", "address": v.Address}, copies)

		// Keyboard: Tab reaches the controls in reading order.
		var focused []string
		for range 3 {
			var id string
			require.NoError(t, chromedp.Run(tb.ctx, chromedp.KeyEvent(kb.Tab),
				chromedp.Evaluate(`document.activeElement.id`, &id)))
			focused = append(focused, id)
		}
		require.Equal(t, []string{"copy-amount", "open-wallet", "copy-address"}, focused)
		tb.check("pending")
		// At 1280 px (check leaves the page there) the QR code comes first, beside the buttons.
		qr, open := tb.box("qr"), tb.box("open-wallet")
		require.Less(t, qr.X+qr.W, open.X, "QR code left of Open in wallet at 1280 px")
		tb.requireClean()

		dk := br.open(t, inv["checkout_url"].(string), 360, dark())
		dk.until("the pending invoice, dark", 30*time.Second, func(v view) bool { return v.QRLoaded })
		var bg string
		require.NoError(t, chromedp.Run(dk.ctx, chromedp.Evaluate(`getComputedStyle(document.body).backgroundColor`, &bg)))
		require.Equal(t, "rgb(13, 17, 23)", bg, "prefers-color-scheme: dark")
		dk.check("pending-dark")
		dk.requireClean()
	})

	t.Run("Payment_SeenWithItsTransactionThenConfirmedOnceThenBackToTheShop", func(t *testing.T) {
		dev := dev.in(t)
		back := shop.URL + "/orders/A-18?paid=1"
		inv := dev.create(map[string]any{"amount_wei": "750000000000000001", "redirect_url": back})
		id := int64(inv["id"].(float64))
		// The page's clock is the test's (frozen): the redirect waits for it.
		tb := br.open(t, inv["checkout_url"].(string), 1280, withClock())
		tb.until("pending", 30*time.Second, func(v view) bool { return v.QRLoaded })
		require.Equal(t, "0.750000000000000001", tb.view().Amount)
		paidAt := time.Now()
		hash := dev.pay(inv, "750000000000000001")
		seen := tb.until("the payment seen", 30*time.Second, func(v view) bool {
			return shows(v, "details", "progress", "receipt") || shows(v, "details", "done", "return-row", "receipt")
		})
		t.Logf("payment seen on the page %s after the transaction was mined", time.Since(paidAt).Round(100*time.Millisecond))
		require.True(t, shows(seen, "details", "progress", "receipt"), "the page showed the payment before its confirmations: %+v", seen)
		require.Regexp(t, `^Payment seen\. Waiting for confirmations: (\d|1[01]) of 12\.$`, seen.Status, "fewer than 12")
		require.Equal(t, []string{hash}, seen.Txs, "proof of payment from 'payment seen' on: the transaction's hash")
		require.Equal(t, fmt.Sprint(id), seen.Receipt["Invoice"])
		require.Equal(t, "Payment seen, waiting for confirmations", seen.Receipt["Status"])
		require.Empty(t, seen.Return, "the return link waits for a final state")
		tb.check("seen")

		statuses := map[string]bool{}
		v := tb.until("the payment confirmed", 120*time.Second, func(v view) bool {
			statuses[v.Status] = true
			return v.Status == "Payment confirmed. Thank you!"
		})
		// The page polls every second and blocks come every 500 ms, so it
		// shows every second or third count (fewer on a loaded machine);
		// the page itself recorded them while the test took screenshots.
		confs := tb.confirmationsShown()
		require.GreaterOrEqual(t, len(confs), 2, "confirmations counted live: %v", confs)
		require.True(t, v.SameDocument, "no reload")
		require.Equal(t, []string{"details", "done", "return-row", "receipt"}, v.Shown)
		require.Equal(t, back, v.Return, "Return to merchant")
		require.Equal(t, "Returning you to the merchant in 10 s.", v.Redirect)
		require.Equal(t, "Your payment of 0.750000000000000001 ETH is confirmed on the network. Your part is done; keep the receipt below if you like.", v.Done)
		require.Equal(t, "Paid and confirmed", v.Receipt["Status"])
		require.Equal(t, "0.750000000000000001 ETH", v.Receipt["Amount"])
		require.Equal(t, "0.750000000000000001 ETH", v.Receipt["Paid"])
		require.Equal(t, "demo", v.Receipt["Merchant"])
		require.Equal(t, "ETH, the network's own coin", v.Receipt["Asset"])
		require.NotEmpty(t, v.Receipt["Confirmed at"])
		require.False(t, v.CopyAmount, "nothing left to copy and pay")

		// Download the receipt as a payer does: click, and find the file.
		downloads := t.TempDir()
		require.NoError(t, chromedp.Run(tb.ctx, cdpbrowser.SetDownloadBehavior(cdpbrowser.SetDownloadBehaviorBehaviorAllow).WithDownloadPath(downloads)))
		tb.click("#download")
		file := filepath.Join(downloads, fmt.Sprintf("receipt-%d.txt", id))
		var raw []byte
		waitUntil(t, 30*time.Second, 100*time.Millisecond, func() bool {
			b, err := os.ReadFile(file)
			raw = b
			return err == nil && bytes.HasSuffix(b, []byte("\n"))
		}, func() string { return "the receipt was never downloaded to " + file })
		receipt := string(raw)
		require.True(t, strings.HasPrefix(receipt, "Payment receipt\n"), receipt)
		for _, line := range []string{fmt.Sprintf("Invoice: %d", id), "Merchant: demo", "Amount: 0.750000000000000001 ETH",
			"Network: evmpay dev chain, chain id 1337", "Status: Paid and confirmed", "Transactions:", "  " + hash} {
			require.Contains(t, receipt, line+"\n", "the downloaded receipt")
		}
		tb.check("confirmed")
		var print []byte
		require.NoError(t, chromedp.Run(tb.ctx, emulation.SetEmulatedMedia().WithMedia("print"), chromedp.FullScreenshot(&print, 100),
			emulation.SetEmulatedMedia().WithMedia("")))
		require.NoError(t, os.WriteFile(filepath.Join("..", "..", "test-output", "checkout", "receipt-print.png"), print, 0o644))
		tb.requireClean()

		// The sweep follows (SETTLED): the payer's page said all there is
		// to say at CONFIRMED and stopped asking; a page opened now says
		// the same.
		require.False(t, statuses["Payment complete. Thank you!"])
		waitUntil(t, 120*time.Second, 200*time.Millisecond, func() bool {
			_, got := dev.api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
			return got["status"] == "SETTLED"
		}, func() string { return "the invoice never settled" })
		later := br.open(t, inv["checkout_url"].(string), 360, withClock())
		lv := later.until("the settled invoice", 30*time.Second, func(v view) bool { return len(v.Txs) == 1 })
		require.Equal(t, "Payment confirmed. Thank you!", lv.Status, "one final state for the payer")
		later.check("settled")

		// The first page sends the payer back 10 s after the confirmation.
		// (Not setClock: the page it would wait on is about to be left.)
		require.NoError(t, chromedp.Run(tb.ctx, chromedp.Evaluate(fmt.Sprintf(`window.__setClock(%d)`, time.Now().Add(11*time.Second).UnixMilli()), nil)))
		waitUntil(t, 30*time.Second, 100*time.Millisecond, func() bool { return tb.location() == back },
			func() string { return "the page never returned to the shop; at " + tb.location() })
	})

	t.Run("WalletButton_ShownForAWallet_RejectionInPlainWordsThenPaysExactly", func(t *testing.T) {
		dev := dev.in(t)
		inv := dev.create(map[string]any{"amount_wei": "300000000000000000"})
		w := newTestWallet(t, dev)
		tb := br.open(t, inv["checkout_url"].(string), 360, w.install()...)
		w.attach(tb.ctx)
		v := tb.until("pending", 30*time.Second, func(v view) bool { return v.QRLoaded })
		require.True(t, v.WalletButton, "a wallet is present: its button is offered")
		tb.check("pending-wallet")

		w.rejectNext.Store(true)
		tb.click("#pay-browser")
		v = tb.until("the rejection", 30*time.Second, func(v view) bool { return v.WalletMsg != "" && !strings.HasSuffix(v.WalletMsg, "…") })
		require.Equal(t, "You rejected the request in your wallet. Nothing was sent.", v.WalletMsg)

		tb.click("#pay-browser")
		v = tb.until("the transaction sent", 30*time.Second, func(v view) bool { return strings.HasPrefix(v.WalletMsg, "Transaction sent") })
		calls := w.calls()
		require.Equal(t, []string{"eth_requestAccounts", "wallet_switchEthereumChain", "wallet_addEthereumChain", "eth_sendTransaction",
			"eth_requestAccounts", "wallet_switchEthereumChain", "wallet_addEthereumChain", "eth_sendTransaction"}, calls)
		added := w.addedChain()
		require.Equal(t, "0x539", added["chainId"])
		require.Equal(t, []any{dev.proxy}, added["rpcUrls"], "the wallet is offered the public RPC proxy")
		require.Equal(t, "evmpay dev chain", added["chainName"])
		require.Equal(t, map[string]any{"name": "ETH", "symbol": "ETH", "decimals": float64(18)}, added["nativeCurrency"],
			"the chain's coin (NATIVE_SYMBOL; the dev chain's is ETH)")
		sent := w.sent()
		require.Equal(t, common.HexToAddress(inv["deposit_address"].(string)), sent.To)
		require.Equal(t, "300000000000000000", sent.Value.String(), "exactly the amount")
		v = tb.until("the payment confirmed", 120*time.Second, func(v view) bool { return v.Status == "Payment confirmed. Thank you!" })
		require.True(t, v.SameDocument)
		require.Empty(t, v.Return, "no redirect_url, no Return button")
		require.Empty(t, v.Redirect, "and no redirect")
		_, got := dev.api.do("GET", fmt.Sprintf("/v1/invoices/%v", inv["id"]), nil, nil)
		require.Equal(t, "300000000000000000", got["paid_wei"])
		tb.requireClean()
	})

	t.Run("Underpaid_ShowsWhatArrivedAndTheRemainderWithAQRForExactlyIt", func(t *testing.T) {
		dev := dev.in(t)
		inv := dev.create(map[string]any{"amount_wei": "1000000000000000000"})
		tb := br.open(t, inv["checkout_url"].(string), 360)
		tb.until("pending", 30*time.Second, func(v view) bool { return v.QRLoaded })
		hash := dev.pay(inv, "400000000000000000")
		v := tb.until("the remainder", 30*time.Second, func(v view) bool { return v.AmountLabel == "Still due" && v.QRLoaded })
		require.Equal(t, "0.6", v.Amount)
		require.Equal(t, "0.4 of 1 ETH", v.PaidSoFar, "what arrived so far")
		require.Equal(t, "Part of the payment arrived (0.4 of 1 ETH). Pay exactly the remaining 0.6 ETH.", v.Status)
		require.Equal(t, "Paying from an exchange? It may deduct a withdrawal fee: make sure exactly 0.6 ETH arrives.", v.FeeNote)
		want := fmt.Sprintf("ethereum:%s@1337?value=600000000000000000", common.HexToAddress(inv["deposit_address"].(string)).Hex())
		require.Equal(t, want, v.OpenWallet)
		tb.untilQR("the remainder's QR code", want)
		v = tb.until("the partial payment's transaction", 30*time.Second, func(v view) bool { return len(v.Txs) == 1 })
		require.Equal(t, []string{hash}, v.Txs)
		require.Equal(t, "Partly paid", v.Receipt["Status"])
		tb.check("underpaid")
		tb.requireClean()
	})

	t.Run("Overpaid_SaysSo", func(t *testing.T) {
		dev := dev.in(t)
		inv := dev.create(map[string]any{"amount_wei": "100000000000000000"})
		tb := br.open(t, inv["checkout_url"].(string), 360)
		tb.until("pending", 30*time.Second, func(v view) bool { return v.QRLoaded })
		dev.pay(inv, "150000000000000000")
		v := tb.until("overpaid", 30*time.Second, func(v view) bool { return strings.Contains(v.Status+v.Done, "more than") })
		require.Contains(t, v.Status+v.Done, "You paid 0.15 ETH, more than the 0.1 ETH asked.")
		tb.check("overpaid")
	})

	t.Run("MarkupInDescriptionAndOrderID_RenderedAsText", func(t *testing.T) {
		dev := dev.in(t)
		desc := `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">`
		order := `</dd><script>window.__xss=3</script>`
		inv := dev.create(map[string]any{"amount_wei": "1000", "description": desc, "order_id": order})
		tb := br.open(t, inv["checkout_url"].(string), 360)
		v := tb.until("the invoice", 30*time.Second, func(v view) bool { return v.Description != "" })
		require.Equal(t, desc, v.Description)
		require.Equal(t, order, v.Order)
		require.Equal(t, "0.000000000000001", v.Amount)
		require.Equal(t, 1, v.Scripts, "only the page's own script element")
		var xss any
		require.NoError(t, chromedp.Run(tb.ctx, chromedp.Evaluate(`window.__xss`, &xss)))
		require.Nil(t, xss, "no markup ran")
	})

	t.Run("MissingOrWrongToken_LinkIncompleteOrWrong", func(t *testing.T) {
		dev := dev.in(t)
		for _, url := range []string{dev.base + "/checkout", dev.base + "/checkout#AAAAAAAAAAAAAAAAAAAAAA", dev.base + "/checkout#<b>x", dev.base + "/checkout#%E0%A4%A"} {
			tb := br.open(t, url, 360)
			v := tb.until("the invalid-link state", 30*time.Second, func(v view) bool { return shows(v, "invalid") })
			require.Equal(t, "This payment link is incomplete or wrong.", v.Status, url)
			tb.requireClean(http.StatusUnauthorized)
		}
		tb := br.open(t, dev.base+"/checkout#AAAAAAAAAAAAAAAAAAAAAA", 1280)
		tb.until("the invalid-link state", 30*time.Second, func(v view) bool { return shows(v, "invalid") })
		tb.check("invalid")
	})

	t.Run("Languages_NumbersInThePayersLocaleAndASwitcherThatKeepsTheToken", func(t *testing.T) {
		dev := dev.in(t)
		inv := dev.create(map[string]any{"amount_wei": "1234500000000000000000"})
		url := strings.Replace(inv["checkout_url"].(string), "/checkout#", "/checkout?lang=de#", 1)
		tb := br.open(t, url, 360)
		v := tb.until("the German page", 30*time.Second, func(v view) bool { return v.QRLoaded })
		require.Equal(t, "de", v.Lang)
		require.Equal(t, "Zahlungsanforderung", v.Heading)
		require.Equal(t, "Wir warten auf Ihre Zahlung.", v.Status)
		require.Equal(t, "evmpay dev chain, Chain-ID 1337", v.Network)
		require.Equal(t, "1.234,5", v.Amount, "German grouping and decimal comma")
		require.Contains(t, v.FeeNote, "genau 1.234,5 ETH")
		var copied string
		require.NoError(t, chromedp.Run(tb.ctx, chromedp.Evaluate(`document.getElementById("copy-amount").dataset.copy`, &copied)))
		require.Equal(t, "1234.5", copied, "wallets take the plain number")
		tb.check("pending-de")

		// The switcher: French, same invoice (the token stays in the fragment).
		tb.click(`.langs a[hreflang="fr"]`)
		v = tb.until("the French page", 30*time.Second, func(v view) bool { return v.Lang == "fr" && v.QRLoaded })
		require.Equal(t, "Demande de paiement", v.Heading)
		require.Equal(t, "1\u202f234,5", v.Amount, "French grouping (narrow no-break space) and decimal comma")
		require.True(t, strings.HasSuffix(tb.location(), "/checkout?lang=fr#"+inv["lookup_token"].(string)), tb.location())
		tb.check("pending-fr")
		for lang, heading := range map[string]string{"es": "Solicitud de pago", "pt": "Pedido de pagamento"} {
			tb := br.open(t, strings.Replace(inv["checkout_url"].(string), "/checkout#", "/checkout?lang="+lang+"#", 1), 360)
			v := tb.until("the page in "+lang, 30*time.Second, func(v view) bool { return v.QRLoaded })
			require.Equal(t, heading, v.Heading)
			tb.check("pending-" + lang)
		}

		req, err := http.NewRequest("GET", dev.base+"/checkout", nil)
		require.NoError(t, err)
		req.Header.Set("Accept-Language", "de-AT,de;q=0.9,en;q=0.5")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, "de", res.Header.Get("Content-Language"))
	})

	t.Run("Headers_StrictCSPNoReferrerNosniff", func(t *testing.T) {
		dev := dev.in(t)
		for _, p := range []string{"/checkout", "/checkout/assets/checkout.js", "/checkout/assets/checkout.css", "/checkout/assets/icon.svg"} {
			res, err := http.Get(dev.base + p)
			require.NoError(t, err)
			res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode, p)
			require.Equal(t, "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
				res.Header.Get("Content-Security-Policy"), p)
			require.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"), p)
			require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"), p)
		}
	})

	t.Run("LastSecondBeforeExpiry_NoStackOverflow_ThenDoNotSendFirstAndTheWayBack", func(t *testing.T) {
		dev := dev.in(t)
		back := shop.URL + "/orders/A-19"
		inv := dev.create(map[string]any{"amount_wei": "250000000000000000", "redirect_url": back})
		expires, err := time.Parse(time.RFC3339Nano, inv["expires_at"].(string))
		require.NoError(t, err)
		tb := br.open(t, inv["checkout_url"].(string), 360, withClock())
		tb.until("pending", 30*time.Second, func(v view) bool { return v.QRLoaded })
		tb.setClock(expires.Add(-30 * time.Second))
		tb.until("30 s left", 30*time.Second, func(v view) bool { return v.Countdown == "Expires in 0:30" })
		// The last second: the countdown rounds up, and nothing recurses
		// (this froze the page with "Maximum call stack size exceeded").
		tb.setClock(expires.Add(-400 * time.Millisecond))
		v := tb.view()
		tb.requireClean()
		require.Equal(t, "Expires in 0:01", v.Countdown, "rounded up: 0:00 only once the time is up")
		require.Equal(t, []string{"details", "pay"}, v.Shown, "still payable")

		tb.setClock(expires.Add(100 * time.Millisecond))
		v = tb.until("the expired state", 30*time.Second, func(v view) bool { return shows(v, "details", "expired", "return-row") })
		require.Equal(t, "Do not send a payment", v.Heading, "the first thing an expired page says")
		require.Equal(t, "This invoice has expired.", v.Status)
		require.Contains(t, v.Expired, "within 24 hours of the expiry is still accepted")
		require.Equal(t, back, v.Return, "the way back to the merchant, on expiry too")
		require.Empty(t, v.Redirect, "but no automatic redirect: the payer may need to read this")
		tb.requireClean()
		tb.check("expired")

		dk := br.open(t, inv["checkout_url"].(string), 360, withClock(), dark())
		dk.until("pending, dark", 30*time.Second, func(v view) bool { return v.QRLoaded })
		dk.setClock(expires.Add(time.Second))
		dk.until("the expired state, dark", 30*time.Second, func(v view) bool { return shows(v, "details", "expired", "return-row") })
		dk.check("expired-dark")
	})

	t.Run("Expired_OnTheServer_SaysSoWithTheLatePaymentRule", func(t *testing.T) {
		dev := dev.in(t)
		tb := br.open(t, expiring["checkout_url"].(string), 360)
		v := tb.until("the expired state", 120*time.Second, func(v view) bool { return shows(v, "details", "expired") })
		require.Equal(t, "Do not send a payment", v.Heading)
		require.Equal(t, "This invoice has expired.", v.Status)
		require.Contains(t, v.Expired, "within 24 hours of the expiry is still accepted")
		waitUntil(t, 30*time.Second, 200*time.Millisecond, func() bool {
			_, got := dev.api.do("GET", fmt.Sprintf("/v1/invoices/%v", expiring["id"]), nil, nil)
			return got["status"] == "EXPIRED"
		}, func() string { return "the invoice never expired on the server" })
		tb.until("the expired state from the server", 30*time.Second, func(v view) bool { return shows(v, "details", "expired") })
		tb.requireClean()
	})

	t.Run("Branding_TheMerchantsLogoAndAccentColourServedByTheServiceItself", func(t *testing.T) {
		dev := dev.in(t)
		logo := testLogo(t)
		status, b := dev.api.do("PUT", "/v1/merchant/branding", map[string]any{"accent_color": "#7b2cbf",
			"logo": "data:image/png;base64," + base64.StdEncoding.EncodeToString(logo)}, nil)
		require.Equal(t, http.StatusOK, status, "%v", b)
		t.Cleanup(func() { dev.api.do("PUT", "/v1/merchant/branding", map[string]any{}, nil) })
		inv := dev.create(map[string]any{"amount_wei": "420000000000000000", "description": "Branded"})
		tb := br.open(t, inv["checkout_url"].(string), 360)
		var logoShown bool
		waitUntil(t, 30*time.Second, 100*time.Millisecond, func() bool {
			require.NoError(t, chromedp.Run(tb.ctx, chromedp.Evaluate(`(() => { const l = document.getElementById("logo");
				return !l.hidden && l.src.startsWith("blob:") && l.complete && l.naturalWidth === 120; })()`, &logoShown)))
			return logoShown && tb.view().QRLoaded
		}, func() string { return "the merchant's logo never showed" })
		var accent string
		require.NoError(t, chromedp.Run(tb.ctx, chromedp.Evaluate(`getComputedStyle(document.getElementById("open-wallet")).backgroundColor`, &accent)))
		require.Equal(t, "rgb(123, 44, 191)", accent, "the merchant's accent colour")
		tb.check("branded")
		tb.requireClean()
		dk := br.open(t, inv["checkout_url"].(string), 1280, dark())
		dk.until("the branded page, dark", 30*time.Second, func(v view) bool { return v.QRLoaded })
		dk.check("branded-dark")
	})

	t.Run("ServiceLog_HoldsNoLookupToken", func(t *testing.T) {
		dev := dev.in(t)
		log := dev.out.String()
		require.NotEmpty(t, dev.tokens.list())
		for _, tok := range dev.tokens.list() {
			require.NotContains(t, log, tok)
		}
	})
}

// testLogo is a 120×40 PNG: a merchant's logo.
func testLogo(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 120, 40))
	for y := range 40 {
		for x := range 120 {
			c := color.RGBA{R: 123, G: 44, B: 191, A: 255}
			if (x/20+y/20)%2 == 0 {
				c = color.RGBA{R: 255, G: 196, B: 0, A: 255}
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

// testWallet is an EIP-1193 provider injected into the page: a script
// forwarding every request to the test through a Chromium binding, where a
// funded dev key signs and sends the transaction to the dev chain.
type testWallet struct {
	t          *testing.T
	dev        *checkoutDev
	rejectNext atomicBool
	mu         sync.Mutex
	log        []string
	added      map[string]any
	tx         *types.Transaction
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) Store(v bool) { b.mu.Lock(); b.v = v; b.mu.Unlock() }
func (b *atomicBool) Swap(v bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.v
	b.v = v
	return old
}

const walletShim = `(() => {
	const pending = new Map();
	let next = 1;
	window.__walletReply = (id, result, error) => {
		const p = pending.get(id);
		pending.delete(id);
		if (error) p.reject(Object.assign(new Error(error.message), { code: error.code }));
		else p.resolve(result);
	};
	window.ethereum = {
		request({ method, params }) {
			return new Promise((resolve, reject) => {
				const id = next++;
				pending.set(id, { resolve, reject });
				window.goWallet(JSON.stringify({ id, method, params: params || [] }));
			});
		},
	};
})();`

func newTestWallet(t *testing.T, dev *checkoutDev) *testWallet {
	return &testWallet{t: t, dev: dev}
}

func (w *testWallet) install() []chromedp.Action {
	return []chromedp.Action{
		chromedp.ActionFunc(func(ctx context.Context) error { return runtime.AddBinding("goWallet").Do(ctx) }),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(walletShim).Do(ctx)
			return err
		}),
	}
}

// attach answers the page's wallet requests.
func (w *testWallet) attach(ctx context.Context) {
	chromedp.ListenTarget(ctx, func(ev any) {
		e, ok := ev.(*runtime.EventBindingCalled)
		if !ok || e.Name != "goWallet" {
			return
		}
		go func() {
			var req struct {
				ID     int               `json:"id"`
				Method string            `json:"method"`
				Params []json.RawMessage `json:"params"`
			}
			if json.Unmarshal([]byte(e.Payload), &req) != nil {
				return
			}
			result, werr := w.handle(req.Method, req.Params)
			r, _ := json.Marshal(result)
			var errJSON []byte = []byte("null")
			if werr != nil {
				errJSON, _ = json.Marshal(werr)
			}
			_ = chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf("window.__walletReply(%d, %s, %s)", req.ID, r, errJSON), nil))
		}()
	})
}

type walletError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (w *testWallet) handle(method string, params []json.RawMessage) (any, *walletError) {
	w.mu.Lock()
	w.log = append(w.log, method)
	w.mu.Unlock()
	wallet, err := devWallet()
	if err != nil {
		return nil, &walletError{-32603, err.Error()}
	}
	key, err := wallet.PrivateKey(1) // account 1: `payd pay` uses account 0
	if err != nil {
		return nil, &walletError{-32603, err.Error()}
	}
	from := crypto.PubkeyToAddress(key.PublicKey)
	switch method {
	case "eth_requestAccounts":
		return []string{from.Hex()}, nil
	case "wallet_switchEthereumChain":
		return nil, &walletError{4902, "Unrecognized chain ID"}
	case "wallet_addEthereumChain":
		var p map[string]any
		_ = json.Unmarshal(params[0], &p)
		w.mu.Lock()
		w.added = p
		w.mu.Unlock()
		return nil, nil
	case "eth_sendTransaction":
		if w.rejectNext.Swap(false) {
			return nil, &walletError{4001, "User rejected the request."}
		}
		var p struct {
			From  common.Address `json:"from"`
			To    common.Address `json:"to"`
			Value *hexutil.Big   `json:"value"`
			Data  *hexutil.Bytes `json:"data"`
		}
		if err := json.Unmarshal(params[0], &p); err != nil || p.From != from || p.Value == nil {
			return nil, &walletError{-32602, "bad transaction"}
		}
		eth, err := ethclient.DialContext(w.dev.ctx, "http://"+w.dev.chainAddr)
		if err != nil {
			return nil, &walletError{-32603, err.Error()}
		}
		defer eth.Close()
		nonce, err := eth.PendingNonceAt(w.dev.ctx, from)
		if err != nil {
			return nil, &walletError{-32603, err.Error()}
		}
		head, err := eth.HeaderByNumber(w.dev.ctx, nil)
		if err != nil {
			return nil, &walletError{-32603, err.Error()}
		}
		feeCap := new(big.Int).Add(big.NewInt(2e9), new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
		var data []byte
		if p.Data != nil {
			data = *p.Data
		}
		// Like a real wallet, estimate the gas the page did not give.
		gas, err := eth.EstimateGas(w.dev.ctx, ethereum.CallMsg{From: from, To: &p.To, Value: p.Value.ToInt(), Data: data})
		if err != nil {
			return nil, &walletError{-32603, err.Error()}
		}
		tx := types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(1337), Nonce: nonce, GasTipCap: big.NewInt(2e9),
			GasFeeCap: feeCap, Gas: gas + gas/5, To: &p.To, Value: p.Value.ToInt(), Data: data})
		signed, err := types.SignTx(tx, types.LatestSignerForChainID(big.NewInt(1337)), key)
		if err != nil {
			return nil, &walletError{-32603, err.Error()}
		}
		if err := eth.SendTransaction(w.dev.ctx, signed); err != nil {
			return nil, &walletError{-32603, err.Error()}
		}
		w.mu.Lock()
		w.tx = signed
		w.mu.Unlock()
		return signed.Hash().Hex(), nil
	}
	return nil, &walletError{4200, "unsupported method " + method}
}

func (w *testWallet) addedChain() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.added
}

func (w *testWallet) calls() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.log...)
}

// sentTx is the transaction the wallet sent, as the page asked for it.
type sentTx struct {
	To    common.Address
	Value *big.Int
}

func (w *testWallet) sent() sentTx {
	w.mu.Lock()
	defer w.mu.Unlock()
	require.NotNil(w.t, w.tx)
	return sentTx{To: *w.tx.To(), Value: w.tx.Value()}
}
