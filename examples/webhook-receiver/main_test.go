package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/webhook"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

const body = `{"id":"evt_7","type":"invoice.paid","created_at":"2026-11-21T12:00:00Z",` +
	`"data":{"id":12,"status":"PAID","amount_wei":"1500000000000000000","paid_wei":"1500000000000000000","order_id":"A-1"}}`

func post(t *testing.T, h http.Handler, id, sig string, ts time.Time, b string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhooks", strings.NewReader(b))
	req.Header.Set(webhook.HeaderID, id)
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(webhook.HeaderSignature, sig)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestReceiver_VerifiesAndDeduplicates(t *testing.T) {
	var out bytes.Buffer
	rc, err := newReceiver(secret, &out)
	require.NoError(t, err)
	now := time.Now()
	sig, err := webhook.Sign(secret, "evt_7", now, []byte(body))
	require.NoError(t, err)

	require.Equal(t, http.StatusNoContent, post(t, rc, "evt_7", sig, now, body))
	require.Equal(t, http.StatusOK, post(t, rc, "evt_7", sig, now, body), "a retry of a processed webhook")
	require.Equal(t, http.StatusUnauthorized, post(t, rc, "evt_7", sig, now, strings.Replace(body, "PAID", "SETTLED", 1)))
	require.Equal(t, http.StatusUnauthorized, post(t, rc, "evt_7", sig, now.Add(-time.Hour), body))
	require.Equal(t, "evt_7 invoice.paid invoice 12 order \"A-1\" status PAID paid 1500000000000000000/1500000000000000000 wei\n"+
		"evt_7 already processed\n", out.String())

	_, err = newReceiver("", &out)
	require.Error(t, err)
}

// The receiver gets evmpay's own webhooks for an invoice paid on the kit's
// simulated chain, and verifies every one.
func TestReceiver_EvmpaysWebhooksOfAPaidInvoice(t *testing.T) {
	env := evmpaytest.New(t, evmpaytest.Config{Confirmations: 2})
	var out evmpaytest.Output
	h, err := newReceiver(env.WebhookSecret, &out)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	url := srv.URL + "/webhooks"
	_, err = env.Invoices.UpdateMerchant(t.Context(), env.Merchant.ID, invoice.MerchantUpdate{WebhookURL: &url})
	require.NoError(t, err)

	inv := env.CreateInvoice(`{"amount_wei":"1500","order_id":"A-1"}`)
	env.Chain.Pay(inv.PaymentURI)
	env.WaitInvoice(inv.ID, store.StatusSettled)
	out.Wait(t, `invoice.settled invoice 1 order "A-1" status SETTLED paid 1500/1500 wei\n`)
	require.Regexp(t, `^(evt_\d+ invoice.(paid|confirmed|settled) invoice 1 order "A-1" status (PAID|CONFIRMED|SETTLED) paid 1500/1500 wei\n){3}$`, out.String())
}
