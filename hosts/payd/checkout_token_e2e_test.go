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

// TestCheckout_TokenInvoice_InARealBrowser drives the hosted checkout page
// for an ERC-20 invoice (the dev chain's test stablecoin) in headless
// Chromium against `payd dev`: units and symbol, the transfer URI and its
// QR code, payment through the page's own wallet button, and the remainder
// of an underpaid token invoice.
func TestCheckout_TokenInvoice_InARealBrowser(t *testing.T) {
	t.Parallel() // its own payd dev and Chromium, on ports the OS picks
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := startCheckoutDev(t, ctx)
	br := newBrowser(t)
	m := devTokenRe.FindStringSubmatch(dev.out.String())
	require.NotNil(t, m, "the banner prints the test token:\n%s", dev.out.String())
	symbol, token := m[1], common.HexToAddress(m[2])
	require.Equal(t, "USDC", symbol)

	eth, err := ethclient.DialContext(ctx, "http://"+dev.chainAddr)
	require.NoError(t, err)
	t.Cleanup(eth.Close)
	usdc := testtoken.Bind(testtoken.Stable, token, eth, "", symbol, 6)

	t.Run("WalletButton_TransfersExactlyToTheDepositAndSettles_WithoutReload", func(t *testing.T) {
		dev := dev.in(t)
		inv := dev.create(map[string]any{"asset": "USDC", "amount_formatted": "12.5", "redirect_url": "https://shop.example/orders/T-1"})
		deposit := common.HexToAddress(inv["deposit_address"].(string))
		wantURI := fmt.Sprintf("ethereum:%s@1337/transfer?address=%s&uint256=12500000", token.Hex(), deposit.Hex())
		require.Equal(t, wantURI, inv["payment_uri"])
		_, merchant := dev.api.do("GET", "/v1/merchant", nil, nil)
		settlement := common.HexToAddress(merchant["settlement_address"].(string))
		before, err := usdc.BalanceOf(ctx, settlement)
		require.NoError(t, err)

		w := newTestWallet(t, dev)
		// The page's clock is the test's: the redirect to the shop waits for it.
		tb := br.open(t, inv["checkout_url"].(string), 360, append(w.install(), withClock())...)
		w.attach(tb.ctx)
		v := tb.until("the pending token invoice with its QR code", 30*time.Second, func(v view) bool { return v.QRLoaded })
		require.Equal(t, []string{"details", "pay"}, v.Shown)
		require.Equal(t, "12.5", v.Amount, "token units, not base units")
		require.Equal(t, "USDC", v.Symbol)
		require.Equal(t, "Amount", v.AmountLabel)
		require.Equal(t, deposit.Hex(), v.Address, "EIP-55")
		var contract string
		require.NoError(t, chromedp.Run(tb.ctx, chromedp.Evaluate(
			`document.getElementById("row-token").hidden ? "" : document.getElementById("token-contract").textContent.trim()`, &contract)))
		require.Equal(t, token.Hex(), contract, "a payer sending by hand sees which token contract, EIP-55")
		require.Equal(t, wantURI, v.OpenWallet, "Open in wallet is the token transfer URI")
		require.Equal(t, wantURI, tb.qr(), "the QR code is the token transfer URI")
		require.Equal(t, "Waiting for your payment.", v.Status)
		require.Equal(t, "Send only USDC on evmpay dev chain, chain id 1337, from the token contract shown above: another token, even one called USDC, is not this payment.", v.Guard)
		require.Equal(t, "Paying from an exchange? It may deduct a withdrawal fee: make sure exactly 12.5 USDC arrives.", v.FeeNote)
		require.True(t, v.WalletButton)
		var copyContract string
		require.NoError(t, chromedp.Run(tb.ctx, chromedp.Evaluate(`document.getElementById("copy-contract").dataset.copy`, &copyContract)))
		require.Equal(t, token.Hex(), copyContract, "a copy button beside the token contract")
		cb, kb := tb.box("copy-contract"), tb.box("token-contract")
		require.True(t, cb.X > kb.X && cb.Y < kb.Y+kb.H && kb.Y < cb.Y+cb.H, "beside it: %+v %+v", cb, kb)
		tb.check("token-pending")
		tb.requireClean()

		tb.click("#pay-browser")
		tb.until("the transaction sent", 30*time.Second, func(v view) bool { return strings.HasPrefix(v.WalletMsg, "Transaction sent") })
		require.Equal(t, []string{"eth_requestAccounts", "wallet_switchEthereumChain", "wallet_addEthereumChain", "eth_sendTransaction"}, w.calls())
		w.mu.Lock()
		tx := w.tx
		w.mu.Unlock()
		require.NotNil(t, tx)
		require.Equal(t, token, *tx.To(), "the call goes to the token contract")
		require.Equal(t, "0", tx.Value().String(), "no native value")
		wantData := "a9059cbb" + strings.Repeat("0", 24) + strings.ToLower(deposit.Hex()[2:]) + fmt.Sprintf("%064x", 12500000)
		require.Equal(t, wantData, common.Bytes2Hex(tx.Data()), "transfer(deposit, 12500000)")

		require.Eventually(t, func() bool {
			r, err := eth.TransactionReceipt(ctx, tx.Hash())
			if err != nil {
				return false
			}
			require.Equal(t, uint64(1), r.Status, "the transfer succeeded on chain (gas used %d)", r.GasUsed)
			return true
		}, 30*time.Second, 100*time.Millisecond, "the transfer was mined")
		seen := tb.until("the payment seen", 30*time.Second, func(v view) bool {
			return shows(v, "details", "progress", "receipt") || shows(v, "details", "done", "return-row", "receipt")
		})
		require.True(t, shows(seen, "details", "progress", "receipt"), "the page showed the payment before its confirmations: %+v", seen)
		require.Equal(t, []string{tx.Hash().Hex()}, seen.Txs, "the transaction, from payment seen on")
		require.Equal(t, "USDC, token contract "+token.Hex(), seen.Receipt["Asset"])
		require.Regexp(t, `^Payment seen\. Waiting for confirmations: (\d|1[01]) of 12\.$`, seen.Status)
		v = tb.until("the payment confirmed", 150*time.Second, func(v view) bool { return v.Status == "Payment confirmed. Thank you!" })
		confs := tb.confirmationsShown()
		require.GreaterOrEqual(t, len(confs), 2, "confirmations counted live: %v", confs)
		require.True(t, v.SameDocument, "no reload")
		require.Equal(t, []string{"details", "done", "return-row", "receipt"}, v.Shown)
		require.Equal(t, "12.5", v.Amount)
		require.Equal(t, "Your payment of 12.5 USDC is confirmed on the network. Your part is done; keep the receipt below if you like.", v.Done)
		require.Equal(t, "https://shop.example/orders/T-1", v.Return)
		tb.check("token-confirmed")

		// The merchant's part: the sweep to its settlement address.
		waitUntil(t, 150*time.Second, 200*time.Millisecond, func() bool {
			_, got := dev.api.do("GET", fmt.Sprintf("/v1/invoices/%v", inv["id"]), nil, nil)
			return got["status"] == "SETTLED"
		}, func() string { return "the token invoice never settled" })

		after, err := usdc.BalanceOf(ctx, settlement)
		require.NoError(t, err)
		require.Equal(t, "12500000", new(big.Int).Sub(after, before).String(), "the settlement address holds exactly the invoice amount")
	})

	t.Run("Underpaid_ShowsTheRemainderInTokenUnitsWithATransferURIForExactlyIt", func(t *testing.T) {
		dev := dev.in(t)
		inv := dev.create(map[string]any{"asset": "USDC", "amount_formatted": "20"})
		deposit := common.HexToAddress(inv["deposit_address"].(string))
		tb := br.open(t, inv["checkout_url"].(string), 360)
		tb.until("pending", 30*time.Second, func(v view) bool { return v.QRLoaded })
		part := fmt.Sprintf("ethereum:%s@1337/transfer?address=%s&uint256=7250000", token.Hex(), deposit.Hex())
		require.NoError(t, run(ctx, []string{"pay", "--rpc", dev.chainAddr, part}, &syncBuffer{}))
		v := tb.until("the remainder", 30*time.Second, func(v view) bool { return v.AmountLabel == "Still due" && v.QRLoaded })
		require.Equal(t, "12.75", v.Amount)
		require.Equal(t, "USDC", v.Symbol)
		require.Equal(t, "Part of the payment arrived (7.25 of 20 USDC). Pay exactly the remaining 12.75 USDC.", v.Status)
		want := fmt.Sprintf("ethereum:%s@1337/transfer?address=%s&uint256=12750000", token.Hex(), deposit.Hex())
		require.Equal(t, want, v.OpenWallet)
		tb.untilQR("the remainder's QR code", want)
		require.Equal(t, "7.25 of 20 USDC", v.PaidSoFar)
		tb.check("token-underpaid")
	})
}
