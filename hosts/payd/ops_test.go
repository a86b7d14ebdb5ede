package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/webhook"
)

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// failDelivery makes one delivery of a new event end FAILED after attempts.
func failDelivery(t *testing.T, st store.Store, merchantID int64, attempts int, status *int) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	var ev store.Event
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		idx, err := tx.NextDerivationIndex(ctx)
		if err != nil {
			return err
		}
		inv := store.Invoice{MerchantID: merchantID, Status: store.StatusPaid, AmountWei: store.NewAmount(1), PaidWei: store.NewAmount(1),
			ChainID: 1337, DepositAddress: common.BytesToAddress(randomBytes(20)), DerivationIndex: idx, PaymentURI: "ethereum:x",
			LookupTokenHash: randomBytes(32), ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now, SweepStatus: store.SweepNone}
		if err := tx.CreateInvoice(ctx, &inv); err != nil {
			return err
		}
		if ev, err = api.InvoiceEvent(store.EventInvoicePaid, inv, now, nil); err != nil {
			return err
		}
		return tx.InsertEvent(ctx, &ev)
	}))
	_, err := st.DispatchEvents(ctx, now, now, 100)
	require.NoError(t, err)
	ds, err := st.ListDeliveries(ctx, store.DeliveryFilter{MerchantID: merchantID, Limit: 100})
	require.NoError(t, err)
	for _, d := range ds {
		if d.EventID == ev.ID {
			d.Status, d.Attempt, d.ResponseStatus, d.LastAttemptAt = store.DeliveryFailed, attempts, status, &now
			require.NoError(t, st.UpdateDelivery(ctx, d))
			return
		}
	}
	t.Fatal("no delivery")
}

func TestAdminStatus_DeliveryRefusedAtFirstAttempt_CountedByReasonAndUnhealthy(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	m := store.Merchant{Name: "shop", APIKeyDigest: randomBytes(32), APIKeyHash: "x", APIKeyPrefix: "sk", WebhookURL: "https://example.com/h",
		WebhookSecretCiphertext: randomBytes(40), CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	require.NoError(t, st.CreateMerchant(context.Background(), &m))
	gone := http.StatusGone
	failDelivery(t, st, m.ID, 1, &gone)                 // 410 at attempt 1: the endpoint is broken
	failDelivery(t, st, m.ID, webhook.MaxAttempts, nil) // timeouts all the way

	a := &app{st: st, adminToken: "op-token", reg: prometheus.NewRegistry(), mux: httpapi.NewMux()}
	req := httptest.NewRequest(http.MethodGet, "/v1/admin/status", nil)
	req.Header.Set("Authorization", "Bearer op-token")
	rec := httptest.NewRecorder()
	a.serveStatus(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var rep statusReport
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &rep))
	require.False(t, rep.Healthy)
	require.EqualValues(t, 2, rep.FailedDeliveries, "every delivery that ended failed")
	require.Equal(t, map[string]int64{webhook.FailedEndpointBroken: 1, webhook.FailedAttemptsExhausted: 1}, rep.FailedByReason)

	a.reg.MustRegister(&dbCollector{st: st})
	families, err := a.reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "evmpay_webhook_deliveries_failed_final" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetName()+"="+m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	require.Equal(t, map[string]float64{"reason=endpoint_broken": 1, "reason=attempts_exhausted": 1}, got)
}
