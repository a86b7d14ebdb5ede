package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"
)

// claimView is what the claim page shows, read from its DOM.
type claimView struct {
	Lang, Title, Status, StatusClass, Merchant, Amount, Symbol, Network, Destination, Tx, Message, Address string
	Guard, Confirm                                                                                         string
	Shown                                                                                                  []string
	WalletButton                                                                                           bool
}

const readClaim = `(() => {
	const $ = id => document.getElementById(id);
	const text = id => $(id) ? $(id).textContent.trim() : "";
	return {
		Lang: document.documentElement.lang, Title: document.title, Status: text("status"), StatusClass: $("status").className,
		Merchant: text("merchant"), Amount: text("amount"), Symbol: text("symbol"), Network: text("network"),
		Destination: $("row-destination").hidden ? "" : text("destination"), Tx: $("row-tx").hidden ? "" : text("tx"),
		Message: text("claim-msg"), Address: $("address").value, Guard: text("claim-guard"), Confirm: text("confirm-label"),
		Shown: ["details", "claim", "invalid"].filter(id => !$(id).hidden), WalletButton: !$("use-wallet").hidden,
	};
})()`

func (tb *tab) claim() claimView {
	tb.t.Helper()
	var v claimView
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Evaluate(readClaim, &v)))
	return v
}

func (tb *tab) untilClaim(what string, within time.Duration, cond func(v claimView) bool) claimView {
	tb.t.Helper()
	var last claimView
	var err error
	waitUntil(tb.t, within, 100*time.Millisecond, func() bool {
		var v claimView
		if err = chromedp.Run(tb.ctx, chromedp.Evaluate(readClaim, &v)); err != nil {
			return false
		}
		last = v
		return cond(v)
	}, func() string { return fmt.Sprintf("the claim page never showed %s; last %+v (%v)", what, last, err) })
	return last
}

// claimWallet installs a browser wallet (EIP-1193) in the page;
// answerWallet answers it with one account: what "Use my browser wallet"
// reads.
func claimWallet() []chromedp.Action {
	return []chromedp.Action{
		chromedp.ActionFunc(func(ctx context.Context) error { return runtime.AddBinding("goWallet").Do(ctx) }),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(walletShim).Do(ctx)
			return err
		}),
	}
}

func answerWallet(ctx context.Context, addr common.Address) {
	chromedp.ListenTarget(ctx, func(ev any) {
		e, ok := ev.(*runtime.EventBindingCalled)
		if !ok || e.Name != "goWallet" {
			return
		}
		go func() {
			var req struct {
				ID     int    `json:"id"`
				Method string `json:"method"`
			}
			if json.Unmarshal([]byte(e.Payload), &req) != nil {
				return
			}
			result, errJSON := "null", "null"
			if req.Method == "eth_requestAccounts" {
				result = `["` + addr.Hex() + `"]`
			} else {
				errJSON = `{"code":4200,"message":"unsupported"}`
			}
			_ = chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf("window.__walletReply(%d, %s, %s)", req.ID, result, errJSON), nil))
		}()
	})
}

// claimInBrowser completes a claim link in headless Chromium as a payer
// would: the page shows the refund waiting for its destination; a typo'd
// address is refused with a message; the browser wallet's account fills
// the field; the payer confirms it is theirs and sends; the page follows
// the refund until it is confirmed (confirmed waits for that through the
// API). Every state is checked with axe-core at 360 and 1280 px, with
// screenshots, in light and in the dark theme.
func claimInBrowser(t *testing.T, claimURL string, chainID uint64, dest common.Address, confirmed func()) {
	b := newBrowser(t)
	tb := b.open(t, claimURL, 360, claimWallet()...)
	answerWallet(tb.ctx, dest)
	v := tb.untilClaim("the refund waiting for its destination", 30*time.Second, func(v claimView) bool {
		return strings.Join(v.Shown, ",") == "details,claim"
	})
	require.Equal(t, "Refund shop", v.Merchant)
	require.Equal(t, "0.05", v.Amount)
	require.Equal(t, "ETH", v.Symbol)
	require.Equal(t, "Tell us where to send your refund.", v.Status)
	require.Contains(t, v.Confirm, fmt.Sprintf("can receive ETH on Chain id %d", chainID))
	require.True(t, v.WalletButton, "a browser wallet is offered")
	tb.check("claim-awaiting")

	// A typo: one hex digit short.
	require.NoError(t, chromedp.Run(tb.ctx, chromedp.SendKeys("#address", dest.Hex()[:41], chromedp.ByID), chromedp.Click("#confirm", chromedp.ByID),
		chromedp.Click("#submit", chromedp.ByID)))
	v = tb.untilClaim("the address refused", 10*time.Second, func(v claimView) bool { return v.Message != "" })
	require.Contains(t, v.Message, "not a valid address")
	tb.check("claim-invalid-address")

	// The browser wallet's account, confirmed and sent.
	tb.click("#use-wallet")
	v = tb.untilClaim("the wallet's address", 10*time.Second, func(v claimView) bool { return v.Address == dest.Hex() })
	require.Empty(t, v.Message)
	tb.click("#submit")
	v = tb.untilClaim("the refund on its way", 30*time.Second, func(v claimView) bool { return v.Destination == dest.Hex() })
	require.Equal(t, []string{"details"}, v.Shown, "the form is gone once the address is taken")
	tb.check("claim-sending")

	confirmed()
	v = tb.untilClaim("the refund confirmed", 60*time.Second, func(v claimView) bool { return v.Status == "Your refund is complete." })
	require.Contains(t, v.StatusClass, "status-good")
	require.Regexp(t, `^0x[0-9a-f]{64}$`, v.Tx)
	tb.check("claim-confirmed")
	tb.requireClean()

	// The same page in the dark theme, and in German.
	dk := b.open(t, strings.Replace(claimURL, "/claim#", "/claim?lang=de#", 1), 360, dark())
	v = dk.untilClaim("the confirmed refund in German", 30*time.Second, func(v claimView) bool { return v.Status == "Ihre Erstattung ist abgeschlossen." })
	require.Equal(t, "de", v.Lang)
	require.Equal(t, "Erstattung", v.Title)
	dk.check("claim-confirmed-dark-de")
	dk.requireClean()
}
