package webhook_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/webhook"
)

// syncBuffer is a log sink safe for concurrent writers.
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

func TestLastError_UnknownHostAndPrivateName_SameNeutralClassDetailsInTheLogOnly(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	var logs syncBuffer
	urls := []string{
		"http://localhost:1/x",                    // an internal name: resolves to a private address
		"http://LOCALHOST./x",                     // the same, fully qualified
		"http://no-such-host.invalid/x",           // does not resolve
		"http://evmpay-test-missing.invalid:8443", // nor this one
	}
	events := map[string]store.Event{}
	for _, u := range urls {
		m := newMerchant(t, st, sec, u, secret)
		events[u] = newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	}
	cfg := fastConfig(clk)
	cfg.BlockPrivateNetworks = true
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	start(t, st, sec, cfg)

	var seen []store.Delivery
	for _, u := range urls {
		seen = append(seen, waitDelivery(t, st, deliveryOf(t, st, events[u]).ID, "attempted", attempted(1)))
	}
	for i, d := range seen {
		require.Equal(t, seen[0].LastError, d.LastError, "%s and %s look the same to the merchant", urls[0], urls[i])
		require.Equal(t, seen[0].Status, d.Status, urls[i])
		require.Equal(t, "connection failed: host not found or not a public address", d.LastError, urls[i])
		require.Equal(t, store.DeliveryPending, d.Status, "retried on the ladder: DNS may come back")
		for _, leak := range []string{"lookup", ":53", "no such host", "private", "127.0.0.1", "localhost", "LOCALHOST", ".invalid"} {
			require.NotContains(t, d.LastError, leak)
		}
	}
	require.Contains(t, logs.String(), "lookup no-such-host.invalid", "the operator log has the cause")
	require.Contains(t, logs.String(), "destination address not allowed")
}

func TestDeliveryList_FailedAtFirstAttemptAndExhausted_ShowTheirReason(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, status(http.StatusGone))
	m := newMerchant(t, st, sec, rc.URL, secret)
	gone := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	start(t, st, sec, fastConfig(clk))
	d := waitDelivery(t, st, deliveryOf(t, st, gone).ID, "attempted", attempted(1))
	require.Equal(t, store.DeliveryFailed, d.Status)
	require.Equal(t, 1, d.Attempt, "410 at attempt 1: no retry")
	require.Equal(t, webhook.FailedEndpointBroken, webhook.FailureReason(d, 0))

	exhausted := failedDelivery(t, st, m.ID, clk.Now())
	exhausted.Attempt, exhausted.ResponseStatus, exhausted.LastError = webhook.MaxAttempts, nil, "timeout after 15s"
	require.NoError(t, st.UpdateDelivery(ctx, exhausted))
	require.Equal(t, webhook.FailedAttemptsExhausted, webhook.FailureReason(exhausted, 0))

	a := newAPI(t, st, tokenAuth{"k": m}, clk.Now)
	var list struct {
		Data []struct {
			ID            int64  `json:"id"`
			Status        string `json:"status"`
			FailureReason string `json:"failure_reason"`
		} `json:"data"`
	}
	code, _ := a.do("GET", "/v1/webhook-deliveries?status=failed", "k", "", &list)
	require.Equal(t, http.StatusOK, code)
	reasons := map[int64]string{}
	for _, x := range list.Data {
		reasons[x.ID] = x.FailureReason
	}
	require.Equal(t, map[int64]string{d.ID: webhook.FailedEndpointBroken, exhausted.ID: webhook.FailedAttemptsExhausted}, reasons,
		"every delivery that ended failed is in the failed filter, with its reason")
}

// blippingStore makes the database unavailable to the first fail calls of
// RecordDeliveryAttempts (the real store is untouched by them), as a
// PostgreSQL restart or a network blip between the dispatcher and it.
type blippingStore struct {
	testStore
	fail  int64
	calls atomic.Int64
}

func (b *blippingStore) RecordDeliveryAttempts(ctx ctxT, as []store.DeliveryAttempt) ([]bool, error) {
	if b.calls.Add(1) <= b.fail {
		return nil, fmt.Errorf("%w: read tcp: connection reset by peer", store.ErrUnavailable)
	}
	return b.testStore.RecordDeliveryAttempts(ctx, as)
}

func TestRecordAttempt_DatabaseBlip_RetriedWithinTheLeaseAndSentOnce(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, status(http.StatusOK))
	m := newMerchant(t, st, sec, rc.URL, secret)
	ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	blip := &blippingStore{testStore: st, fail: 3}
	var logs syncBuffer
	cfg := fastConfig(clk)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	start(t, blip, sec, cfg)

	d := waitDelivery(t, st, deliveryOf(t, st, ev).ID, "recorded", attempted(1))
	require.Equal(t, store.DeliveryDelivered, d.Status)
	require.Equal(t, 1, d.Attempt)
	require.EqualValues(t, 4, blip.calls.Load(), "three failures, then recorded")

	// A minute later (the lease long gone) nothing is due: it is not re-sent.
	clk.Add(2 * time.Minute)
	other := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	waitDelivery(t, st, deliveryOf(t, st, other).ID, "a later webhook delivered", attempted(1))
	require.Equal(t, 2, rc.count(), "the acknowledged webhook was sent once, the later one once")
	require.Equal(t, 1, strings.Count(logs.String(), "attempt recorded after retrying"))
}
