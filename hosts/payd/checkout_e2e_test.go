package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	_ "image/png"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"
	"github.com/stretchr/testify/require"
)

// checkoutDev is a `payd dev` process (in this test process) and the
// chain it runs, for the checkout page's browser tests.
type checkoutDev struct {
	t         *testing.T
	ctx       context.Context
	base      string // http://127.0.0.1:port
	proxy     string
	chainAddr string
	api       apiClient
	out       *syncBuffer
	tokens    []string // every lookup token handed out
	mu        sync.Mutex
}

func startCheckoutDev(t *testing.T, ctx context.Context) *checkoutDev {
	t.Helper()
	httpAddr, proxyAddr, chainAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	out := &syncBuffer{}
	done := make(chan error, 1)
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		done <- run(runCtx, []string{"dev", "--http", httpAddr, "--rpc-proxy", proxyAddr, "--chain-rpc", chainAddr,
			"--data", t.TempDir(), "--block-time", "500ms", "--metrics", ""}, out)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("payd dev did not stop")
		}
	})
	waitHTTP(t, "http://"+httpAddr+"/readyz", 60*time.Second)
	key := apiKeyRe.FindStringSubmatch(out.String())
	require.NotNil(t, key, "the banner prints the demo api_key:\n%s", out.String())
	require.Contains(t, out.String(), "http://"+httpAddr+"/checkout#<lookup_token>", "the banner shows the checkout URL")
	return &checkoutDev{t: t, ctx: ctx, base: "http://" + httpAddr, proxy: "http://" + proxyAddr, chainAddr: chainAddr,
		api: apiClient{t: t, base: "http://" + httpAddr, key: key[1]}, out: out}
}

// create makes an invoice and returns its create response.
func (d *checkoutDev) create(body map[string]any) map[string]any {
	d.t.Helper()
	status, inv := d.api.do("POST", "/v1/invoices", body, map[string]string{"Idempotency-Key": fmt.Sprint(time.Now().UnixNano())})
	require.Equal(d.t, http.StatusCreated, status, "%v", inv)
	tok := inv["lookup_token"].(string)
	require.Equal(d.t, d.base+"/checkout#"+tok, inv["checkout_url"])
	d.mu.Lock()
	d.tokens = append(d.tokens, tok)
	d.mu.Unlock()
	return inv
}

// pay sends value wei to the invoice's deposit address with `payd pay`
// (dev account 0).
func (d *checkoutDev) pay(inv map[string]any, wei string) {
	d.t.Helper()
	uri := fmt.Sprintf("ethereum:%s@1337?value=%s", inv["deposit_address"], wei)
	var out bytes.Buffer
	require.NoError(d.t, run(d.ctx, []string{"pay", "--rpc", d.chainAddr, uri}, &out))
}

// browser is a headless Chromium.
type browser struct {
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		path, err = exec.LookPath("chromium-browser")
	}
	require.NoError(t, err, "the checkout tests need Chromium: scripts/test.sh installs it (apt-get install chromium)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	require.NoError(t, chromedp.Run(bctx)) // start it
	return &browser{ctx: bctx}
}

// tab is one page in the browser.
type tab struct {
	t   *testing.T
	ctx context.Context
}

// cspProbe records Content-Security-Policy violations before the page's own
// script runs.
const cspProbe = `window.__csp = []; document.addEventListener("securitypolicyviolation",
	e => window.__csp.push(e.violatedDirective + " " + e.blockedURI));`

func (b *browser) open(t *testing.T, url string, width int64, setup ...chromedp.Action) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	actions := append([]chromedp.Action{
		chromedp.EmulateViewport(width, 900),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(cspProbe).Do(ctx)
			return err
		}),
	}, setup...)
	actions = append(actions, chromedp.Navigate(url), chromedp.WaitReady("body"),
		chromedp.Evaluate(`window.__sameDocument = true`, nil))
	require.NoError(t, chromedp.Run(ctx, actions...))
	return &tab{t: t, ctx: ctx}
}

// view is what the page shows, read from its DOM.
type view struct {
	Lang, Status, Merchant, Heading, Description, Order, AmountLabel, Amount, Symbol, Network string
	Address, OpenWallet, Countdown, Conf, Done, Expired, WalletMsg, Return                    string
	Shown                                                                                     []string
	QRLoaded, SameDocument                                                                    bool
	CSP                                                                                       []string
	Scripts                                                                                   int
}

const readView = `(() => {
	const $ = id => document.getElementById(id);
	const text = id => $(id) ? $(id).textContent.trim() : "";
	const q = $("qr");
	return {
		Lang: document.documentElement.lang, Status: text("status"), Merchant: text("merchant"), Heading: text("heading"),
		Description: text("description"), Order: text("order"), AmountLabel: text("amount-label"),
		Amount: text("amount"), Symbol: text("symbol"), Network: text("network"), Address: text("address"),
		OpenWallet: $("open-wallet").getAttribute("href"), Countdown: text("countdown"), Conf: text("conf-text"),
		Done: text("done-detail"), Expired: text("expired-detail"), WalletMsg: text("wallet-msg"),
		Return: $("return").hidden ? "" : $("return").getAttribute("href"),
		Shown: ["details", "progress", "pay", "done", "expired", "invalid"].filter(id => !$(id).hidden),
		QRLoaded: !!(q.getAttribute("src") && q.complete && q.naturalWidth > 0),
		SameDocument: window.__sameDocument === true, CSP: window.__csp || [],
		Scripts: document.scripts.length,
	};
})()`

func (tb *tab) view() view {
	tb.t.Helper()
	var v view
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Evaluate(readView, &v)))
	return v
}

// until polls the page until cond holds and returns the view that held.
func (tb *tab) until(what string, within time.Duration, cond func(v view) bool) view {
	tb.t.Helper()
	var last view
	waitUntil(tb.t, within, 100*time.Millisecond, func() bool {
		last = tb.view()
		return cond(last)
	}, func() string { return fmt.Sprintf("the page never showed %s; last: %+v", what, last) })
	return last
}

// qr screenshots the QR image and decodes it.
func (tb *tab) qr() string {
	tb.t.Helper()
	text, err := tb.tryQR()
	require.NoError(tb.t, err, "the QR code on the page decodes")
	return text
}

// untilQR polls the page until its QR code decodes to want. A screenshot
// and its decoding take seconds on a loaded two-core machine, hence the
// generous budget; the failure says what the last try saw.
func (tb *tab) untilQR(what, want string) {
	tb.t.Helper()
	var text string
	var err error
	waitUntil(tb.t, 45*time.Second, 100*time.Millisecond, func() bool {
		text, err = tb.tryQR()
		return err == nil && text == want
	}, func() string { return fmt.Sprintf("the page never showed %s; last QR: %q, error: %v", what, text, err) })
}

// tryQR is qr for a poll: a QR image being swapped for another may be
// caught half drawn, so an image that does not decode is an error to
// retry, not a failure.
func (tb *tab) tryQR() (string, error) {
	var png []byte
	if err := chromedp.Run(tb.ctx, chromedp.ScreenshotScale("#qr", 2, &png, chromedp.ByID)); err != nil {
		return "", err
	}
	img, _, err := image.Decode(bytes.NewReader(png))
	if err != nil {
		return "", err
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		return "", err
	}
	res, err := qrcode.NewQRCodeReader().Decode(bmp, nil)
	if err != nil {
		return "", err
	}
	return res.GetText(), nil
}

// screenshot writes the whole page at width px to the test output folder.
func (tb *tab) screenshot(name string, width int64) {
	tb.t.Helper()
	dir := filepath.Join("..", "..", "test-output", "checkout")
	require.NoError(tb.t, os.MkdirAll(dir, 0o755))
	var png []byte
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.EmulateViewport(width, 900), chromedp.Sleep(50*time.Millisecond),
		chromedp.FullScreenshot(&png, 100)))
	require.NoError(tb.t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.png", name, width)), png, 0o644))
}

func (tb *tab) click(sel string) {
	tb.t.Helper()
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Click(sel, chromedp.ByQuery)))
}

func shows(v view, sections ...string) bool {
	return strings.Join(v.Shown, ",") == strings.Join(sections, ",")
}

// TestCheckout_InARealBrowser drives the hosted checkout page in headless
// Chromium against `payd dev` (the whole service on its dev chain).
func TestCheckout_InARealBrowser(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := startCheckoutDev(t, ctx)
	br := newBrowser(t)

	// Created first: it expires while the other cases run.
	expiring := dev.create(map[string]any{"amount_wei": "250000000000000000", "expires_in_seconds": 60})

	t.Run("Pending_ShowsAmountAddressNetworkAndAQRDecodingToThePaymentURI", func(t *testing.T) {
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
		require.Regexp(t, `^Expires in 1[45]:[0-5]\d$`, v.Countdown)
		require.Equal(t, inv["payment_uri"], tb.qr())
		require.Empty(t, v.CSP, "no Content-Security-Policy violation")

		// Keyboard: Tab reaches every control in order, Enter presses the
		// wallet button, which says in plain words that there is no wallet.
		var focused []string
		for range 4 {
			var id string
			require.NoError(t, chromedp.Run(tb.ctx, chromedp.KeyEvent(kb.Tab),
				chromedp.Evaluate(`document.activeElement.id`, &id)))
			focused = append(focused, id)
		}
		require.Equal(t, []string{"copy-address", "copy-amount", "open-wallet", "pay-browser"}, focused)
		require.NoError(t, chromedp.Run(tb.ctx, chromedp.KeyEvent(kb.Enter)))
		v = tb.until("the no-wallet message", 30*time.Second, func(v view) bool { return v.WalletMsg != "" })
		require.Equal(t, "No browser wallet found. Install one, or scan the QR code with a wallet app.", v.WalletMsg)
		tb.screenshot("pending", 360)
		tb.screenshot("pending", 1280)
	})

	t.Run("Payment_PendingToSeenToConfirmationsToSettled_WithoutReload", func(t *testing.T) {
		inv := dev.create(map[string]any{"amount_wei": "750000000000000001", "redirect_url": "https://shop.example/orders/A-18?paid=1"})
		tb := br.open(t, inv["checkout_url"].(string), 1280)
		tb.until("pending", 30*time.Second, func(v view) bool { return v.QRLoaded })
		require.Equal(t, "0.750000000000000001", tb.view().Amount)
		paidAt := time.Now()
		dev.pay(inv, "750000000000000001")
		confs := map[string]bool{}
		seen := tb.until("the payment seen", 30*time.Second, func(v view) bool {
			return shows(v, "details", "progress") || shows(v, "details", "done")
		})
		t.Logf("payment seen on the page %s after the transaction was mined", time.Since(paidAt).Round(100*time.Millisecond))
		require.True(t, shows(seen, "details", "progress"), "the page showed the payment before its confirmations: %+v", seen)
		require.Regexp(t, `^Payment seen\. Waiting for confirmations: (\d|1[01]) of 12\.$`, seen.Status, "fewer than 12")
		tb.screenshot("seen", 360)
		v := tb.until("SETTLED", 120*time.Second, func(v view) bool {
			if shows(v, "details", "progress") {
				confs[v.Conf] = true
			}
			return v.Status == "Payment complete. Thank you!"
		})
		// The page polls every second and blocks come every 500 ms, so it
		// sees every second or third count (fewer on a loaded machine).
		require.GreaterOrEqual(t, len(confs), 2, "confirmations counted live: %v", confs)
		require.True(t, v.SameDocument, "no reload")
		require.Equal(t, []string{"details", "done"}, v.Shown)
		require.Equal(t, "https://shop.example/orders/A-18?paid=1", v.Return, "Return to merchant")
		require.Equal(t, "The merchant has received your payment of 0.750000000000000001 ETH.", v.Done)
		require.Empty(t, v.CSP)
		tb.screenshot("settled", 360)
		tb.screenshot("settled", 1280)
	})

	t.Run("WalletButton_RejectionInPlainWordsThenPaysExactlyAndSettles", func(t *testing.T) {
		inv := dev.create(map[string]any{"amount_wei": "300000000000000000"})
		w := newTestWallet(t, dev)
		tb := br.open(t, inv["checkout_url"].(string), 360, w.install()...)
		w.attach(tb.ctx)
		tb.until("pending", 30*time.Second, func(v view) bool { return v.QRLoaded })

		w.rejectNext.Store(true)
		tb.click("#pay-browser")
		v := tb.until("the rejection", 30*time.Second, func(v view) bool { return v.WalletMsg != "" && !strings.HasSuffix(v.WalletMsg, "…") })
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
		sent := w.sent()
		require.Equal(t, common.HexToAddress(inv["deposit_address"].(string)), sent.To)
		require.Equal(t, "300000000000000000", sent.Value.String(), "exactly the amount")
		v = tb.until("SETTLED", 120*time.Second, func(v view) bool { return v.Status == "Payment complete. Thank you!" })
		require.True(t, v.SameDocument)
		require.Empty(t, v.Return, "no redirect_url, no Return button")
		_, got := dev.api.do("GET", fmt.Sprintf("/v1/invoices/%v", inv["id"]), nil, nil)
		require.Equal(t, "300000000000000000", got["paid_wei"])
	})

	t.Run("Underpaid_ShowsTheRemainderWithAQRForExactlyIt", func(t *testing.T) {
		inv := dev.create(map[string]any{"amount_wei": "1000000000000000000"})
		tb := br.open(t, inv["checkout_url"].(string), 360)
		tb.until("pending", 30*time.Second, func(v view) bool { return v.QRLoaded })
		dev.pay(inv, "400000000000000000")
		v := tb.until("the remainder", 30*time.Second, func(v view) bool { return v.AmountLabel == "Still due" && v.QRLoaded })
		require.Equal(t, "0.6", v.Amount)
		require.Equal(t, "Part of the payment arrived (0.4 of 1 ETH). Pay exactly the remaining 0.6 ETH.", v.Status)
		want := fmt.Sprintf("ethereum:%s@1337?value=600000000000000000", common.HexToAddress(inv["deposit_address"].(string)).Hex())
		require.Equal(t, want, v.OpenWallet)
		tb.untilQR("the remainder's QR code", want)
		tb.screenshot("underpaid", 360)
		tb.screenshot("underpaid", 1280)
	})

	t.Run("Overpaid_SaysSo", func(t *testing.T) {
		inv := dev.create(map[string]any{"amount_wei": "100000000000000000"})
		tb := br.open(t, inv["checkout_url"].(string), 360)
		tb.until("pending", 30*time.Second, func(v view) bool { return v.QRLoaded })
		dev.pay(inv, "150000000000000000")
		v := tb.until("overpaid", 30*time.Second, func(v view) bool { return strings.Contains(v.Status+v.Done, "more than") })
		require.Contains(t, v.Status+v.Done, "You paid 0.15 ETH, more than the 0.1 ETH asked.")
	})

	t.Run("MarkupInDescriptionAndOrderID_RenderedAsText", func(t *testing.T) {
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
		for _, url := range []string{dev.base + "/checkout", dev.base + "/checkout#AAAAAAAAAAAAAAAAAAAAAA", dev.base + "/checkout#<b>x", dev.base + "/checkout#%E0%A4%A"} {
			tb := br.open(t, url, 360)
			v := tb.until("the invalid-link state", 30*time.Second, func(v view) bool { return shows(v, "invalid") })
			require.Equal(t, "This payment link is incomplete or wrong.", v.Status, url)
		}
		tb := br.open(t, dev.base+"/checkout#AAAAAAAAAAAAAAAAAAAAAA", 1280)
		tb.until("the invalid-link state", 30*time.Second, func(v view) bool { return shows(v, "invalid") })
		tb.screenshot("invalid", 1280)
	})

	t.Run("SecondLanguage_ByQueryAndAcceptLanguage", func(t *testing.T) {
		inv := dev.create(map[string]any{"amount_wei": "1500000000000000000"})
		url := strings.Replace(inv["checkout_url"].(string), "/checkout#", "/checkout?lang=de#", 1)
		tb := br.open(t, url, 360)
		v := tb.until("the German page", 30*time.Second, func(v view) bool { return v.QRLoaded })
		require.Equal(t, "de", v.Lang)
		require.Equal(t, "Zahlungsanforderung", v.Heading)
		require.Equal(t, "Wir warten auf Ihre Zahlung.", v.Status)
		require.Equal(t, "evmpay dev chain, Chain-ID 1337", v.Network)
		require.Equal(t, "1.5", v.Amount)
		tb.screenshot("pending-de", 360)

		req, err := http.NewRequest("GET", dev.base+"/checkout", nil)
		require.NoError(t, err)
		req.Header.Set("Accept-Language", "de-AT,de;q=0.9,en;q=0.5")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, "de", res.Header.Get("Content-Language"))
	})

	t.Run("Headers_StrictCSPNoReferrerNosniff", func(t *testing.T) {
		for _, p := range []string{"/checkout", "/checkout/assets/checkout.js", "/checkout/assets/checkout.css"} {
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

	t.Run("Expired_SaysSoWithTheLatePaymentRule", func(t *testing.T) {
		tb := br.open(t, expiring["checkout_url"].(string), 360)
		v := tb.until("the expired state", 120*time.Second, func(v view) bool { return shows(v, "details", "expired") })
		require.Equal(t, "This invoice has expired.", v.Status)
		require.Contains(t, v.Expired, "Do not send a payment now.")
		require.Contains(t, v.Expired, "within 24 hours of the expiry is still accepted")
		require.Eventually(t, func() bool {
			_, got := dev.api.do("GET", fmt.Sprintf("/v1/invoices/%v", expiring["id"]), nil, nil)
			return got["status"] == "EXPIRED"
		}, 30*time.Second, 200*time.Millisecond)
		v = tb.until("the expired state from the server", 30*time.Second, func(v view) bool { return shows(v, "details", "expired") })
		tb.screenshot("expired", 360)
		tb.screenshot("expired", 1280)
	})

	t.Run("ServiceLog_HoldsNoLookupToken", func(t *testing.T) {
		log := dev.out.String()
		require.NotEmpty(t, dev.tokens)
		for _, tok := range dev.tokens {
			require.NotContains(t, log, tok)
		}
	})
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
