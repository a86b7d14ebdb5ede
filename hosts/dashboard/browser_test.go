package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	cdpwebauthn "github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
)

// The dashboard in a real headless Chromium (chromedp, as the checkout
// page's tests in hosts/payd): every page with axe-core and screenshots
// in light and dark, no CSP violation, no console error; passkeys through
// Chromium's virtual authenticator (the DevTools WebAuthn domain).

type tab struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	failed   []string
	problems []string
}

const probes = `window.__csp = []; window.__errors = [];
document.addEventListener("securitypolicyviolation", e => window.__csp.push(e.violatedDirective + " " + e.blockedURI));
window.addEventListener("error", e => window.__errors.push(String(e.message)));
window.addEventListener("unhandledrejection", e => window.__errors.push("unhandled rejection: " + e.reason));`

func newTab(t *testing.T) *tab {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		path, err = exec.LookPath("chromium-browser")
	}
	require.NoError(t, err, "the dashboard's browser tests need Chromium: scripts/test.sh installs it (apt-get install chromium)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	tb := &tab{t: t, ctx: ctx}
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
	require.NoError(t, chromedp.Run(ctx, chromedp.EmulateViewport(1280, 900), chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := cdppage.AddScriptToEvaluateOnNewDocument(probes).Do(ctx)
		return err
	})))
	return tb
}

func (tb *tab) run(actions ...chromedp.Action) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	require.NoError(tb.t, chromedp.Run(ctx, actions...))
}

func (tb *tab) open(url string) {
	tb.t.Helper()
	tb.run(chromedp.Navigate(url), chromedp.WaitReady("body"))
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	var s string
	tb.run(chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

func (tb *tab) location() string {
	var u string
	tb.run(chromedp.Location(&u))
	return u
}

// waitPath waits until the tab is at a URL whose path ends with suffix.
func (tb *tab) waitPath(suffix string) {
	tb.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		u := tb.location()
		if i := strings.IndexAny(u, "?#"); i >= 0 {
			u = u[:i]
		}
		if strings.HasSuffix(u, suffix) {
			tb.run(chromedp.WaitReady("body"))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.t.Fatalf("the tab never reached …%s; it is at %s", suffix, tb.location())
}

// waitURL waits until the tab's URL contains part (a page the test's
// action leads to, not the one it was on).
func (tb *tab) waitURL(part string) {
	tb.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(tb.location(), part) {
		if time.Now().After(deadline) {
			tb.t.Fatalf("the tab never reached a URL with %q; it is at %s", part, tb.location())
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.run(chromedp.WaitReady("body"))
}

func (tb *tab) requireClean() {
	tb.t.Helper()
	var errs, csp []string
	tb.run(chromedp.Evaluate(`window.__errors || []`, &errs), chromedp.Evaluate(`window.__csp || []`, &csp))
	tb.mu.Lock()
	defer tb.mu.Unlock()
	require.Empty(tb.t, tb.failed, "every resource loaded")
	require.Empty(tb.t, tb.problems, "no console error or exception")
	require.Empty(tb.t, errs, "no uncaught error")
	require.Empty(tb.t, csp, "no Content-Security-Policy violation")
}

var (
	axeOnce sync.Once
	axeJS   string
	axeErr  error
)

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

// check runs axe-core (WCAG A and AA and best practices) in light and dark
// at 360 and 1280 px, requiring no violation, and writes the screenshots
// to test-output/dashboard/.
func (tb *tab) check(name string) {
	tb.t.Helper()
	dir := filepath.Join("..", "..", "test-output", "dashboard")
	require.NoError(tb.t, os.MkdirAll(dir, 0o755))
	for _, scheme := range []string{"light", "dark"} {
		tb.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}))
		for _, w := range []int64{360, 1280} {
			var png []byte
			var loaded bool
			tb.run(chromedp.EmulateViewport(w, 900), chromedp.Evaluate(`typeof axe !== "undefined"`, &loaded))
			if !loaded {
				tb.run(chromedp.Evaluate(axeSource(tb.t), nil))
			}
			var violations []string
			tb.run(chromedp.Evaluate(`axe.run(document, { resultTypes: ["violations"] }).then(r => r.violations.map(v =>
				v.id + " (" + v.impact + "): " + v.help + " at " + v.nodes.map(n => n.target.join(" ") + " " + n.failureSummary).join("; ")))`,
				&violations, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
			require.Empty(tb.t, violations, "axe-core on %s, %s, %d px", name, scheme, w)
			tb.run(chromedp.FullScreenshot(&png, 100))
			require.NoError(tb.t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%s-%d.png", name, scheme, w)), png, 0o644))
		}
	}
	tb.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}),
		chromedp.EmulateViewport(1280, 900))
	tb.requireClean()
}

// expectFailed takes the answers ≥ 400 the test caused on purpose (a
// refusal it checks) off the tab's list.
func (tb *tab) expectFailed(prefix string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	n := len(tb.failed)
	tb.failed = slices.DeleteFunc(tb.failed, func(f string) bool { return strings.HasPrefix(f, prefix) })
	require.Less(tb.t, len(tb.failed), n, "the refusal the test expected")
	code := strings.TrimSpace(prefix)
	tb.problems = slices.DeleteFunc(tb.problems, func(p string) bool {
		return strings.Contains(p, "Failed to load resource") && strings.Contains(p, "status of "+code)
	})
}

func (tb *tab) submit(form string) {
	tb.t.Helper()
	tb.run(chromedp.Submit(form, chromedp.ByQuery))
}

func TestBrowser_EveryPage_PasswordAndPasskeySignIn_Axe(t *testing.T) {
	e := newEnv(t, newSQLite(t))
	base := strings.Replace(e.srv.URL, "127.0.0.1", "localhost", 1) + "/dashboard"
	// Something on every page: invoices, a payout awaiting approval, a link.
	owner, err := e.api.Owner(ctx, e.merchant.ID)
	require.NoError(t, err)
	for i := range 3 {
		_, err := e.api.CreateInvoice(ctx, owner, fmt.Sprint("k", i), invoice.InvoiceParams{AmountFormatted: fmt.Sprint(i + 1),
			OrderID: fmt.Sprint("order-", i), Description: "Coffee"})
		require.NoError(t, err)
	}
	// Two of them paid (as settlement would write it): the overview's
	// volumes and chart have something to show.
	for _, id := range []int64{1, 2} {
		inv, err := e.st.GetInvoice(ctx, id)
		require.NoError(t, err)
		inv.PaidWei, inv.Status = inv.AmountWei, store.StatusPaid
		require.NoError(t, e.st.UpdateInvoice(ctx, &inv))
	}
	th := store.NewAmount(1)
	require.NoError(t, e.st.PutPayoutPolicy(ctx, store.PayoutPolicy{MerchantID: e.merchant.ID,
		Assets: []store.AssetPolicy{{ApprovalThreshold: &th}}, UpdatedAt: e.clock.Now()}))
	_, err = e.api.CreatePayout(ctx, owner, "p1", invoice.PayoutParams{AmountFormatted: "0.1",
		Destination: e.merchant.SettlementAddress})
	require.NoError(t, err)

	tb := newTab(t)
	tb.open(base + "/sign-in")
	tb.check("sign-in")
	tb.run(chromedp.SendKeys("#email", "owner@example.com", chromedp.ByQuery),
		chromedp.SendKeys("#password", testPassword, chromedp.ByQuery))
	tb.submit("#signin-form")
	tb.waitPath("/dashboard/")
	require.Contains(t, tb.text("#attention"), "waiting for approval")
	require.Contains(t, tb.text("#volumes"), "3", "1 + 2 ETH paid today")
	var bars int
	tb.run(chromedp.Evaluate(`document.querySelectorAll(".chart svg rect[height]:not([height='0'])").length`, &bars))
	require.Equal(t, 1, bars, "one day with payments, one bar")
	tb.check("overview")

	for _, p := range []struct{ path, name, want string }{
		{"/invoices", "invoices", "order-2"},
		{"/invoices/new", "invoice-new", "Expires after"},
		{"/invoices/1", "invoice", "Timeline"},
		{"/refunds", "refunds", "None."},
		{"/payouts", "payouts", "Waiting for approval"},
		{"/links", "links", "New payment link"},
		{"/ledger", "ledger", "Download CSV"},
		{"/webhooks", "webhooks", "Webhook URL"},
		{"/settings", "settings", "Settlement address"},
		{"/users", "users", "owner@example.com"},
		{"/audit", "audit", "sign_in.password"},
		{"/api-keys", "api-keys", "New API key"},
		{"/branding", "branding", "Preview of the checkout page"},
		{"/account", "account", "Passkeys"},
		{"/invoices?lang=de", "invoices-de", "Rechnungen"},
	} {
		tb.open(base + p.path)
		require.Contains(t, tb.text("main"), p.want, p.path)
		tb.check(p.name)
	}
	tb.open(base + "/invoices?lang=en")

	// A payment link, and its public page.
	tb.open(base + "/links")
	tb.run(chromedp.SendKeys("#nl-name", "Espresso", chromedp.ByQuery), chromedp.SendKeys("#nl-amount", "0.002", chromedp.ByQuery))
	tb.submit("#link-create-form")
	tb.waitURL("msg=link_created")
	var linkURL string
	tb.run(chromedp.Value(`#links-table input[readonly]`, &linkURL, chromedp.ByQuery))
	require.Contains(t, linkURL, "/dashboard/pay/")

	// A passkey, made with Chromium's virtual authenticator.
	var authID cdpwebauthn.AuthenticatorID
	tb.run(cdpwebauthn.Enable(), chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		authID, err = cdpwebauthn.AddVirtualAuthenticator(&cdpwebauthn.VirtualAuthenticatorOptions{
			Protocol: cdpwebauthn.AuthenticatorProtocolCtap2, Transport: cdpwebauthn.AuthenticatorTransportInternal,
			HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true}).Do(ctx)
		return err
	}))
	require.NotEmpty(t, authID)
	tb.open(base + "/account")
	tb.run(chromedp.SetValue("#pk-name", "Test laptop", chromedp.ByQuery), chromedp.Click("#passkey-add", chromedp.ByQuery))
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(tb.location(), "msg=saved") && time.Now().Before(deadline) {
		var perr string
		tb.run(chromedp.Evaluate(`(document.getElementById("passkey-error") || {}).textContent || ""`, &perr))
		require.Empty(t, perr, "the passkey was made")
		time.Sleep(50 * time.Millisecond)
	}
	tb.run(chromedp.WaitReady("body"))
	require.Contains(t, tb.text("#passkeys"), "Test laptop")
	ps, err := e.st.ListPasskeys(ctx, e.owner.ID)
	require.NoError(t, err)
	require.Len(t, ps, 1)

	// The fresh second factor the passkey gave expires; the settlement
	// address is refused, then the passkey refreshes it.
	e.clock.Advance(6 * time.Minute)
	tb.open(base + "/settings")
	require.Contains(t, tb.text("#needs-2fa"), "second factor")
	tb.run(chromedp.SendKeys("#new-settlement", "0x00000000000000000000000000000000000000dd", chromedp.ByQuery))
	tb.submit("#settlement-form")
	tb.waitPath("/settlement-address")
	require.Contains(t, tb.text("#error"), "fresh second factor")
	tb.expectFailed("403 ")
	tb.open(base + "/settings")
	tb.run(chromedp.Click("#passkey-reauth", chromedp.ByQuery))
	tb.run(chromedp.WaitNotPresent("#needs-2fa", chromedp.ByQuery))
	tb.run(chromedp.SendKeys("#new-settlement", "0x00000000000000000000000000000000000000dd", chromedp.ByQuery))
	tb.submit("#settlement-form")
	tb.waitURL("msg=settlement_changed")
	require.Contains(t, tb.text("main"), "The settlement address is changed")
	m, err := e.api.Owner(ctx, e.merchant.ID)
	require.NoError(t, err)
	require.Equal(t, common.HexToAddress("0xdd"), m.Merchant.SettlementAddress)

	// Sign out, then in with the passkey alone.
	tb.submit(`form[action$="/sign-out"]`)
	tb.waitURL("msg=signed_out")
	tb.run(chromedp.Click("#passkey-sign-in", chromedp.ByQuery))
	tb.waitPath("/dashboard/")
	require.Contains(t, tb.text("header"), "owner@example.com")
	es, err := e.st.ListAudit(ctx, store.AuditFilter{MerchantID: e.merchant.ID, Action: "sign_in.passkey"})
	require.NoError(t, err)
	require.Len(t, es, 1)
	tb.requireClean()
}

// With two chains, in Chromium: the overview's volumes per chain, the
// new-invoice form's network choice (an invoice created on chain 9000
// through it) and the invoice's network row, each page clean under
// axe-core, light and dark, 360 and 1280 px.
func TestBrowser_TwoChains_OverviewNewInvoiceAndInvoice_Axe(t *testing.T) {
	e := newEnvWith(t, newSQLite(t), invoice.Config{Chains: []invoice.Chain{{ID: 9000}}})
	base := strings.Replace(e.srv.URL, "127.0.0.1", "localhost", 1) + "/dashboard"
	owner, err := e.api.Owner(ctx, e.merchant.ID)
	require.NoError(t, err)
	for i, chain := range []uint64{1337, 9000} {
		oi, err := e.api.CreateInvoice(ctx, owner, fmt.Sprint("k", i), invoice.InvoiceParams{AmountFormatted: fmt.Sprint(i + 1), ChainID: chain})
		require.NoError(t, err)
		inv, err := e.st.GetInvoice(ctx, oi.ID)
		require.NoError(t, err)
		inv.PaidWei, inv.Status = inv.AmountWei, store.StatusPaid
		require.NoError(t, e.st.UpdateInvoice(ctx, &inv))
	}

	tb := newTab(t)
	tb.open(base + "/sign-in")
	tb.run(chromedp.SendKeys("#email", "owner@example.com", chromedp.ByQuery),
		chromedp.SendKeys("#password", testPassword, chromedp.ByQuery))
	tb.submit("#signin-form")
	tb.waitPath("/dashboard/")
	vols := tb.text("#volumes")
	require.Contains(t, vols, "ETH@1337")
	require.Contains(t, vols, "ETH@9000")
	tb.check("two-chains-overview")

	tb.open(base + "/invoices/new")
	tb.run(chromedp.SendKeys("#amount", "0.25", chromedp.ByQuery),
		chromedp.SetValue("#asset", "ETH@9000", chromedp.ByQuery))
	tb.check("two-chains-new-invoice")
	tb.submit("#invoice-form")
	tb.waitPath("/dashboard/invoices")
	id := tb.text("#created-id")
	tb.open(base + "/invoices/" + id)
	require.Equal(t, "9000", tb.text("#inv-chain"))
	tb.check("two-chains-invoice")
}
