package invoice_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/big"
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// testPNG is a w×h PNG.
func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, x%h, color.RGBA{R: 200, A: 255})
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

func dataURL(ctype string, b []byte) string {
	return "data:" + ctype + ";base64," + base64.StdEncoding.EncodeToString(b)
}

func TestBranding_PutGetAndServedToThePayerWithNosniff(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		other := e.newMerchant()
		inv := e.mustCreate(m.APIKey, "k", `{"amount_wei":"1"}`)
		otherInv := e.mustCreate(other.APIKey, "k", `{"amount_wei":"1"}`)

		got := e.do("GET", "/v1/merchant/branding", m.APIKey, "").json(t)
		require.Equal(t, map[string]any{"accent_color": nil, "logo": nil, "updated_at": nil}, got, "never set")
		require.Equal(t, "{}", string(bytes.TrimSpace(e.do("GET", "/v1/public/invoice/branding", inv.LookupToken, "").Body)))
		requireProblem(t, e.do("GET", "/v1/public/invoice/logo", inv.LookupToken, ""), http.StatusNotFound, "not_found", "")

		logo := testPNG(t, 96, 48)
		res := e.do("PUT", "/v1/merchant/branding", m.APIKey, fmt.Sprintf(`{"accent_color":"#1A7F37","logo":%q}`, dataURL("image/png", logo)))
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		got = res.json(t)
		require.Equal(t, "#1a7f37", got["accent_color"], "stored lower case")
		l := got["logo"].(map[string]any)
		require.Equal(t, "image/png", l["content_type"])
		require.EqualValues(t, len(logo), l["bytes"])
		require.EqualValues(t, 96, l["width"])
		require.EqualValues(t, 48, l["height"])
		require.Equal(t, "https://pay.example.com/v1/public/invoice/logo", l["url"])
		require.Equal(t, got, e.do("GET", "/v1/merchant/branding", m.APIKey, "").json(t))

		pub := e.do("GET", "/v1/public/invoice/branding", inv.LookupToken, "").json(t)
		require.Equal(t, map[string]any{"accent_color": "#1a7f37", "logo_url": "https://pay.example.com/v1/public/invoice/logo"}, pub)
		img := e.do("GET", "/v1/public/invoice/logo", inv.LookupToken, "")
		require.Equal(t, http.StatusOK, img.Status)
		require.Equal(t, logo, img.Body, "the bytes uploaded")
		require.Equal(t, "image/png", img.Header.Get("Content-Type"))
		require.Equal(t, "nosniff", img.Header.Get("X-Content-Type-Options"))
		require.Equal(t, "default-src 'none'; sandbox", img.Header.Get("Content-Security-Policy"))

		// Another merchant's payer sees that merchant's (none).
		require.Equal(t, "{}", string(bytes.TrimSpace(e.do("GET", "/v1/public/invoice/branding", otherInv.LookupToken, "").Body)))
		requireProblem(t, e.do("GET", "/v1/public/invoice/logo", "AAAAAAAAAAAAAAAAAAAAAA", ""), 401, "unauthorized", "")
		requireProblem(t, e.do("GET", "/v1/merchant/branding", "", ""), 401, "unauthorized", "")

		// PUT replaces: without a logo there is none.
		res = e.do("PUT", "/v1/merchant/branding", m.APIKey, `{"accent_color":"#000000"}`)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Nil(t, res.json(t)["logo"])
		requireProblem(t, e.do("GET", "/v1/public/invoice/logo", inv.LookupToken, ""), http.StatusNotFound, "not_found", "")
	})
}

func TestBranding_RefusesScriptsWrongTypesAndOversizedLogos(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	var jpg bytes.Buffer
	require.NoError(t, jpeg.Encode(&jpg, image.NewGray(image.Rect(0, 0, 8, 8)), nil))
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
	html := []byte(`<html><script>alert(1)</script></html>`)
	big := testPNG(t, 1025, 4)
	for name, body := range map[string]string{
		"svg":                   fmt.Sprintf(`{"logo":%q}`, dataURL("image/svg+xml", svg)),
		"html claiming png":     fmt.Sprintf(`{"logo":%q}`, dataURL("image/png", html)),
		"jpeg claiming png":     fmt.Sprintf(`{"logo":%q}`, dataURL("image/png", jpg.Bytes())),
		"truncated png":         fmt.Sprintf(`{"logo":%q}`, dataURL("image/png", testPNG(t, 64, 64)[:60])),
		"too wide":              fmt.Sprintf(`{"logo":%q}`, dataURL("image/png", big)),
		"not base64":            `{"logo":"data:image/png;base64,%%%"}`,
		"not a data url":        `{"logo":"https://cdn.example/logo.png"}`,
		"too many bytes":        fmt.Sprintf(`{"logo":%q}`, dataURL("image/png", append(testPNG(t, 8, 8), make([]byte, 33<<10)...))),
		"gif":                   fmt.Sprintf(`{"logo":%q}`, dataURL("image/gif", []byte("GIF89a"))),
		"accent colour by name": `{"accent_color":"red"}`,
		"accent with alpha":     `{"accent_color":"#11223344"}`,
		"unknown member":        `{"accent":"#112233"}`,
	} {
		res := e.do("PUT", "/v1/merchant/branding", m.APIKey, body)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", name, res.Body)
		code := res.json(t)["code"]
		switch {
		case strings.HasPrefix(name, "accent"):
			require.Equal(t, "invalid_field", code, name)
		case name == "unknown member":
			require.Equal(t, "unknown_field", code, name)
		default:
			require.Equal(t, "invalid_logo", code, name)
			require.Equal(t, "logo", res.json(t)["field"], name)
		}
	}
	res := e.do("PUT", "/v1/merchant/branding", m.APIKey, fmt.Sprintf(`{"logo":%q}`, dataURL("image/jpeg", jpg.Bytes())))
	require.Equal(t, http.StatusOK, res.Status, "a JPEG is a logo: %s", res.Body)
	_, err := e.st.GetMerchantBranding(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnsupportedMediaType, e.do("PUT", "/v1/merchant/branding", m.APIKey, "", "Content-Type", "image/png").Status)
}

func TestPublicInvoice_Receipt_IDTimesAndTheTransactionsThatCount(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		inv := e.mustCreate(m.APIKey, "k", `{"amount_wei":"1000"}`)
		body := e.do("GET", "/v1/public/invoice", inv.LookupToken, "").json(t)
		require.EqualValues(t, inv.ID, body["invoice_id"])
		require.Equal(t, t0.Format("2006-01-02T15:04:05Z07:00"), body["created_at"])
		require.Equal(t, []any{}, body["payments"], "none yet")
		require.NotContains(t, body, "paid_at")

		stored, err := e.st.GetInvoice(ctx, inv.ID)
		require.NoError(t, err)
		pay := func(n uint64, wei string, wrong bool) common.Hash {
			h := common.BigToHash(new(big.Int).SetUint64(n))
			require.NoError(t, e.st.InsertPayment(ctx, &store.Payment{InvoiceID: inv.ID, TxHash: h, LogIndex: store.NativeLogIndex,
				BlockNumber: n, AmountWei: store.MustParseAmount(wei), CreatedAt: t0, WrongAsset: wrong}))
			return h
		}
		first := pay(100, "400", false)
		second := pay(104, "600", false)
		token := common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")
		require.NoError(t, e.st.InsertPayment(ctx, &store.Payment{InvoiceID: inv.ID, TxHash: common.HexToHash("0x77"), LogIndex: 3,
			BlockNumber: 105, AmountWei: store.MustParseAmount("5"), CreatedAt: t0, Token: &token, WrongAsset: true}))
		paidAt := t0.Add(90e9)
		stored.PaidWei, stored.Status, stored.PaidAt = store.MustParseAmount("1000"), store.StatusPaid, &paidAt
		require.NoError(t, e.st.UpdateInvoice(ctx, &stored))

		body = e.do("GET", "/v1/public/invoice", inv.LookupToken, "").json(t)
		require.Equal(t, paidAt.Format("2006-01-02T15:04:05Z07:00"), body["paid_at"])
		ps := body["payments"].([]any)
		require.Len(t, ps, 2, "the wrong-asset payment is not the invoice's")
		require.Equal(t, map[string]any{"chain_id": float64(chainID), "tx_hash": first.Hex(), "amount": "400", "block_number": float64(100),
			"seen_at": t0.Format("2006-01-02T15:04:05Z07:00"), "late": false}, ps[0])
		require.Equal(t, second.Hex(), ps[1].(map[string]any)["tx_hash"])
	})
}
