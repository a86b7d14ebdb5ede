package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/qrscan"
)

// The checkout page's browser tests: headless Chromium through chromedp,
// against `payd dev`. This file holds the tools; checkout_e2e_test.go and
// checkout_token_e2e_test.go the cases.

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

// tab is one page in the browser, with what it reported: failed loads,
// console errors and uncaught exceptions. Its helpers fail its t: a
// subtest uses tb.in(t).
type tab struct {
	t *testing.T
	*tabState
}

// tabState is the page itself, shared by its tabs' views.
type tabState struct {
	ctx context.Context

	mu       sync.Mutex
	failed   []string // "status url" of every answer >= 400
	problems []string // console errors and uncaught exceptions
}

// in is the same page for a subtest: its helpers fail t, so that a
// failure stops the subtest that saw it, never the test that opened the
// page ("subtest may have called FailNow on a parent test").
func (tb *tab) in(t *testing.T) *tab { return &tab{t: t, tabState: tb.tabState} }

// probes run in the page before its own script: CSP violations and
// uncaught errors are recorded where the test can read them, and so is
// every confirmation count the page showed (window.__confs), whatever the
// test was doing at the time.
const probes = `window.__csp = []; window.__errors = []; window.__confs = [];
document.addEventListener("securitypolicyviolation", e => window.__csp.push(e.violatedDirective + " " + e.blockedURI));
window.addEventListener("error", e => window.__errors.push(String(e.message)));
window.addEventListener("unhandledrejection", e => window.__errors.push("unhandled rejection: " + e.reason));
document.addEventListener("DOMContentLoaded", () => {
	const el = document.getElementById("conf-text"), bar = document.getElementById("progress");
	if (el && bar) new MutationObserver(() => {
		if (!bar.hidden && !window.__confs.includes(el.textContent)) window.__confs.push(el.textContent);
	}).observe(el, { childList: true, characterData: true, subtree: true });
});`

// confirmationsShown is every confirmation count the page showed while
// waiting for confirmations, in order.
func (tb *tab) confirmationsShown() []string {
	tb.t.Helper()
	var confs []string
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Evaluate(`window.__confs`, &confs)))
	return confs
}

// testClock replaces the page's clock with one the test sets
// (window.__setClock(ms); Date.now() then returns ms until set again) and
// hides the server's Date header from the page, whose countdown would
// otherwise follow the server: the page's time is the test's alone. It
// counts the runs of the page's interval timers (window.__ticks), so that
// a test can wait for the page's countdown to have run at a given time.
const testClock = `(() => {
	const realNow = Date.now.bind(Date);
	let fake = realNow();
	window.__setClock = ms => { fake = ms; };
	Date.now = () => fake;
	window.__ticks = 0;
	const realSetInterval = window.setInterval.bind(window);
	window.setInterval = (fn, ms, ...args) => realSetInterval(() => { window.__ticks++; fn(...args); }, ms);
	const realFetch = window.fetch.bind(window);
	window.fetch = async (...args) => {
		const res = await realFetch(...args);
		const h = new Headers(res.headers);
		h.delete("Date");
		return new Response(res.body, { status: res.status, statusText: res.statusText, headers: h });
	};
})();`

// withClock installs testClock before the page loads.
func withClock() chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(testClock).Do(ctx)
		return err
	})
}

// dark makes the page see prefers-color-scheme: dark.
func dark() chromedp.Action {
	return emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}})
}

func (b *browser) open(t *testing.T, url string, width int64, setup ...chromedp.Action) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	tb := &tab{t: t, tabState: &tabState{ctx: ctx}}
	chromedp.ListenTarget(ctx, func(ev any) {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				tb.failed = append(tb.failed, fmt.Sprintf("%d %s", e.Response.Status, e.Response.URL))
			}
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.LevelError {
				tb.problems = append(tb.problems, "console: "+e.Entry.Text+" "+e.Entry.URL)
			}
		case *runtime.EventExceptionThrown:
			tb.problems = append(tb.problems, "exception: "+e.ExceptionDetails.Error())
		}
	})
	actions := append([]chromedp.Action{
		chromedp.EmulateViewport(width, 900),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(probes).Do(ctx)
			return err
		}),
	}, setup...)
	actions = append(actions, chromedp.Navigate(url), chromedp.WaitReady("body"),
		chromedp.Evaluate(`window.__sameDocument = true`, nil))
	require.NoError(t, chromedp.Run(ctx, actions...))
	return tb
}

// requireClean checks that nothing failed to load (a missing favicon
// would), nothing was logged as an error and nothing was thrown, except
// answers whose status is in allowed.
func (tb *tab) requireClean(allowed ...int) {
	tb.t.Helper()
	var errs []string
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Evaluate(`window.__errors || []`, &errs)))
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var failed []string
	for _, f := range tb.failed {
		code, _, _ := strings.Cut(f, " ")
		n, _ := strconv.Atoi(code)
		if !containsInt(allowed, n) {
			failed = append(failed, f)
		}
	}
	var problems []string
	for _, p := range tb.problems {
		if len(allowed) == 0 || !strings.Contains(p, "Failed to load resource") {
			problems = append(problems, p)
		}
	}
	require.Empty(tb.t, failed, "every resource the page asked for was there")
	require.Empty(tb.t, problems, "no console error, no exception")
	require.Empty(tb.t, errs, "no uncaught error in the page")
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// setClock sets the page's clock (withClock) and waits until the page's
// once-a-second countdown has run twice at that time: whatever it does at
// that instant, it has done (an uncaught error included).
func (tb *tab) setClock(at time.Time) {
	tb.t.Helper()
	var start, n int
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Evaluate(fmt.Sprintf(`window.__setClock(%d), window.__ticks`, at.UnixMilli()), &start)))
	waitUntil(tb.t, 30*time.Second, 50*time.Millisecond, func() bool {
		require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Evaluate(`window.__ticks`, &n)))
		return n >= start+2
	}, func() string { return fmt.Sprintf("the page's timer ran %d times, not 2", n-start) })
}

// view is what the page shows, read from its DOM.
type view struct {
	Lang, Status, Merchant, Heading, Description, Order, AmountLabel, Amount, Symbol, Network string
	Address, OpenWallet, Countdown, Conf, Done, Expired, WalletMsg, Return, Guard, FeeNote    string
	PaidSoFar, Redirect, Title                                                                string
	Shown                                                                                     []string
	Receipt                                                                                   map[string]string
	Txs                                                                                       []string
	QRLoaded, SameDocument, WalletButton, CopyAmount                                          bool
	CSP                                                                                       []string
	Scripts                                                                                   int
}

const readView = `(() => {
	const $ = id => document.getElementById(id);
	const text = id => $(id) ? $(id).textContent.trim() : "";
	const q = $("qr");
	const receipt = {};
	document.querySelectorAll("#receipt-facts > div").forEach(d => {
		receipt[d.querySelector("dt").textContent] = d.querySelector("dd").textContent.trim();
	});
	return {
		Lang: document.documentElement.lang, Status: text("status"), Merchant: text("merchant"), Heading: text("heading"),
		Description: text("description"), Order: text("order"), AmountLabel: text("amount-label"),
		Amount: text("amount"), Symbol: text("symbol"), Network: text("network"), Address: text("address"),
		OpenWallet: $("open-wallet").getAttribute("href"), Countdown: text("countdown"), Conf: text("conf-text"),
		Done: text("done-detail"), Expired: text("expired-detail"), WalletMsg: text("wallet-msg"),
		Return: $("return-row").hidden ? "" : $("return").getAttribute("href"),
		Guard: text("guard"), FeeNote: text("fee-note"), PaidSoFar: $("row-paid").hidden ? "" : text("paid-so-far"),
		Redirect: $("redirect-note").hidden ? "" : text("redirect-text"), Title: document.title,
		Shown: ["details", "pay", "progress", "done", "expired", "return-row", "receipt", "invalid"].filter(id => !$(id).hidden),
		Receipt: receipt,
		Txs: [...document.querySelectorAll("#receipt-facts .txs code")].map(c => c.textContent),
		QRLoaded: !!(q.getAttribute("src") && q.complete && q.naturalWidth > 0),
		SameDocument: window.__sameDocument === true, CSP: window.__csp || [],
		WalletButton: !$("pay-browser").hidden, CopyAmount: !$("copy-amount").hidden,
		Scripts: document.scripts.length,
	};
})()`

func (tb *tab) view() view {
	tb.t.Helper()
	var v view
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Evaluate(readView, &v)))
	return v
}

// until polls the page until cond holds and returns the view that held. A
// page being loaded (after a link) cannot be read; that is retried too.
func (tb *tab) until(what string, within time.Duration, cond func(v view) bool) view {
	tb.t.Helper()
	var last view
	var err error
	waitUntil(tb.t, within, 100*time.Millisecond, func() bool {
		var v view
		if err = chromedp.Run(tb.ctx, chromedp.Evaluate(readView, &v)); err != nil {
			return false
		}
		last = v
		return cond(last)
	}, func() string {
		return fmt.Sprintf("the page never showed %s; last: %+v (read error: %v)", what, last, err)
	})
	return last
}

// eval runs an expression that may return a promise, and waits for it.
func (tb *tab) eval(expr string, out any) {
	tb.t.Helper()
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Evaluate(expr, out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	})))
}

// servedQR is the QR code the page shows, read from the image it was
// served, never from a screenshot: the image element's own picture (the
// API's SVG behind its blob: URL) is drawn on a canvas at its natural size,
// 8 pixels per module, and its module grid is read and decoded (qrscan:
// deterministic, unlike a scanner's finder-pattern search). It also
// returns the quiet zone around the symbol, in modules.
func (tb *tab) servedQR() (string, int, error) {
	var dataURL string
	tb.eval(`(async () => {
		const q = document.getElementById("qr");
		if (!q.getAttribute("src")) return "";
		await q.decode();
		const n = q.naturalWidth, c = document.createElement("canvas");
		c.width = c.height = n;
		const g = c.getContext("2d");
		g.imageSmoothingEnabled = false;
		g.fillStyle = "#fff";
		g.fillRect(0, 0, n, n);
		g.drawImage(q, 0, 0, n, n);
		return c.toDataURL("image/png");
	})()`, &dataURL)
	b64, ok := strings.CutPrefix(dataURL, "data:image/png;base64,")
	if !ok {
		return "", 0, fmt.Errorf("no QR image yet")
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", 0, err
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		return "", 0, err
	}
	sym, err := qrscan.Read(img)
	if err != nil {
		return "", 0, fmt.Errorf("%w (image %dx%d)", err, img.Bounds().Dx(), img.Bounds().Dy())
	}
	return sym.Text, sym.Quiet, nil
}

// qr is servedQR for a page known to show its QR code, with the quiet
// zone the QR standard requires.
func (tb *tab) qr() string {
	tb.t.Helper()
	text, quiet, err := tb.servedQR()
	require.NoError(tb.t, err, "the QR code on the page decodes")
	require.GreaterOrEqual(tb.t, quiet, qrscan.QuietZone, "the QR code's quiet zone, in modules")
	return text
}

// untilQR polls until the page's QR code is the one for want (the page
// swaps the image when what is due changes).
func (tb *tab) untilQR(what, want string) {
	tb.t.Helper()
	var text string
	var quiet int
	var err error
	waitUntil(tb.t, 30*time.Second, 100*time.Millisecond, func() bool {
		text, quiet, err = tb.servedQR()
		return err == nil && text == want
	}, func() string { return fmt.Sprintf("the page never showed %s; last QR: %q, error: %v", what, text, err) })
	require.GreaterOrEqual(tb.t, quiet, qrscan.QuietZone, "the QR code's quiet zone, in modules")
}

// screenshot writes the whole page at width px to test-output/checkout/.
func (tb *tab) screenshot(name string, width int64) {
	tb.t.Helper()
	dir := filepath.Join("..", "..", "test-output", "checkout")
	require.NoError(tb.t, os.MkdirAll(dir, 0o755))
	var png []byte
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.EmulateViewport(width, 900), chromedp.Sleep(50*time.Millisecond),
		chromedp.FullScreenshot(&png, 100)))
	require.NoError(tb.t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.png", name, width)), png, 0o644))
}

// check is every state's common check: axe-core finds no accessibility
// violation and the page shows no CSP violation, at 360 px and at 1280 px,
// with a screenshot of each.
func (tb *tab) check(name string) {
	tb.t.Helper()
	for _, w := range []int64{360, 1280} {
		tb.screenshot(name, w)
		tb.axe(fmt.Sprintf("%s at %d px", name, w))
	}
	var csp []string
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Evaluate(`window.__csp`, &csp)))
	require.Empty(tb.t, csp, "no Content-Security-Policy violation")
}

var (
	axeOnce sync.Once
	axeJS   string
	axeErr  error
)

// axeSource is axe-core's script, installed by scripts/npm-tools.sh.
func axeSource(t *testing.T) string {
	t.Helper()
	axeOnce.Do(func() {
		var out []byte
		out, axeErr = exec.Command(filepath.Join("..", "..", "scripts", "npm-tools.sh")).Output()
		if axeErr == nil {
			var b []byte
			b, axeErr = os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "axe-core", "axe.min.js"))
			axeJS = string(b)
		}
	})
	require.NoError(t, axeErr, "axe-core from scripts/npm-tools.sh")
	return axeJS
}

// axe runs axe-core (WCAG 2.x A and AA rules and best practices) on the
// page as it is and requires no violation. The script is evaluated through
// the DevTools protocol, which the page's CSP does not govern.
func (tb *tab) axe(what string) {
	tb.t.Helper()
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Evaluate(axeSource(tb.t), nil)))
	var violations []string
	tb.eval(`axe.run(document, { resultTypes: ["violations"] }).then(r => r.violations.map(v =>
		v.id + " (" + v.impact + "): " + v.help + " at " + v.nodes.map(n => n.target.join(" ") + " " + n.failureSummary).join("; ")))`, &violations)
	require.Empty(tb.t, violations, "axe-core on %s", what)
}

// box is an element's position on the page.
type box struct{ X, Y, W, H float64 }

func (tb *tab) box(id string) box {
	tb.t.Helper()
	var b box
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Evaluate(fmt.Sprintf(`(() => {
		const r = document.getElementById(%q).getBoundingClientRect();
		return { X: r.left + scrollX, Y: r.top + scrollY, W: r.width, H: r.height }; })()`, id), &b)))
	return b
}

func (tb *tab) click(sel string) {
	tb.t.Helper()
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Click(sel, chromedp.ByQuery)))
}

// location is the tab's current URL.
func (tb *tab) location() string {
	var u string
	_ = chromedp.Run(tb.ctx, chromedp.Location(&u))
	return u
}

func shows(v view, sections ...string) bool {
	return strings.Join(v.Shown, ",") == strings.Join(sections, ",")
}
