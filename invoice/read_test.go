package invoice_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/qrscan"
	"github.com/evmpay/evmpay/store"
)

func TestGetInvoice_OtherMerchantsInvoice_404LikeAMissingOne(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		owner, other := e.newMerchant(), e.newMerchant()
		inv := e.mustCreate(owner.APIKey, "k", oneEther)
		id := fmt.Sprint(inv.ID)

		missing := e.do("GET", "/v1/invoices/999999", other.APIKey, "")
		requireProblem(t, missing, 404, "not_found", "")
		for _, path := range []string{"/v1/invoices/" + id, "/v1/invoices/" + id + "/qr.png", "/v1/invoices/" + id + "/qr.svg"} {
			res := e.do("GET", path, other.APIKey, "")
			requireProblem(t, res, 404, "not_found", "")
			require.Equal(t, missing.Body, res.Body, "not 403, and no hint that it exists")
			require.Equal(t, http.StatusOK, e.do("GET", path, owner.APIKey, "").Status)
		}
		list := e.do("GET", "/v1/invoices", other.APIKey, "")
		require.Equal(t, http.StatusOK, list.Status)
		require.Empty(t, list.json(t)["data"])
		// Nor can the other merchant replay the owner's key into the owner's invoice.
		theirs := e.mustCreate(other.APIKey, "k", oneEther)
		require.NotEqual(t, inv.ID, theirs.ID)

		for _, path := range []string{"/v1/invoices/abc", "/v1/invoices/0", "/v1/invoices/-1", "/v1/invoices/99999999999999999999"} {
			requireProblem(t, e.do("GET", path, owner.APIKey, ""), 404, "not_found", "")
		}
		requireProblem(t, e.do("GET", "/v1/invoices/"+id, "", ""), 401, "unauthorized", "")
	})
}

func TestListInvoices_FiltersAndCursorPagination(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	other := e.newMerchant()
	var ids []int64
	for i := range 7 {
		inv := e.mustCreate(m.APIKey, fmt.Sprintf("k-%d", i), fmt.Sprintf(`{"amount_wei":"%d"}`, i+1))
		ids = append(ids, inv.ID)
		e.mustCreate(other.APIKey, fmt.Sprintf("k-%d", i), oneEther)
		e.clock.Advance(time.Minute)
	}
	// Two of them expire (what settlement would do).
	for _, id := range []int64{ids[1], ids[4]} {
		inv, err := e.st.GetInvoice(ctx, id)
		require.NoError(t, err)
		inv.Status = store.StatusExpired
		require.NoError(t, e.st.UpdateInvoice(ctx, &inv))
	}

	list := func(query string) (got []int64, next string) {
		t.Helper()
		res := e.do("GET", "/v1/invoices"+query, m.APIKey, "")
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		var page struct {
			Data []struct {
				ID       int64  `json:"id"`
				QRPNGURL string `json:"qr_png_url"`
				Token    string `json:"lookup_token"`
			} `json:"data"`
			HasMore    bool    `json:"has_more"`
			NextCursor *string `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal(res.Body, &page))
		require.Equal(t, page.HasMore, page.NextCursor != nil)
		for _, d := range page.Data {
			require.Empty(t, d.Token, "lookup tokens are never listed")
			require.NotEmpty(t, d.QRPNGURL)
			got = append(got, d.ID)
		}
		if page.NextCursor != nil {
			next = *page.NextCursor
		}
		return got, next
	}
	rev := slices.Clone(ids)
	slices.Reverse(rev)

	all, next := list("")
	require.Equal(t, rev, all, "newest first, only the merchant's own")
	require.Empty(t, next)

	// Walk every page of 3.
	var walked []int64
	page, next := list("?limit=3")
	walked = append(walked, page...)
	for next != "" {
		page, next = list("?limit=3&cursor=" + url.QueryEscape(next))
		walked = append(walked, page...)
	}
	require.Equal(t, rev, walked)

	got, _ := list("?status=EXPIRED")
	require.Equal(t, []int64{ids[4], ids[1]}, got)
	got, _ = list("?status=pending,expired")
	require.Equal(t, rev, got)
	got, _ = list("?status=PAID")
	require.Empty(t, got)

	after := t0.Add(2 * time.Minute).Format(time.RFC3339)
	before := t0.Add(5 * time.Minute).Format(time.RFC3339)
	got, _ = list("?created_after=" + after + "&created_before=" + before)
	require.Equal(t, []int64{ids[4], ids[3], ids[2]}, got, "created_after inclusive, created_before exclusive")
	got, next = list("?created_after=" + after + "&created_before=" + before + "&status=PENDING&limit=1")
	require.Equal(t, []int64{ids[3]}, got)
	got, _ = list("?created_after=" + after + "&created_before=" + before + "&status=PENDING&limit=1&cursor=" + next)
	require.Equal(t, []int64{ids[2]}, got)

	for query, field := range map[string]string{
		"?status=LOST":               "status",
		"?limit=0":                   "limit",
		"?limit=101":                 "limit",
		"?limit=x":                   "limit",
		"?created_after=yesterday":   "created_after",
		"?created_before=2026-01-01": "created_before",
		"?limit=1&limit=2":           "limit",
	} {
		requireProblem(t, e.do("GET", "/v1/invoices"+query, m.APIKey, ""), 400, "invalid_parameter", field)
	}
	requireProblem(t, e.do("GET", "/v1/invoices?cursor=garbage", m.APIKey, ""), 400, "invalid_cursor", "cursor")
	requireProblem(t, e.do("GET", "/v1/invoices?merchant_id=1", m.APIKey, ""), 400, "unknown_parameter", "merchant_id")
}

func TestQRCodes_CarryThePaymentURI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	inv := e.mustCreate(m.APIKey, "k", `{"amount_wei":"2500000000000000000"}`)
	path := strings.TrimPrefix(inv.QRPNGURL, "https://pay.example.com")

	for size, want := range map[string]int{"": 256, "?size=512": 512} {
		res := e.do("GET", path+size, m.APIKey, "")
		require.Equal(t, http.StatusOK, res.Status)
		require.Equal(t, "image/png", res.Header.Get("Content-Type"))
		img, err := png.Decode(bytes.NewReader(res.Body))
		require.NoError(t, err)
		require.Equal(t, want, img.Bounds().Dx())
		sym, err := qrscan.Read(img)
		require.NoError(t, err)
		require.Equal(t, inv.PaymentURI, sym.Text)
		require.GreaterOrEqual(t, sym.Quiet, qrscan.QuietZone)
	}
	requireProblem(t, e.do("GET", path+"?size=10", m.APIKey, ""), 400, "invalid_parameter", "size")
	requireProblem(t, e.do("GET", path+"?color=red", m.APIKey, ""), 400, "unknown_parameter", "color")

	svg := e.do("GET", strings.TrimPrefix(inv.QRSVGURL, "https://pay.example.com"), m.APIKey, "")
	require.Equal(t, http.StatusOK, svg.Status)
	require.Equal(t, "image/svg+xml", svg.Header.Get("Content-Type"))
	require.True(t, bytes.HasPrefix(svg.Body, []byte("<svg")) || bytes.Contains(svg.Body, []byte("<svg ")))
	sym, err := qrscan.ReadSVG(svg.Body)
	require.NoError(t, err)
	require.Equal(t, inv.PaymentURI, sym.Text)
	require.Equal(t, qrscan.QuietZone, sym.Quiet)
}

func TestPublicInvoice_ByLookupToken_PayerViewOnly(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		inv := e.mustCreate(m.APIKey, "k",
			`{"amount_wei":"1500000000000000000","order_id":"secret-order","description":"private note","metadata":{"customer":"alice"}}`)
		res := e.do("GET", "/v1/public/invoice", inv.LookupToken, "")
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		body := res.json(t)
		keys := make([]string, 0, len(body))
		for k := range body {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		require.Equal(t, []string{"amount_wei", "chain_id", "confirmations", "confirmations_required", "created_at", "deposit_address",
			"description", "expires_at", "invoice_id", "merchant_name", "order_id", "overpaid", "paid_late", "paid_wei", "payment_uri",
			"payments", "remaining_payment_uri", "remaining_wei", "status", "underpaid"}, keys,
			"the invoice id, its times and its payments are the payer's receipt; metadata stays the merchant's")
		require.Equal(t, "PENDING", body["status"])
		require.Equal(t, "1500000000000000000", body["amount_wei"])
		require.Equal(t, "0", body["paid_wei"])
		require.Equal(t, inv.PaymentURI, body["payment_uri"])
		require.Equal(t, inv.DepositAddress.Hex(), body["deposit_address"], "EIP-55, as in payment_uri")
		// What the checkout page shows the payer: the merchant's name, and
		// the order id and description the merchant wrote for the payer.
		require.Equal(t, "shop", body["merchant_name"])
		require.Equal(t, "secret-order", body["order_id"])
		require.Equal(t, "private note", body["description"])
		require.Equal(t, "1500000000000000000", body["remaining_wei"])
		require.Equal(t, inv.PaymentURI, body["remaining_payment_uri"])
		require.EqualValues(t, 0, body["confirmations"])
		require.EqualValues(t, 12, body["confirmations_required"])
		for _, private := range []string{"alice", "metadata", "merchant_id", "webhook", "sweep", fmt.Sprint(`"id":`, inv.ID)} {
			require.NotContains(t, string(res.Body), private)
		}

		// Paid totals follow the invoice.
		stored, err := e.st.GetInvoice(ctx, inv.ID)
		require.NoError(t, err)
		stored.PaidWei = store.MustParseAmount("500000000000000000")
		require.NoError(t, e.st.UpdateInvoice(ctx, &stored))
		require.Equal(t, "500000000000000000", e.do("GET", "/v1/public/invoice", inv.LookupToken, "").json(t)["paid_wei"])

		requireProblem(t, e.do("GET", "/v1/public/invoice", "", ""), 401, "unauthorized", "")
		requireProblem(t, e.do("GET", "/v1/public/invoice", "AAAAAAAAAAAAAAAAAAAAAA", ""), 401, "unauthorized", "")
		requireProblem(t, e.do("GET", "/v1/public/invoice", m.APIKey, ""), 401, "unauthorized", "")
		requireProblem(t, e.do("GET", "/v1/invoices/"+fmt.Sprint(inv.ID), inv.LookupToken, ""), 401, "unauthorized", "")
	})
}

func TestPublicHandler_MountsAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	inv := e.mustCreate(m.APIKey, "k", oneEther)
	mux := http.NewServeMux()
	mux.Handle("/v1/public/invoice", e.svc.PublicHandler())
	req, err := http.NewRequest("GET", "/v1/public/invoice", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+inv.LookupToken)
	rec := recorder(mux, req)
	require.Equal(t, http.StatusOK, rec.Code)
	req.Method = "POST"
	rec = recorder(mux, req)
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
}

func TestRoutes_WrongMethod_405Problem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.do("DELETE", "/v1/invoices", "", "")
	requireProblem(t, res, 405, "method_not_allowed", "")
	require.Equal(t, "GET, HEAD, POST", res.Header.Get("Allow"))
	res = e.do("PUT", "/v1/merchant", "", "")
	requireProblem(t, res, 405, "method_not_allowed", "")
	require.Equal(t, "GET, HEAD, PATCH", res.Header.Get("Allow"))
}

func TestRoutes_ShareAMuxWithOtherPackages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := http.NewServeMux()
	e.svc.Routes(mux)
	// What the indexer, webhook and sweep packages register beside it.
	for _, p := range []string{"GET /v1/blocks/{number}", "GET /v1/transactions/{hash}", "GET /v1/webhook-deliveries",
		"POST /v1/webhook-deliveries/{id}/replay", "POST /v1/admin/sweeps/retry", "GET /v1/admin/status", "GET /healthz"} {
		require.NotPanics(t, func() {
			mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) })
		}, p)
	}
	req, err := http.NewRequest("POST", "/v1/admin/sweeps/retry", nil)
	require.NoError(t, err)
	require.Equal(t, 299, recorder(mux, req).Code)
}
