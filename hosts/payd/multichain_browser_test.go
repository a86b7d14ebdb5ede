package main

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/browserwallet"
	"github.com/evmpay/evmpay/store"
)

// The hosted checkout of one payd serving two chains, in Chromium with a
// wallet that records what the page asks of it: a fiat invoice quoting
// the first chain's coin and the second chain's is offered on both
// networks; picking the second asks the wallet to switch to it (then to
// add it, as payd configured it), and sends the transfer there. Paid on
// the second chain, the page follows the invoice to the end.
func TestCheckout_TwoChains_PickTheOtherNetwork_TheWalletSwitchesAndPaysThere(t *testing.T) {
	t.Parallel()
	r := newTwoChains(t, roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleSweep: true, roleWebhooks: true},
		func(c *appConfig) { c.pricing = pricingConfig{dev: true, symbols: map[string]string{"TEST": "ETH"}} })
	inv := r.create(map[string]any{"price": map[string]string{"amount": "20.00", "currency": "EUR"},
		"accept": []string{"ETH", fmt.Sprintf("TEST@%d", secondDevChain)}})
	other := inv["quotes"].([]any)[1].(map[string]any)
	b := newBrowser(t)
	tb := b.open(t, r.app.httpURL()+"/checkout#"+inv["lookup_token"].(string), 390, chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(browserwallet.Recording).Do(ctx)
		return err
	}))
	var options []string
	waitUntil(t, 30*time.Second, 100*time.Millisecond, func() bool {
		tb.eval(`[...document.querySelectorAll("#choices label")].map((l) => l.textContent)`, &options)
		return len(options) == 2
	}, func() string { return fmt.Sprintf("the picker: %v", options) })
	require.Contains(t, options[1], "second dev chain", "the quote names its network")

	require.NoError(t, chromedp.Run(tb.ctx, chromedp.Focus(`#choices input[value="0"]`, chromedp.ByQuery), chromedp.KeyEvent(kb.ArrowDown)))
	v := tb.until("the second chain's quote", 30*time.Second, func(v view) bool {
		return strings.Contains(v.Network, "second dev chain") && v.OpenWallet == other["payment_uri"]
	})
	require.Contains(t, v.OpenWallet, "@1338", "the request carries the second chain's id")

	require.NoError(t, chromedp.Run(tb.ctx, chromedp.Click("#pay-browser", chromedp.ByID)))
	tb.until("the transaction sent", 30*time.Second, func(v view) bool { return strings.HasPrefix(v.WalletMsg, "Transaction sent") })
	var calls []browserwallet.Call
	tb.eval(`window.__walletCalls`, &calls)
	methods := make([]string, len(calls))
	for i, c := range calls {
		methods[i] = c.Method
	}
	require.Equal(t, []string{"eth_requestAccounts", "wallet_switchEthereumChain", "wallet_addEthereumChain", "eth_sendTransaction"}, methods)
	require.Equal(t, []map[string]any{{"chainId": "0x53a"}}, calls[1].Params)
	added := calls[2].Params[0]
	require.Equal(t, "0x53a", added["chainId"])
	require.Equal(t, "second dev chain", added["chainName"])
	require.Equal(t, map[string]any{"name": "TEST", "symbol": "TEST", "decimals": float64(18)}, added["nativeCurrency"])
	sent := calls[3].Params[0]
	require.Equal(t, "0x53a", sent["chainId"])
	require.Equal(t, strings.ToLower(inv["deposit_address"].(string)), strings.ToLower(sent["to"].(string)))
	amount, ok := new(big.Int).SetString(other["amount"].(string), 10)
	require.True(t, ok)
	require.Equal(t, fmt.Sprintf("0x%x", amount), sent["value"], "the second chain's quote, exactly")

	// The recording wallet broadcasts nothing: the payer pays the same
	// request from a funded account; the page follows the invoice.
	r.pay(secondDevChain, other["payment_uri"].(string))
	r.waitStatus(inv, store.StatusSettled, 120*time.Second)
	tb.until("the invoice done", 60*time.Second, func(v view) bool { return slices.Contains(v.Shown, "done") })
	tb.requireClean()
}
