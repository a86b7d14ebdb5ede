package invoice_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// BenchmarkPublicInvoice_PaidAwaitingConfirmations measures the read every
// open checkout page makes once a second, in its most expensive state (a
// payment awaiting confirmations: invoice, merchant, payments and the
// indexed head), over HTTP against PostgreSQL, from parallel clients.
//
//	go test -run '^$' -bench PublicInvoice -benchtime 5s ./invoice
func BenchmarkPublicInvoice_PaidAwaitingConfirmations(b *testing.B) {
	st := pgtest.New(b)
	creds, err := invoice.NewCredentials(testSecretKey)
	require.NoError(b, err)
	svc, err := invoice.New(st, creds, testDeriver(b), chainID, invoice.Config{AdminToken: adminToken})
	require.NoError(b, err)
	srv := httptest.NewServer(svc.Handler())
	b.Cleanup(srv.Close)
	post := func(path, token, body string, hdr ...string) map[string]any {
		req, err := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+token)
		if len(hdr) == 2 {
			req.Header.Set(hdr[0], hdr[1])
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		defer res.Body.Close()
		var m map[string]any
		require.NoError(b, json.NewDecoder(res.Body).Decode(&m))
		return m
	}
	m := post("/v1/admin/merchants", adminToken, `{"name":"shop","settlement_address":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}`)
	inv := post("/v1/invoices", m["api_key"].(string), `{"amount_wei":"1000","description":"coffee"}`, "Idempotency-Key", "k")
	token := inv["lookup_token"].(string)
	id := int64(inv["id"].(float64))
	require.NoError(b, st.InsertBlocks(ctx, []store.Block{{Number: 10, Hash: common.HexToHash("0x0a"), IndexedAt: t0},
		{Number: 14, Hash: common.HexToHash("0x0e"), IndexedAt: t0}}, nil))
	require.NoError(b, st.InsertPayment(ctx, &store.Payment{InvoiceID: id, TxHash: common.HexToHash("0x01"),
		LogIndex: store.NativeLogIndex, BlockNumber: 10, AmountWei: store.NewAmount(1000), CreatedAt: t0}))
	stored, err := st.GetInvoice(ctx, id)
	require.NoError(b, err)
	stored.Status, stored.PaidWei = store.StatusPaid, store.NewAmount(1000)
	require.NoError(b, st.UpdateInvoice(ctx, &stored))

	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/public/invoice", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		for pb.Next() {
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"confirmations":4`) {
				b.Errorf("%d %s", res.StatusCode, body)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}
