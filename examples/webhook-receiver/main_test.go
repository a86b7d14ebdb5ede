package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRun_ServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, func(string) string { return secret }, &out)
	}()
	var url string
	require.Eventually(t, func() bool {
		line, ok := strings.CutPrefix(out.String(), "listening on ")
		url = strings.TrimSpace(line)
		return ok
	}, 5*time.Second, 5*time.Millisecond)

	now := time.Now()
	sig, err := webhook.Sign(secret, "evt_7", now, []byte(body))
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set(webhook.HeaderID, "evt_7")
	req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(webhook.HeaderSignature, sig)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	cancel()
	require.NoError(t, <-done)
	require.Contains(t, out.String(), "evt_7 invoice.paid invoice 12")
}
