package invoice_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
)

var payer = common.HexToAddress("0x90F79bf6EB2c4f870365E785982E1f101E93b906")

// chainAt indexes empty blocks up to head (the confirmations of payments
// are counted against the indexed head).
func (e *env) chainAt(head uint64) {
	e.t.Helper()
	latest, err := e.st.LatestBlock(ctx)
	from := uint64(0)
	if err == nil {
		from = latest.Number + 1
	}
	var bs []store.Block
	for n := from; n <= head; n++ {
		bs = append(bs, store.Block{Number: n, Hash: common.BigToHash(new(big.Int).SetUint64(n + 1000)), Timestamp: 1_800_000_000 + n,
			IndexedAt: e.clock.Now()})
	}
	require.NoError(e.t, e.st.InsertBlocks(ctx, bs, nil))
}

// paid records a payment to the invoice as settlement would.
func (e *env) paid(invoiceID int64, amount string, block uint64, token *common.Address, wrong, late bool) {
	e.t.Helper()
	p := store.Payment{InvoiceID: invoiceID, TxHash: common.BytesToHash([]byte(fmt.Sprintf("pay-%d-%s-%d", invoiceID, amount, block))),
		LogIndex: store.NativeLogIndex, BlockNumber: block, BlockHash: common.Hash{1}, From: payer,
		AmountWei: store.MustParseAmount(amount), CreatedAt: e.clock.Now(), Token: token, WrongAsset: wrong, Late: late}
	if token != nil {
		p.LogIndex = 0
	}
	require.NoError(e.t, e.st.InsertPayment(ctx, &p))
}

// refund asks for a refund of the invoice.
func (e *env) refund(key string, invoiceID int64, idem, body string) result {
	e.t.Helper()
	return e.do("POST", fmt.Sprintf("/v1/invoices/%d/refunds", invoiceID), key, body, "Idempotency-Key", idem)
}

// scopedKey makes a scoped API key with the merchant's own key.
func (e *env) scopedKey(own string, scopes ...string) (string, int64) {
	e.t.Helper()
	b, _ := json.Marshal(map[string]any{"name": "k", "scopes": scopes})
	res := e.do("POST", "/v1/merchant/api-keys", own, string(b))
	require.Equal(e.t, http.StatusCreated, res.Status, "%s", res.Body)
	v := res.json(e.t)
	return v["api_key"].(string), int64(v["id"].(float64))
}

// paidInvoice is an invoice of 1 coin paid pay wei in block 10, with the
// chain at block 30 (confirmed with 12).
func (e *env) paidInvoice(m merchantKeys, pay string) createdInvoice {
	e.t.Helper()
	inv := e.mustCreate(m.APIKey, "inv-"+pay+fmt.Sprint(time.Now().UnixNano()), `{"amount_wei":"1000000000000000000"}`)
	e.paid(inv.ID, pay, 10, nil, false, false)
	e.chainAt(30)
	return inv
}

func TestScopes_EnforcedOnEveryMerchantRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	read, _ := e.scopedKey(m.APIKey, store.ScopeRead)
	res := e.do("GET", "/v1/invoices", read, "")
	require.Equal(t, http.StatusOK, res.Status)
	requireProblem(t, e.createInvoice(read, "k1", `{"amount_wei":"1"}`), http.StatusForbidden, "insufficient_scope", "")
	requireProblem(t, e.do("PATCH", "/v1/merchant", read, `{"name":"x"}`), http.StatusForbidden, "insufficient_scope", "")

	// Keys and payout settings: the merchant's own key only, whatever
	// scopes a key holds.
	admin, _ := e.scopedKey(m.APIKey, store.AllScopes()...)
	requireProblem(t, e.do("POST", "/v1/merchant/api-keys", admin, `{"scopes":["approve"]}`), http.StatusForbidden, "insufficient_scope", "")
	requireProblem(t, e.do("PUT", "/v1/merchant/payout-settings", admin, `{}`), http.StatusForbidden, "insufficient_scope", "")
	requireProblem(t, e.do("POST", "/v1/merchant/api-key/rotate", admin, ""), http.StatusForbidden, "insufficient_scope", "")
	require.Equal(t, http.StatusOK, e.do("PATCH", "/v1/merchant", admin, `{"name":"renamed"}`).Status, "admin manages the profile")
	requireProblem(t, e.do("POST", "/v1/merchant/api-keys", m.APIKey, `{"scopes":["everything"]}`), http.StatusBadRequest, "invalid_field", "scopes")

	// Every merchant route checks its scope: a key holding every scope but
	// that one is refused (owner routes take the own key only).
	for pattern, scope := range invoice.RouteScopes() {
		if scope == "public" || scope == "operator" || scope == "owner" {
			continue
		}
		var others []string
		for _, sc := range store.AllScopes() {
			if sc != scope {
				others = append(others, sc)
			}
		}
		k, _ := e.scopedKey(m.APIKey, others...)
		method, path, _ := strings.Cut(pattern, " ")
		path = strings.ReplaceAll(path, "{id}", "1")
		res := e.do(method, path, k, "")
		requireProblem(t, res, http.StatusForbidden, "insufficient_scope", "")
	}

	// A revoked key stops at once.
	k, id := e.scopedKey(m.APIKey, store.ScopeRead)
	require.Equal(t, http.StatusOK, e.do("GET", "/v1/merchant", k, "").Status)
	res = e.do("DELETE", fmt.Sprintf("/v1/merchant/api-keys/%d", id), m.APIKey, "")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NotNil(t, res.json(t)["revoked_at"])
	requireProblem(t, e.do("GET", "/v1/merchant", k, ""), http.StatusUnauthorized, "unauthorized", "")
	list := e.do("GET", "/v1/merchant/api-keys", read, "")
	require.Equal(t, http.StatusOK, list.Status)
	require.NotContains(t, string(list.Body), read, "keys are never shown again")
	require.Contains(t, string(list.Body), read[:16], "their prefix is")
}

func TestRefund_NeverMoreThanReceivedAndConfirmed(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		inv := e.paidInvoice(m, "1500000000000000000") // overpaid by 0.5
		// Unconfirmed money does not count.
		e.paid(inv.ID, "9000000000000000000", 25, nil, false, false)

		requireProblem(t, e.refund(m.APIKey, inv.ID, "r0", `{"amount":"1500000000000000001","destination":"`+payer.Hex()+`"}`),
			http.StatusUnprocessableEntity, "refund_exceeds_received", "amount")
		res := e.refund(m.APIKey, inv.ID, "r1", `{"reason":"overpayment","destination":"`+payer.Hex()+`"}`)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		r := res.json(t)
		require.Equal(t, "500000000000000000", r["amount"])
		require.Equal(t, "overpayment", r["reason"])
		require.Equal(t, "QUEUED", r["status"])
		require.Equal(t, payer.Hex(), r["destination"])
		requireProblem(t, e.refund(m.APIKey, inv.ID, "r2", `{"reason":"overpayment","destination":"`+payer.Hex()+`"}`),
			http.StatusUnprocessableEntity, "nothing_to_refund", "")
		res = e.refund(m.APIKey, inv.ID, "r3", `{"reason":"full","destination":"`+payer.Hex()+`"}`)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		require.Equal(t, "1000000000000000000", res.json(t)["amount"], "what is left")
		requireProblem(t, e.refund(m.APIKey, inv.ID, "r4", `{"amount":"1","destination":"`+payer.Hex()+`"}`),
			http.StatusUnprocessableEntity, "refund_exceeds_received", "amount")

		// A cancelled refund gives its part back.
		id := int64(res.json(t)["id"].(float64))
		c := e.do("POST", fmt.Sprintf("/v1/refunds/%d/cancel", id), m.APIKey, "")
		require.Equal(t, http.StatusOK, c.Status, "%s", c.Body)
		require.Equal(t, "CANCELLED", c.json(t)["status"])
		require.Equal(t, http.StatusCreated, e.refund(m.APIKey, inv.ID, "r5", `{"amount":"1","destination":"`+payer.Hex()+`"}`).Status)
		requireProblem(t, e.do("POST", fmt.Sprintf("/v1/refunds/%d/cancel", id), m.APIKey, ""), http.StatusConflict, "state_conflict", "")

		list := e.do("GET", fmt.Sprintf("/v1/invoices/%d/refunds", inv.ID), m.APIKey, "")
		require.Equal(t, http.StatusOK, list.Status)
		require.Len(t, list.json(t)["data"], 3)
	})
}

// What is left to refund counts every open refund, however many closed
// ones came after it: a thousand cancelled refunds (more than a page of
// the store's listing) do not hide the one that takes everything.
func TestRefund_ManyCancelledRefundsHideNoOpenOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	inv := e.paidInvoice(m, "1000000000000000000")
	res := e.refund(m.APIKey, inv.ID, "all", `{"reason":"full","destination":"`+payer.Hex()+`"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	first, err := e.st.GetOutbound(ctx, int64(res.json(t)["id"].(float64)))
	require.NoError(t, err)
	require.NoError(t, e.st.InTx(ctx, func(tx store.Tx) error {
		for range 1001 {
			o := first
			o.ID, o.Status, o.Amount = 0, store.OutboundCancelled, store.NewAmount(1)
			if err := tx.CreateOutbound(ctx, &o); err != nil {
				return err
			}
		}
		return nil
	}))
	requireProblem(t, e.refund(m.APIKey, inv.ID, "again", `{"reason":"full","destination":"`+payer.Hex()+`"}`),
		http.StatusUnprocessableEntity, "nothing_to_refund", "")
}

// Concurrent refunds of the whole invoice: the invoice's row lock counts
// them one after the other; exactly one is recorded.
func TestRefund_ConcurrentDoubleRefund_ExactlyOneSucceeds(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		inv := e.paidInvoice(m, "1000000000000000000")
		const n = 8
		statuses := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = e.refund(m.APIKey, inv.ID, fmt.Sprintf("double-%d", i), `{"reason":"full","destination":"`+payer.Hex()+`"}`).Status
			}()
		}
		wg.Wait()
		created := 0
		for _, s := range statuses {
			if s == http.StatusCreated {
				created++
			} else {
				require.Equal(t, http.StatusUnprocessableEntity, s)
			}
		}
		require.Equal(t, 1, created, "statuses %v", statuses)
		os, err := e.st.ListOutbounds(ctx, store.OutboundFilter{InvoiceID: inv.ID})
		require.NoError(t, err)
		require.Len(t, os, 1)
	})
}

func TestRefund_IdempotencyKey_ReplayedOrRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	inv := e.paidInvoice(m, "1000000000000000000")
	body := `{"amount":"10","destination":"` + payer.Hex() + `"}`
	first := e.refund(m.APIKey, inv.ID, "same", body)
	require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
	again := e.refund(m.APIKey, inv.ID, "same", body)
	require.Equal(t, http.StatusCreated, again.Status)
	require.Equal(t, first.Body, again.Body, "replayed byte for byte")
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	requireProblem(t, e.refund(m.APIKey, inv.ID, "same", `{"amount":"11","destination":"`+payer.Hex()+`"}`),
		http.StatusUnprocessableEntity, "idempotency_key_reused", "")
	requireProblem(t, e.do("POST", fmt.Sprintf("/v1/invoices/%d/refunds", inv.ID), m.APIKey, body), http.StatusBadRequest, "idempotency_key_missing", "")
	os, err := e.st.ListOutbounds(ctx, store.OutboundFilter{InvoiceID: inv.ID})
	require.NoError(t, err)
	require.Len(t, os, 1)
}

func TestRefund_WrongAssetAndLatePayment_Shortcuts(t *testing.T) {
	t.Parallel()
	usdc := common.HexToAddress("0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48")
	e := newEnv(t, func(c *invoice.Config) {
		c.Assets = []store.Asset{{Symbol: "USDC", Address: &usdc, Decimals: 6}}
	})
	m := e.newMerchant()
	inv := e.mustCreate(m.APIKey, "w", `{"amount_wei":"1000000000000000000"}`)
	e.paid(inv.ID, "12500000", 10, &usdc, true, false)
	e.chainAt(30)
	res := e.refund(m.APIKey, inv.ID, "wa", `{"reason":"wrong_asset","destination":"`+payer.Hex()+`"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	r := res.json(t)
	require.Equal(t, "12500000", r["amount"])
	require.Equal(t, "USDC", r["asset"].(map[string]any)["symbol"])
	require.Equal(t, "12.5", r["amount_formatted"])

	late := e.mustCreate(m.APIKey, "l", `{"amount_wei":"1000000000000000000"}`)
	e.paid(late.ID, "700", 11, nil, false, true)
	e.chainAt(40)
	res = e.refund(m.APIKey, late.ID, "lp", `{"reason":"late_payment","destination":"`+payer.Hex()+`"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, "700", res.json(t)["amount"])
}

// Without a destination, a claim link: the payer reads the refund with its
// token and names an address once; addresses of the service are refused.
func TestRefund_ClaimLink_PayerNamesTheDestinationOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	inv := e.paidInvoice(m, "1200000000000000000")
	res := e.refund(m.APIKey, inv.ID, "c", `{"reason":"overpayment"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	r := res.json(t)
	require.Equal(t, "AWAITING_DESTINATION", r["status"])
	require.Nil(t, r["destination"], "never the address the payment came from")
	claim := r["claim_url"].(string)
	require.True(t, strings.HasPrefix(claim, "https://pay.example.com/claim#"), claim)
	token := claim[strings.Index(claim, "#")+1:]
	id := int64(r["id"].(float64))
	got := e.do("GET", fmt.Sprintf("/v1/refunds/%d", id), m.APIKey, "")
	require.NotContains(t, string(got.Body), token, "the token is shown once")

	pub := e.do("GET", "/v1/public/refund", token, "")
	require.Equal(t, http.StatusOK, pub.Status, "%s", pub.Body)
	v := pub.json(t)
	require.Equal(t, "200000000000000000", v["amount"])
	require.Equal(t, "shop", v["merchant_name"])
	requireProblem(t, e.do("GET", "/v1/public/refund", "AAAAAAAAAAAAAAAAAAAAAA", ""), http.StatusUnauthorized, "unauthorized", "")

	requireProblem(t, e.do("POST", "/v1/public/refund/destination", token, `{"destination":"`+inv.DepositAddress.Hex()+`"}`),
		http.StatusUnprocessableEntity, "destination_reserved", "destination")
	requireProblem(t, e.do("POST", "/v1/public/refund/destination", token, `{"destination":"0x90f79bf6eb2c4f870365e785982e1f101e93B906"}`),
		http.StatusBadRequest, "invalid_address", "destination")
	ok := e.do("POST", "/v1/public/refund/destination", token, `{"destination":"`+payer.Hex()+`"}`)
	require.Equal(t, http.StatusOK, ok.Status, "%s", ok.Body)
	require.Equal(t, "QUEUED", ok.json(t)["status"])
	requireProblem(t, e.do("POST", "/v1/public/refund/destination", token, `{"destination":"`+payer.Hex()+`"}`),
		http.StatusConflict, "state_conflict", "")

	evs, err := e.st.ListEventsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	var types []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.Type, "refund.") {
			types = append(types, ev.Type)
		}
	}
	require.Equal(t, []string{"refund.created", "refund.awaiting_destination"}, types)
}

// Above the threshold a refund waits for a second key with approve.
func TestRefund_AboveThreshold_ApprovedByASecondKeyOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	res := e.do("PUT", "/v1/merchant/payout-settings", m.APIKey, `{"assets":[{"asset":"ETH","approval_threshold":"100000000000000000"}]}`)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	inv := e.paidInvoice(m, "1000000000000000000")
	refunder, _ := e.scopedKey(m.APIKey, store.ScopeRefunds, store.ScopeApprove)
	approver, approverID := e.scopedKey(m.APIKey, store.ScopeApprove, store.ScopeRead)

	small := e.refund(refunder, inv.ID, "s", `{"amount":"100000000000000000","destination":"`+payer.Hex()+`"}`)
	require.Equal(t, "QUEUED", small.json(t)["status"], "at the threshold: no approval")
	big := e.refund(refunder, inv.ID, "b", `{"amount":"100000000000000001","destination":"`+payer.Hex()+`"}`)
	require.Equal(t, http.StatusCreated, big.Status, "%s", big.Body)
	b := big.json(t)
	require.Equal(t, "AWAITING_APPROVAL", b["status"])
	require.Equal(t, true, b["needs_approval"])
	id := int64(b["id"].(float64))
	requireProblem(t, e.do("POST", fmt.Sprintf("/v1/refunds/%d/approve", id), refunder, ""), http.StatusForbidden, "approval_same_key", "")
	ok := e.do("POST", fmt.Sprintf("/v1/refunds/%d/approve", id), approver, "")
	require.Equal(t, http.StatusOK, ok.Status, "%s", ok.Body)
	a := ok.json(t)
	require.Equal(t, "QUEUED", a["status"])
	require.EqualValues(t, approverID, a["approved_by_key_id"])
	requireProblem(t, e.do("POST", fmt.Sprintf("/v1/refunds/%d/approve", id), approver, ""), http.StatusConflict, "state_conflict", "")

	// Merchant-paid refunds move nothing of the service's: no approval.
	mp := e.refund(refunder, inv.ID, "m", `{"amount":"200000000000000000","destination":"`+payer.Hex()+`","paid_by":"merchant"}`)
	require.Equal(t, http.StatusCreated, mp.Status, "%s", mp.Body)
	v := mp.json(t)
	require.Equal(t, "AWAITING_PAYMENT", v["status"])
	require.Equal(t, "ethereum:"+payer.Hex()+"@1337?value=200000000000000000", v["payment_uri"])
	qr := e.do("GET", fmt.Sprintf("/v1/refunds/%d/qr.svg", int64(v["id"].(float64))), m.APIKey, "")
	require.Equal(t, http.StatusOK, qr.Status)
	require.Equal(t, "image/svg+xml", qr.Header.Get("Content-Type"))
}

func TestPayouts_BatchEachItemIdempotent_LimitsAndAllowlist(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	allowed := common.HexToAddress("0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65")
	res := e.do("PUT", "/v1/merchant/payout-settings", m.APIKey, `{"assets":[{"asset":"ETH","daily_limit":"3000"}],"allowlist_enabled":true,"allowlist":["`+
		allowed.Hex()+`","`+payer.Hex()+`"]}`)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	batch := `{"items":[
		{"idempotency_key":"a","amount":"1000","destination":"` + allowed.Hex() + `","reference":"supplier 1"},
		{"idempotency_key":"b","amount":"1000","destination":"` + payer.Hex() + `"},
		{"idempotency_key":"c","amount":"1","destination":"0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc"},
		{"idempotency_key":"d","amount":"1001","destination":"` + allowed.Hex() + `"}]}`
	res = e.do("POST", "/v1/payouts", m.APIKey, batch)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var out struct {
		BatchID string `json:"batch_id"`
		Items   []struct {
			IdempotencyKey string         `json:"idempotency_key"`
			Status         int            `json:"status"`
			Replayed       bool           `json:"replayed"`
			Payout         map[string]any `json:"payout"`
			Problem        map[string]any `json:"problem"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &out))
	require.Equal(t, []int{201, 201, 422, 422}, []int{out.Items[0].Status, out.Items[1].Status, out.Items[2].Status, out.Items[3].Status})
	require.Equal(t, "destination_not_allowed", out.Items[2].Problem["code"])
	require.Equal(t, "limit_exceeded", out.Items[3].Problem["code"], "1000 + 1000 + 1001 is above 3000 in 24 hours")
	require.Equal(t, out.BatchID, out.Items[0].Payout["batch_id"])
	batchID := out.BatchID

	// Sent again: the items made are replayed, nothing is made twice.
	res = e.do("POST", "/v1/payouts", m.APIKey, batch)
	require.Equal(t, http.StatusOK, res.Status)
	require.NoError(t, json.Unmarshal(res.Body, &out))
	require.True(t, out.Items[0].Replayed)
	require.True(t, out.Items[1].Replayed)
	require.Equal(t, batchID, out.Items[0].Payout["batch_id"], "a replayed item keeps its first batch")
	os, err := e.st.ListOutbounds(ctx, store.OutboundFilter{MerchantID: m.ID, Kind: store.OutboundPayout})
	require.NoError(t, err)
	require.Len(t, os, 2)

	// One payout, with the header's key; the batch filter lists the batch.
	one := e.do("POST", "/v1/payouts", m.APIKey, `{"amount":"999","destination":"`+payer.Hex()+`"}`, "Idempotency-Key", "single")
	require.Equal(t, http.StatusCreated, one.Status, "%s", one.Body)
	requireProblem(t, e.do("POST", "/v1/payouts", m.APIKey, `{"amount":"2","destination":"`+payer.Hex()+`"}`, "Idempotency-Key", "x"),
		http.StatusUnprocessableEntity, "limit_exceeded", "amount")
	list := e.do("GET", "/v1/payouts?batch_id="+batchID, m.APIKey, "")
	require.Equal(t, http.StatusOK, list.Status)
	require.Len(t, list.json(t)["data"], 2)
}

// A refund asked for in fiat at the current rate is converted with the
// pricer, rounded up; an invoice priced in its asset has no locked quote.
func TestRefund_InFiat_CurrentRateConverted_NoLockedQuoteOnAnAssetInvoice(t *testing.T) {
	t.Parallel()
	now := func() time.Time { return t0 }
	pr, err := pricing.New([]pricing.Source{pricing.NewFixed("dev", pricing.DevRates, now)},
		pricing.Config{Assets: []string{"ETH"}, MinSources: 1, Now: now})
	require.NoError(t, err)
	require.NoError(t, pr.Refresh(ctx))
	e := newEnv(t, func(c *invoice.Config) { c.Pricer = pr })
	m := e.newMerchant()
	inv := e.paidInvoice(m, "1000000000000000000")
	res := e.refund(m.APIKey, inv.ID, "f", `{"fiat":{"amount":"25.00","currency":"USD","rate":"current"},"destination":"`+payer.Hex()+`"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	r := res.json(t)
	require.Equal(t, "10000000000000000", r["amount"], "25 USD at 2,500 USD per coin")
	f := r["fiat"].(map[string]any)
	require.Equal(t, "25.00", f["amount"])
	require.Equal(t, "current", f["rate_kind"])
	requireProblem(t, e.refund(m.APIKey, inv.ID, "l", `{"fiat":{"amount":"1.00","currency":"USD"},"destination":"`+payer.Hex()+`"}`),
		http.StatusUnprocessableEntity, "fiat_unavailable", "fiat")
}

// A fiat invoice's refund in fiat at the locked quote uses the rate the
// invoice was created at, whatever the market did since; "current" uses
// today's. Only the locked quote's currency can be refunded "locked".
func TestRefund_InFiat_LockedQuoteOfAFiatInvoice(t *testing.T) {
	t.Parallel()
	f := newFiatEnv(t, newSQLite(t))
	m := f.newMerchant()
	body := f.mustCreateJSON(m.APIKey, "fl-1", `{"price":{"amount":"49.90","currency":"EUR"},"accept":["eth"]}`)
	id := int64(body["id"].(float64))
	require.Equal(t, "24950000000000000", body["amount"], "49.90 EUR at 2,000 EUR per ETH")
	f.paid(id, "24950000000000000", 10, nil, false, false)
	f.chainAt(30)

	// The coin doubles: 1 ETH = 5,000 USD = 4,000 EUR.
	doubled := maps.Clone(pricing.DevRates)
	doubled[pricing.Pair{Base: "ETH", Quote: "USD"}] = store.MustParseDecimal("5000")
	for _, s := range f.sources {
		s.src = pricing.NewFixed(s.name, doubled, f.clock.Now)
	}
	f.refresh()

	locked := f.refund(m.APIKey, id, "l", `{"fiat":{"amount":"10.00","currency":"EUR","rate":"locked"},"destination":"`+payer.Hex()+`"}`)
	require.Equal(t, http.StatusCreated, locked.Status, "%s", locked.Body)
	require.Equal(t, "5000000000000000", locked.json(t)["amount"], "10 EUR at the locked 2,000 EUR per ETH")
	require.Equal(t, "locked", locked.json(t)["fiat"].(map[string]any)["rate_kind"])

	current := f.refund(m.APIKey, id, "c", `{"fiat":{"amount":"10.00","currency":"EUR","rate":"current"},"destination":"`+payer.Hex()+`"}`)
	require.Equal(t, http.StatusCreated, current.Status, "%s", current.Body)
	require.Equal(t, "2500000000000000", current.json(t)["amount"], "10 EUR at today's 4,000 EUR per ETH")

	requireProblem(t, f.refund(m.APIKey, id, "u", `{"fiat":{"amount":"1.00","currency":"USD","rate":"locked"},"destination":"`+payer.Hex()+`"}`),
		http.StatusUnprocessableEntity, "fiat_unavailable", "fiat")
	// Never above what was received, in fiat too: 49.90 EUR less the 15 EUR
	// worth refunded leaves less than 40 EUR at the locked quote.
	requireProblem(t, f.refund(m.APIKey, id, "x", `{"fiat":{"amount":"40.00","currency":"EUR","rate":"locked"},"destination":"`+payer.Hex()+`"}`),
		http.StatusUnprocessableEntity, "refund_exceeds_received", "fiat")
}

// A fiat invoice accepts every quoted asset: its overpayment is the value
// above the price at the locked quotes, refunded in the asset of the latest
// payment unless named; late and wrong-asset refunds find their asset.
func TestRefund_FiatInvoiceShortcuts(t *testing.T) {
	t.Parallel()
	f := newFiatEnv(t, newSQLite(t))
	m := f.newMerchant()
	dest := `,"destination":"` + payer.Hex() + `"}`
	create := func(key, accept string) int64 {
		return int64(f.mustCreateJSON(m.APIKey, key, `{"price":{"amount":"49.90","currency":"EUR"},"accept":`+accept+`}`)["id"].(float64))
	}
	// 0.02 ETH (40.00 EUR) and 15 USDC (12.00 EUR): 2.10 EUR over the price.
	over := create("o", `["eth","usdc"]`)
	f.paid(over, "20000000000000000", 10, nil, false, false)
	f.paid(over, "15000000", 11, &usdcAddr, false, false)
	// Paid in full in ETH, then 5 USDC after the window.
	late := create("l", `["eth","usdc"]`)
	f.paid(late, "24950000000000000", 10, nil, false, false)
	f.paid(late, "5000000", 12, &usdcAddr, false, true)
	// Only ETH accepted; 12.5 USDC arrived.
	wrong := create("w", `["eth"]`)
	f.paid(wrong, "12500000", 10, &usdcAddr, true, false)
	f.chainAt(30)

	res := f.refund(m.APIKey, over, "o1", `{"reason":"overpayment"`+dest)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	r := res.json(t)
	require.Equal(t, "USDC", r["asset"].(map[string]any)["symbol"], "the asset of the latest payment")
	require.Equal(t, "2625000", r["amount"], "2.10 EUR at 0.80 EUR per USDC")
	requireProblem(t, f.refund(m.APIKey, over, "o2", `{"reason":"overpayment","asset":"ETH"`+dest),
		http.StatusUnprocessableEntity, "nothing_to_refund", "")

	// A full refund names its asset when two arrived; with one, it is found.
	requireProblem(t, f.refund(m.APIKey, over, "f0", `{"reason":"full"`+dest), http.StatusUnprocessableEntity, "nothing_to_refund", "asset")
	res = f.refund(m.APIKey, late, "l1", `{"reason":"late_payment"`+dest)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, "5000000", res.json(t)["amount"])
	require.Equal(t, "USDC", res.json(t)["asset"].(map[string]any)["symbol"])

	requireProblem(t, f.refund(m.APIKey, wrong, "w0", `{"reason":"wrong_asset","asset":"ETH"`+dest),
		http.StatusBadRequest, "invalid_field", "asset")
	res = f.refund(m.APIKey, wrong, "w1", `{"reason":"wrong_asset"`+dest)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, "12500000", res.json(t)["amount"])

	// The fourth invoice's deposit address is payer's (the test mnemonic's
	// fourth account): its refund goes elsewhere.
	paidInETH := create("e", `["usdc","eth"]`)
	f.paid(paidInETH, "24950000000000000", 10, nil, false, false)
	f.chainAt(31)
	res = f.refund(m.APIKey, paidInETH, "f1", `{"reason":"full","destination":"0x2546BcD3c84621e976D8185a91A922aE77ECEc30"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, "ETH", res.json(t)["asset"].(map[string]any)["symbol"], "not the first quote's USDC: what arrived")
	require.Equal(t, "24950000000000000", res.json(t)["amount"])
}

// A fiat invoice's ledger entries carry their value at the invoice's locked
// quote of their asset; an asset-priced invoice's carry none.
func TestLedger_FiatInvoiceEntriesValuedAtTheLockedQuote(t *testing.T) {
	t.Parallel()
	f := newFiatEnv(t, newSQLite(t))
	m := f.newMerchant()
	body := f.mustCreateJSON(m.APIKey, "lv-1", `{"price":{"amount":"49.90","currency":"EUR"}}`)
	id := int64(body["id"].(float64))
	f.paid(id, "12475000000000000", 10, nil, false, false) // half in ETH: 24.95 EUR
	f.paid(id, "31187500", 11, &usdcAddr, false, false)    // half in USDC: 24.95 EUR at 0.80
	other := f.mustCreate(m.APIKey, "lv-2", `{"amount_wei":"7"}`)
	f.paid(other.ID, "7", 12, nil, false, false)

	res := f.do("GET", "/v1/ledger?format=jsonl", m.APIKey, "")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var values []string
	for _, line := range strings.Split(strings.TrimSpace(string(res.Body)), "\n") {
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry))
		values = append(values, fmt.Sprint(entry["fiat_currency"], " ", entry["fiat_value"]))
	}
	require.Equal(t, []string{"EUR 24.95", "EUR 24.95", "<nil> <nil>"}, values)
}

func TestLedger_ExportCSVAndJSONLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	inv := e.paidInvoice(m, "1500000000000000000")
	other := e.newMerchant()
	e.paidInvoice(other, "7")
	csv := e.do("GET", "/v1/ledger", m.APIKey, "")
	require.Equal(t, http.StatusOK, csv.Status, "%s", csv.Body)
	require.Equal(t, "text/csv; charset=utf-8", csv.Header.Get("Content-Type"))
	lines := strings.Split(strings.TrimSpace(string(csv.Body)), "\n")
	require.Len(t, lines, 2, "the header and the merchant's one payment: %s", csv.Body)
	require.True(t, strings.HasPrefix(lines[0], "id,kind,at,"))
	require.Contains(t, lines[1], ",payment,")
	require.Contains(t, lines[1], inv.DepositAddress.Hex())
	require.Contains(t, lines[1], ",1500000000000000000,1.5,")

	jl := e.do("GET", "/v1/ledger?format=jsonl&from=2020-01-01T00:00:00Z&to=2100-01-01T00:00:00Z", m.APIKey, "")
	require.Equal(t, http.StatusOK, jl.Status)
	var entry map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(string(jl.Body))), &entry))
	require.Equal(t, "payment", entry["kind"])
	empty := e.do("GET", "/v1/ledger?format=jsonl&to=2000-01-01T00:00:00Z", m.APIKey, "")
	require.Equal(t, http.StatusOK, empty.Status)
	require.Empty(t, empty.Body)
	requireProblem(t, e.do("GET", "/v1/ledger?format=xml", m.APIKey, ""), http.StatusBadRequest, "invalid_parameter", "format")
	requireProblem(t, e.do("GET", "/v1/ledger?from=yesterday", m.APIKey, ""), http.StatusBadRequest, "invalid_parameter", "from")
}

// The OpenAPI document shows every merchant route's scope, from the routes
// table the handlers enforce: {"apiKey": [scope]}.
func TestOpenAPI_EveryMerchantOperationNamesItsScope(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]struct {
			Security []map[string][]string `json:"security"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(invoice.OpenAPI(), &doc))
	for pattern, scope := range invoice.RouteScopes() {
		method, path, _ := strings.Cut(pattern, " ")
		op := doc.Paths[path][strings.ToLower(method)]
		switch scope {
		case "public":
			for _, req := range op.Security {
				require.NotContains(t, req, "apiKey", pattern)
			}
		case "operator":
			require.Equal(t, []map[string][]string{{"operatorToken": {}}}, op.Security, pattern)
		default:
			require.Equal(t, []map[string][]string{{"apiKey": {scope}}}, op.Security, pattern)
		}
	}
}
