package main

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
)

// fiatView is what the page shows of a fiat invoice beyond view: the line
// under the headline and the asset choice.
type fiatView struct {
	Sub     string
	Rate    string
	Choices []string
	Checked int
	CopyIn  string // the id of the copy button's parent
	Copy    string
}

const readFiat = `(() => {
	const $ = id => document.getElementById(id);
	const labels = [...document.querySelectorAll("#choices label")];
	return {
		Sub: $("amount-sub").hidden ? "" : $("amount-sub-text").textContent.trim(),
		Rate: $("rate-line").hidden ? "" : $("rate-line").textContent.trim(),
		Choices: $("choice").hidden ? [] : labels.map(l => l.textContent.replace(/\s+/g, " ").trim()),
		Checked: labels.findIndex(l => l.querySelector("input").checked),
		CopyIn: $("copy-amount").parentNode.id, Copy: $("copy-amount").dataset.copy || "",
	};
})()`

func (tb *tab) fiat() fiatView {
	tb.t.Helper()
	var v fiatView
	require.NoError(tb.t, chromedp.Run(tb.ctx, chromedp.Evaluate(readFiat, &v)))
	return v
}

// TestCheckout_FiatInvoice_InARealBrowser drives the hosted checkout page
// of an invoice priced in euros (issue #25 item 6, issue #28 item 9) in
// headless Chromium against `payd dev`, whose dev rates make 1 ETH =
// 2,000 EUR and 1 USDC = 0.80 EUR: the price is the headline and the crypto
// amount follows; the payer picks the asset (each with its exact amount,
// URI and QR code); an underpaid invoice shows what remains in euros and in
// each asset; paid partly in USDC and partly in ETH it ends confirmed, and
// the merchant receives both.
func TestCheckout_FiatInvoice_InARealBrowser(t *testing.T) {
	t.Parallel() // its own payd dev and Chromium, on ports the OS picks
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := startCheckoutDev(t, ctx)
	br := newBrowser(t)
	m := devTokenRe.FindStringSubmatch(dev.out.String())
	require.NotNil(t, m, "the banner prints the test token:\n%s", dev.out.String())
	token := common.HexToAddress(m[2])
	eth, err := ethclient.DialContext(ctx, "http://"+dev.chainAddr)
	require.NoError(t, err)
	t.Cleanup(eth.Close)
	usdc := testtoken.Bind(testtoken.Stable, token, eth, "", "USDC", 6)

	inv := dev.create(map[string]any{"price": map[string]any{"amount": "49.90", "currency": "EUR"}, "order_id": "F-1",
		"description": "Two tickets"})
	deposit := common.HexToAddress(inv["deposit_address"].(string))
	ethURI := func(wei string) string { return fmt.Sprintf("ethereum:%s@1337?value=%s", deposit.Hex(), wei) }
	usdcURI := func(units string) string {
		return fmt.Sprintf("ethereum:%s@1337/transfer?address=%s&uint256=%s", token.Hex(), deposit.Hex(), units)
	}
	_, merchant := dev.api.do("GET", "/v1/merchant", nil, nil)
	settlement := common.HexToAddress(merchant["settlement_address"].(string))

	tb := br.open(t, inv["checkout_url"].(string), 360)

	t.Run("Pending_ThePriceFirstThenTheCryptoAmountAndTheAssetChoice", func(t *testing.T) {
		tb := tb.in(t)
		v := tb.until("the pending fiat invoice", 30*time.Second, func(v view) bool { return v.QRLoaded })
		require.Equal(t, []string{"details", "pay"}, v.Shown)
		require.Equal(t, "Amount", v.AmountLabel)
		require.Equal(t, "49.90", v.Amount, "the price is the headline")
		require.Equal(t, "EUR", v.Symbol)
		f := tb.fiat()
		require.Equal(t, "Pay exactly 0.02495 ETH", f.Sub, "the crypto amount follows")
		require.Equal(t, "1 ETH = 2,000 EUR, locked for this invoice", f.Rate)
		require.Equal(t, []string{"ETH 0.02495 ETH", "USDC 62.375 USDC"}, f.Choices, "each accepted asset with its exact amount")
		require.Equal(t, 0, f.Checked)
		require.Equal(t, "amount-sub", f.CopyIn, "the copy button sits beside the crypto amount it copies")
		require.Equal(t, "0.02495", f.Copy)
		cb, sub := tb.box("copy-amount"), tb.box("amount-sub-text")
		require.True(t, cb.X > sub.X+sub.W-1 && cb.Y < sub.Y+sub.H && sub.Y < cb.Y+cb.H, "on the same line, right of it: %+v %+v", cb, sub)
		require.Equal(t, ethURI("24950000000000000"), v.OpenWallet)
		require.Equal(t, ethURI("24950000000000000"), tb.qr())
		require.Equal(t, "Send only ETH on evmpay dev chain, chain id 1337.", v.Guard)
		tb.check("fiat-pending")
		tb.requireClean()
	})

	t.Run("PickUSDC_ItsAmountURIAndQRCode", func(t *testing.T) {
		tb := tb.in(t)
		tb.click(`#choices input[value="1"]`)
		v := tb.until("the USDC request", 30*time.Second, func(v view) bool { return v.OpenWallet == usdcURI("62375000") })
		tb.untilQR("the USDC QR code", usdcURI("62375000"))
		f := tb.fiat()
		require.Equal(t, 1, f.Checked)
		require.Equal(t, "Pay exactly 62.375 USDC", f.Sub)
		require.Equal(t, "1 USDC = 0.8 EUR, locked for this invoice", f.Rate)
		require.Equal(t, "62.375", f.Copy)
		require.Equal(t, "49.90", v.Amount, "the headline stays the price")
		require.Contains(t, v.Guard, "Send only USDC on evmpay dev chain")
		var contract string
		require.NoError(t, chromedp.Run(tb.ctx, chromedp.Evaluate(
			`document.getElementById("row-token").hidden ? "" : document.getElementById("token-contract").textContent.trim()`, &contract)))
		require.Equal(t, token.Hex(), contract)
		tb.check("fiat-usdc")
		tb.requireClean()
	})

	t.Run("Underpaid_TheRemainderInEurosAndInEachAsset", func(t *testing.T) {
		dev := dev.in(t)
		tb := tb.in(t)
		// 20 USDC is 16.00 EUR: 33.90 EUR remain, 42.375 USDC or 0.01695 ETH.
		require.NoError(t, run(ctx, []string{"pay", "--rpc", dev.chainAddr, usdcURI("20000000")}, &syncBuffer{}))
		v := tb.until("the remainder", 30*time.Second, func(v view) bool { return v.AmountLabel == "Still due" && v.QRLoaded })
		require.Equal(t, "33.90", v.Amount)
		require.Equal(t, "EUR", v.Symbol)
		require.Equal(t, "Part of the payment arrived (16.00 EUR of 49.90 EUR). Pay the remaining 33.90 EUR: exactly 42.375 USDC.", v.Status)
		require.Equal(t, "16.00 EUR of 49.90 EUR", v.PaidSoFar)
		require.Equal(t, usdcURI("42375000"), v.OpenWallet)
		tb.untilQR("the remainder's QR code in USDC", usdcURI("42375000"))
		f := tb.fiat()
		require.Equal(t, []string{"ETH 0.01695 ETH", "USDC 42.375 USDC"}, f.Choices)
		require.Len(t, v.Txs, 1, "the payment so far, in the receipt")
		tb.check("fiat-underpaid")
		tb.requireClean()
	})

	t.Run("RestInETH_ConfirmedAndBothAssetsReachTheMerchant", func(t *testing.T) {
		dev := dev.in(t)
		tb := tb.in(t)
		before, err := eth.BalanceAt(ctx, settlement, nil)
		require.NoError(t, err)
		tb.click(`#choices input[value="0"]`)
		tb.until("the ETH remainder", 30*time.Second, func(v view) bool { return v.OpenWallet == ethURI("16950000000000000") })
		tb.untilQR("the remainder's QR code in ETH", ethURI("16950000000000000"))
		require.NoError(t, run(ctx, []string{"pay", "--rpc", dev.chainAddr, ethURI("16950000000000000")}, &syncBuffer{}))
		seen := tb.until("the payment seen", 30*time.Second, func(v view) bool {
			return strings.HasPrefix(v.Status, "Payment seen") || v.Status == "Payment confirmed. Thank you!"
		})
		require.Equal(t, []string{"details", "progress", "receipt"}, seen.Shown, "%+v", seen)
		require.Empty(t, tb.fiat().Choices, "nothing to pick once paid")
		v := tb.until("the payment confirmed", 150*time.Second, func(v view) bool { return v.Status == "Payment confirmed. Thank you!" })
		require.Equal(t, "49.90", v.Amount)
		require.Equal(t, "EUR", v.Symbol)
		require.Equal(t, "Your payment of 49.90 EUR is confirmed on the network. Your part is done; keep the receipt below if you like.", v.Done)
		require.Equal(t, "49.90 EUR", v.Receipt["Price"])
		require.Equal(t, "49.90 EUR", v.Receipt["Paid"])
		require.Contains(t, v.Receipt["Asset"], "USDC, token contract "+token.Hex())
		require.Contains(t, v.Receipt["Asset"], "ETH, the network's own coin")
		require.Len(t, v.Txs, 2)
		require.Contains(t, v.Receipt["Transactions"], "20 USDC (16.00 EUR) in block")
		require.Contains(t, v.Receipt["Transactions"], "0.01695 ETH (33.90 EUR) in block")
		tb.check("fiat-confirmed")
		tb.requireClean()

		waitUntil(t, 150*time.Second, 200*time.Millisecond, func() bool {
			_, got := dev.api.do("GET", fmt.Sprintf("/v1/invoices/%v", inv["id"]), nil, nil)
			return got["status"] == "SETTLED"
		}, func() string { return "the fiat invoice never settled" })
		after, err := eth.BalanceAt(ctx, settlement, nil)
		require.NoError(t, err)
		require.Equal(t, "16950000000000000", new(big.Int).Sub(after, before).String(), "the native coin, exactly")
		got, err := usdc.BalanceOf(ctx, settlement)
		require.NoError(t, err)
		require.Equal(t, "20000000", got.String(), "and the token")
	})

	t.Run("German_ThePriceInThePayersLocale", func(t *testing.T) {
		dev := dev.in(t)
		other := dev.create(map[string]any{"price": map[string]any{"amount": "1234.50", "currency": "EUR"}, "accept": []string{"USDC"}})
		de := br.open(t, strings.Replace(other["checkout_url"].(string), "/checkout#", "/checkout?lang=de#", 1), 1280)
		v := de.until("the German page", 30*time.Second, func(v view) bool { return v.QRLoaded })
		require.Equal(t, "1.234,50", v.Amount, "German grouping and decimal comma, the currency's two digits")
		require.Equal(t, "EUR", v.Symbol)
		f := de.fiat()
		require.Empty(t, f.Choices, "one accepted asset: nothing to pick")
		require.Equal(t, "Genau 1.543,125 USDC zahlen", f.Sub)
		require.Equal(t, "1 USDC = 0,8 EUR, für diese Rechnung festgelegt", f.Rate)
		require.Equal(t, "1543.125", f.Copy)
		de.check("fiat-pending-de")
		de.requireClean()
	})
}
