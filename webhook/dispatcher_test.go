package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	evmpayapi "github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/webhook"
)

func TestDeliver_SignedStandardWebhook(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			st := s.open(t)
			clk, sec, secret := newClock(), &secrets{}, newSecret(t)
			rc := newReceiver(t, secret, clk.Now, nil)
			m := newMerchant(t, st, sec, rc.URL+"/hooks?src=evmpay", secret)
			ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
			start(t, st, sec, fastConfig(clk))

			d := waitDelivery(t, st, deliveryOf(t, st, ev).ID, "delivered", attempted(1))
			require.Equal(t, store.DeliveryDelivered, d.Status)
			require.True(t, d.Delivered)
			require.Equal(t, 1, d.Attempt)
			require.Equal(t, http.StatusNoContent, *d.ResponseStatus)
			require.Nil(t, d.NextAttemptAt)
			require.Empty(t, d.LastError)
			require.True(t, clk.Now().Equal(*d.LastAttemptAt))

			reqs := rc.requests()
			require.Len(t, reqs, 1)
			r := reqs[0]
			require.NoError(t, r.verified, "the receiver helper accepts the signature")
			require.Equal(t, "evt_"+strconv.FormatInt(ev.ID, 10), r.header.Get(webhook.HeaderID))
			require.Equal(t, strconv.FormatInt(clk.Now().Unix(), 10), r.header.Get(webhook.HeaderTimestamp))
			require.Equal(t, "application/json", r.header.Get("Content-Type"))
			require.True(t, strings.HasPrefix(r.header.Get(webhook.HeaderSignature), "v1,"))

			var body struct {
				ID        string          `json:"id"`
				Type      string          `json:"type"`
				CreatedAt time.Time       `json:"created_at"`
				Data      json.RawMessage `json:"data"`
			}
			require.NoError(t, json.Unmarshal(r.body, &body))
			require.Equal(t, webhook.EventID(ev.ID), body.ID)
			require.Equal(t, store.EventInvoicePaid, body.Type)
			require.True(t, ev.CreatedAt.Equal(body.CreatedAt))
			require.JSONEq(t, string(ev.Data), string(body.Data), "data is the invoice snapshot")
			require.NotContains(t, string(r.body), "lookup_token")
			var inv evmpayapi.Invoice
			require.NoError(t, json.Unmarshal(body.Data, &inv))
			require.Equal(t, ev.InvoiceID, inv.ID)
			require.Equal(t, "1500000000000000000", inv.Amount.String())
			require.Equal(t, "1500000000000000000", inv.AmountWei.String())

			require.Error(t, webhook.Verify(newSecret(t), r.header, r.body, 0, clk.Now()), "another secret does not verify")
		})
	}
}

// walkLadder follows a delivery that keeps failing: after each attempt it
// checks the delay to the next one with wantDelay, moves the clock there,
// and stops when the delivery is no longer PENDING. It returns the
// delivery as recorded after each attempt.
func walkLadder(t *testing.T, st store.Store, clk *clock, id int64, wantDelay func(attempt int) time.Duration) []store.Delivery {
	t.Helper()
	var seen []store.Delivery
	for k := 1; k <= 20; k++ {
		d := waitDelivery(t, st, id, fmt.Sprintf("attempt %d recorded", k), attempted(k))
		require.Equal(t, k, d.Attempt)
		require.True(t, clk.Now().Equal(*d.LastAttemptAt), "attempt %d made at the clock's time", k)
		seen = append(seen, d)
		if d.Status != store.DeliveryPending {
			require.Nil(t, d.NextAttemptAt, "a finished delivery has no next attempt")
			return seen
		}
		require.Equal(t, wantDelay(k), d.NextAttemptAt.Sub(d.UpdatedAt), "delay after attempt %d", k)
		clk.Set(*d.NextAttemptAt)
	}
	t.Fatal("the ladder did not end")
	return nil
}

func ladderDelay(attempt int) time.Duration { return webhook.DefaultSchedule()[attempt] }

// requireSameWebhook checks that the receiver got n attempts of one event,
// all signed correctly, at the times the store recorded.
func requireSameWebhook(t *testing.T, rc *receiver, ev store.Event, attempts []store.Delivery) {
	t.Helper()
	reqs := rc.requests()
	require.Len(t, reqs, len(attempts))
	for i, r := range reqs {
		require.NoError(t, r.verified, "attempt %d verifies", i+1)
		require.Equal(t, webhook.EventID(ev.ID), r.header.Get(webhook.HeaderID), "webhook-id is stable across retries")
		require.Equal(t, strconv.FormatInt(attempts[i].LastAttemptAt.Unix(), 10), r.header.Get(webhook.HeaderTimestamp),
			"webhook-timestamp is the attempt's time")
		require.Equal(t, reqs[0].body, r.body, "the body is the same bytes on every attempt")
	}
}

func TestLadder_500_RetriesEightTimesThenFailsPermanently(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			st := s.open(t)
			clk, sec, secret := newClock(), &secrets{}, newSecret(t)
			rc := newReceiver(t, secret, clk.Now, status(http.StatusInternalServerError))
			m := newMerchant(t, st, sec, rc.URL, secret)
			ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
			d := start(t, st, sec, fastConfig(clk))

			seen := walkLadder(t, st, clk, deliveryOf(t, st, ev).ID, ladderDelay)
			require.Len(t, seen, 8, "eight attempts")
			for _, a := range seen {
				require.Equal(t, http.StatusInternalServerError, *a.ResponseStatus)
				require.Equal(t, "HTTP 500", a.LastError)
			}
			last := seen[7]
			require.Equal(t, store.DeliveryFailed, last.Status, "attempt 8 failing fails the delivery for good")
			require.False(t, last.Delivered)
			requireSameWebhook(t, rc, ev, seen)

			n, err := st.CountDeliveries(ctx, store.DeliveryFailed, 8)
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
			require.Equal(t, map[string]float64{"delivered": 0, "retry": 7, "failed": 0, "exhausted": 1},
				attemptCounts(t, d.Gatherer()))
		})
	}
}

func TestLadder_Timeout_RetriesWithNoStatusThenFailsPermanently(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, nil)
	rc.setRespond(rc.hang)
	m := newMerchant(t, st, sec, rc.URL, secret)
	ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	cfg := fastConfig(clk)
	cfg.Timeout = 100 * time.Millisecond
	start(t, st, sec, cfg)

	seen := walkLadder(t, st, clk, deliveryOf(t, st, ev).ID, ladderDelay)
	require.Len(t, seen, 8)
	for _, a := range seen {
		require.Nil(t, a.ResponseStatus, "a timeout records no response status")
		require.Equal(t, "timeout after 100ms", a.LastError)
	}
	require.Equal(t, store.DeliveryFailed, seen[7].Status)
	requireSameWebhook(t, rc, ev, seen)
}

func TestLadder_404_FailsAtOnceWithoutRetry(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			st := s.open(t)
			clk, sec, secret := newClock(), &secrets{}, newSecret(t)
			rc := newReceiver(t, secret, clk.Now, status(http.StatusNotFound))
			m := newMerchant(t, st, sec, rc.URL, secret)
			ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
			start(t, st, sec, fastConfig(clk))

			seen := walkLadder(t, st, clk, deliveryOf(t, st, ev).ID, ladderDelay)
			require.Len(t, seen, 1, "one attempt")
			require.Equal(t, store.DeliveryFailed, seen[0].Status)
			require.Equal(t, http.StatusNotFound, *seen[0].ResponseStatus)
			require.Equal(t, "HTTP 404", seen[0].LastError)

			// Two days later a new event goes out; the failed one was not
			// retried meanwhile.
			clk.Add(48 * time.Hour)
			ev2 := newEvent(t, st, m.ID, store.EventInvoiceConfirmed, clk.Now())
			waitDelivery(t, st, deliveryOf(t, st, ev2).ID, "attempted", attempted(1))
			reqs := rc.requests()
			require.Len(t, reqs, 2)
			require.Equal(t, webhook.EventID(ev2.ID), reqs[1].header.Get(webhook.HeaderID))
		})
	}
}

func TestLadder_429_HonoursRetryAfterButNeverSoonerThanTheLadder(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "600") // longer than the 5 s rung
		case 2:
			w.Header().Set("Retry-After", "1") // shorter than the 5 min rung
		case 3:
			w.Header().Set("Retry-After", clk.Now().Add(2*time.Hour).Format(http.TimeFormat)) // HTTP date
		case 5:
			w.Header().Set("Retry-After", "99999999") // capped at MaxRetryAfter
		case 6:
			w.Header().Set("Retry-After", "soon") // malformed: ignored
		case 7:
			w.Header().Set("Retry-After", clk.Now().Add(-time.Hour).Format(http.TimeFormat)) // past
		}
		w.WriteHeader(http.StatusTooManyRequests)
	})
	m := newMerchant(t, st, sec, rc.URL, secret)
	ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	start(t, st, sec, fastConfig(clk))

	want := map[int]time.Duration{
		1: 600 * time.Second,
		2: 5 * time.Minute,
		3: 2 * time.Hour,
		4: 2 * time.Hour,
		5: 24 * time.Hour,
		6: 10 * time.Hour,
		7: 10 * time.Hour,
	}
	seen := walkLadder(t, st, clk, deliveryOf(t, st, ev).ID, func(k int) time.Duration { return want[k] })
	require.Len(t, seen, 8)
	for _, a := range seen {
		require.Equal(t, http.StatusTooManyRequests, *a.ResponseStatus)
	}
	require.Equal(t, store.DeliveryFailed, seen[7].Status)
	requireSameWebhook(t, rc, ev, seen)
}

func TestLadder_JitterOnlyLengthensDelays(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, status(http.StatusBadGateway))
	m := newMerchant(t, st, sec, rc.URL, secret)
	ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	cfg := fastConfig(clk)
	cfg.Jitter = 0.5
	cfg.MaxAttempts = 4
	start(t, st, sec, cfg)

	id := deliveryOf(t, st, ev).ID
	for k := 1; k < 4; k++ {
		d := waitDelivery(t, st, id, fmt.Sprintf("attempt %d", k), attempted(k))
		got := d.NextAttemptAt.Sub(d.UpdatedAt)
		rung := ladderDelay(k)
		require.GreaterOrEqual(t, got, rung, "jitter never shortens the ladder")
		require.Less(t, got, rung+rung/2+time.Microsecond, "jitter adds at most half")
		clk.Set(*d.NextAttemptAt)
	}
	d := waitDelivery(t, st, id, "attempt 4", attempted(4))
	require.Equal(t, store.DeliveryFailed, d.Status, "MaxAttempts bounds the ladder")
}

func TestClassification_ByResponseStatus(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec := newClock(), &secrets{}
	cases := map[int]string{
		200: store.DeliveryDelivered, 201: store.DeliveryDelivered, 204: store.DeliveryDelivered, 299: store.DeliveryDelivered,
		408: store.DeliveryPending, 429: store.DeliveryPending, 500: store.DeliveryPending, 502: store.DeliveryPending,
		503: store.DeliveryPending, 504: store.DeliveryPending,
		301: store.DeliveryFailed, 302: store.DeliveryFailed, 400: store.DeliveryFailed, 401: store.DeliveryFailed,
		403: store.DeliveryFailed, 404: store.DeliveryFailed, 410: store.DeliveryFailed, 422: store.DeliveryFailed,
	}
	events := map[int]store.Event{}
	for code := range cases {
		secret := newSecret(t)
		rc := newReceiver(t, secret, clk.Now, func(_ int, w http.ResponseWriter, _ *http.Request) {
			if code/100 == 3 {
				w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
			}
			w.WriteHeader(code)
		})
		m := newMerchant(t, st, sec, rc.URL, secret)
		events[code] = newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	}
	start(t, st, sec, fastConfig(clk))
	for code, want := range cases {
		d := waitDelivery(t, st, deliveryOf(t, st, events[code]).ID, "attempted", attempted(1))
		require.Equal(t, want, d.Status, "HTTP %d", code)
		require.Equal(t, code, *d.ResponseStatus)
	}
}

func TestRedirect_IsNotFollowed(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	target := newReceiver(t, secret, clk.Now, nil)
	rc := newReceiver(t, secret, clk.Now, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	})
	m := newMerchant(t, st, sec, rc.URL, secret)
	ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	start(t, st, sec, fastConfig(clk))

	d := waitDelivery(t, st, deliveryOf(t, st, ev).ID, "attempted", attempted(1))
	require.Equal(t, store.DeliveryFailed, d.Status)
	require.Equal(t, http.StatusTemporaryRedirect, *d.ResponseStatus)
	require.Equal(t, "HTTP 307 (redirects are not followed)", d.LastError)
	require.Zero(t, target.count(), "the redirect target got nothing")
}

func TestBadDestinations_FailWithoutRetry(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, nil)
	cases := map[string]string{
		rc.URL:                   "refused: not a public address",
		"":                       "merchant has no webhook_url",
		"ftp://example.com/x":    "webhook_url is not an absolute http or https URL",
		"/relative":              "webhook_url is not an absolute http or https URL",
		"http://[::1]:1/x":       "refused: not a public address",
		"http://169.254.169.254": "refused: not a public address",
		// A name resolving to a private address is retried like an unknown
		// one: TestLastError_UnknownHostAndPrivateName_….
	}
	events := map[string]store.Event{}
	for url := range cases {
		m := newMerchant(t, st, sec, url, secret)
		events[url] = newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	}
	cfg := fastConfig(clk)
	cfg.BlockPrivateNetworks = true
	start(t, st, sec, cfg)
	for url, want := range cases {
		d := waitDelivery(t, st, deliveryOf(t, st, events[url]).ID, "attempted", attempted(1))
		require.Equal(t, store.DeliveryFailed, d.Status, url)
		require.Nil(t, d.ResponseStatus, url)
		require.Equal(t, want, d.LastError, url)
	}
	require.Zero(t, rc.count(), "nothing reached the loopback receiver")
}

func TestNetworkError_RetriesAndHidesTheURL(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, nil)
	rc.Close() // nothing listens there any more
	m := newMerchant(t, st, sec, strings.Replace(rc.URL, "http://", "http://user:hunter2@", 1)+"/hook?token=s3cret", secret)
	ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	start(t, st, sec, fastConfig(clk))

	d := waitDelivery(t, st, deliveryOf(t, st, ev).ID, "attempted", attempted(1))
	require.Equal(t, store.DeliveryPending, d.Status, "a network error is retried")
	require.Nil(t, d.ResponseStatus)
	require.Equal(t, "connection failed", d.LastError)
	require.NotContains(t, d.LastError, "hunter2")
	require.NotContains(t, d.LastError, "s3cret")
	require.LessOrEqual(t, len(d.LastError), 200)
}

func TestLargeResponseBody_IsNotReadToTheEnd(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	chunk := []byte(strings.Repeat("x", 32<<10))
	rc := newReceiver(t, secret, clk.Now, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for r.Context().Err() == nil { // endless: stops when the client hangs up
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	m := newMerchant(t, st, sec, rc.URL, secret)
	ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	cfg := fastConfig(clk)
	cfg.Timeout = time.Minute
	start(t, st, sec, cfg)

	d := waitDelivery(t, st, deliveryOf(t, st, ev).ID, "attempted", attempted(1))
	require.Equal(t, store.DeliveryDelivered, d.Status, "an endless body does not hold the attempt")
}

func TestMissingSecret_IsRetried(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, nil)
	m := newMerchant(t, st, sec, rc.URL, secret)
	sec.set(m.ID, "not base64!")
	ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	start(t, st, sec, fastConfig(clk))

	d := waitDelivery(t, st, deliveryOf(t, st, ev).ID, "attempted", attempted(1))
	require.Equal(t, store.DeliveryPending, d.Status)
	require.Equal(t, "webhook secret unavailable", d.LastError)
	require.Zero(t, rc.count(), "nothing unsigned is sent")

	sec.set(m.ID, secret)
	clk.Set(*d.NextAttemptAt)
	d = waitDelivery(t, st, d.ID, "delivered", attempted(2))
	require.Equal(t, store.DeliveryDelivered, d.Status)
}

func TestHungEndpoint_DoesNotDelayAnotherMerchant(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec := newClock(), &secrets{}
	deadSecret, liveSecret := newSecret(t), newSecret(t)
	dead := newReceiver(t, deadSecret, clk.Now, nil)
	dead.setRespond(dead.hang)
	live := newReceiver(t, liveSecret, clk.Now, nil)
	dm := newMerchant(t, st, sec, dead.URL, deadSecret)
	lm := newMerchant(t, st, sec, live.URL, liveSecret)
	for i := 0; i < 30; i++ { // a backlog for the dead endpoint, older than the live event
		newEvent(t, st, dm.ID, store.EventInvoicePaid, clk.Now())
	}
	cfg := fastConfig(clk)
	cfg.Workers = 4
	cfg.PerEndpoint = 2
	cfg.Timeout = 10 * time.Minute // the dead endpoint holds its requests for the whole test
	stop := run(t, must(webhook.New(st, sec, cfg)))
	defer stop()

	require.Eventually(t, func() bool { return dead.count() == 2 }, 10*time.Second, 5*time.Millisecond,
		"the dead endpoint gets PerEndpoint requests")
	ev := newEvent(t, st, lm.ID, store.EventInvoicePaid, clk.Now())
	d := waitDelivery(t, st, deliveryOf(t, st, ev).ID, "delivered", attempted(1))
	require.Equal(t, store.DeliveryDelivered, d.Status)
	require.Equal(t, 2, dead.count(), "delivered while the dead endpoint still holds its requests")

	ds, err := st.ListDeliveries(ctx, store.DeliveryFilter{MerchantID: dm.ID, Limit: 1000})
	require.NoError(t, err)
	leased := 0
	for _, x := range ds {
		require.Zero(t, x.Attempt, "no dead-endpoint attempt has finished")
		if x.LockedUntil != nil {
			leased++
		}
	}
	// A lane is claimed for while it holds fewer than 2×PerEndpoint, and a
	// claim adds at most 2×PerEndpoint per merchant.
	require.LessOrEqual(t, leased, 4*cfg.PerEndpoint-1,
		"the dead endpoint's backlog stays in the database, claimable by other dispatchers")

	dead.unblock()
	stop()
	ds, err = st.ListDeliveries(ctx, store.DeliveryFilter{MerchantID: dm.ID, Limit: 1000})
	require.NoError(t, err)
	for _, x := range ds {
		require.Nil(t, x.LockedUntil, "Run hands back what it claimed and records what it started")
		if x.Attempt > 0 {
			require.Equal(t, http.StatusServiceUnavailable, *x.ResponseStatus)
		}
	}
}

func TestDeadEndpoint_DeliveriesFollowTheirLaddersWithOneRequestAtATime(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, nil)
	rc.setRespond(rc.hang)
	m := newMerchant(t, st, sec, rc.URL, secret)
	const n = 6
	var ids []int64
	for i := 0; i < n; i++ {
		ids = append(ids, deliveryOfNew(t, st, m.ID, clk))
	}
	cfg := fastConfig(clk)
	cfg.Timeout = 100 * time.Millisecond
	cfg.PerEndpoint = 2
	start(t, st, sec, cfg)

	// Round after round, every due delivery gets its attempt (sent or not)
	// before the clock moves to the next due time.
	for round := 1; round <= 8*n; round++ {
		var next time.Time
		pending := 0
		for _, id := range ids {
			d := waitDelivery(t, st, id, fmt.Sprintf("round %d settled", round), func(d store.Delivery) bool {
				return d.LockedUntil == nil && (d.Status != store.DeliveryPending || d.NextAttemptAt.After(clk.Now()))
			})
			if d.Status == store.DeliveryPending {
				pending++
				if next.IsZero() || d.NextAttemptAt.Before(next) {
					next = *d.NextAttemptAt
				}
			}
		}
		if pending == 0 {
			break
		}
		clk.Set(next)
	}
	notSent := 0
	for _, id := range ids {
		d, err := st.GetDelivery(ctx, id)
		require.NoError(t, err)
		require.Equal(t, store.DeliveryFailed, d.Status, "every delivery ends its ladder")
		require.Equal(t, 8, d.Attempt)
		require.Nil(t, d.ResponseStatus)
		if strings.HasPrefix(d.LastError, "not sent: ") {
			notSent++
		}
	}
	t.Logf("%d attempts, %d requests, %d deliveries ended on a not-sent attempt", n*8, rc.count(), notSent)
	require.Positive(t, notSent, "attempts while a probe is out are not sent")
	require.Less(t, rc.count(), n*8, "far fewer requests than attempts")
	for _, r := range rc.requests() {
		require.NoError(t, r.verified)
	}
}

// deliveryOfNew writes an event and returns the id of its delivery.
func deliveryOfNew(t *testing.T, st store.Store, merchantID int64, clk *clock) int64 {
	ev := newEvent(t, st, merchantID, store.EventInvoicePaid, clk.Now())
	_, err := st.DispatchEvents(ctx, clk.Now(), clk.Now(), 100)
	require.NoError(t, err)
	return deliveryOf(t, st, ev).ID
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// crashingStore fails the first RecordDeliveryAttempts, as a process that
// dies after the receiver answered and before the result reached the
// database.
type crashingStore struct {
	webhook.Store
	once    sync.Once
	crashed chan struct{}
}

func (c *crashingStore) RecordDeliveryAttempts(ctxT, []store.DeliveryAttempt) ([]bool, error) {
	err := errSimulatedCrash
	c.once.Do(func() { close(c.crashed) })
	return nil, err
}

func TestCrashBetweenSendAndRecord_RedeliversTheSameWebhookID(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, status(http.StatusOK))
	m := newMerchant(t, st, sec, rc.URL, secret)
	ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())

	crashing := &crashingStore{Store: st, crashed: make(chan struct{})}
	cfg := fastConfig(clk)
	stop := run(t, must(webhook.New(crashing, sec, cfg)))
	<-crashing.crashed
	stop()

	require.Equal(t, 1, rc.count(), "the receiver got the webhook")
	d := deliveryOf(t, st, ev)
	require.Equal(t, store.DeliveryPending, d.Status, "but the database never heard back")
	require.Zero(t, d.Attempt)
	require.NotNil(t, d.LockedUntil, "the dead process's lease still holds it")

	start(t, st, sec, cfg) // the restarted process
	clk.Set(d.LockedUntil.Add(time.Second))
	d = waitDelivery(t, st, d.ID, "delivered after the restart", attempted(1))
	require.Equal(t, store.DeliveryDelivered, d.Status)
	reqs := rc.requests()
	require.Len(t, reqs, 2, "at least once: sent again")
	for _, r := range reqs {
		require.Equal(t, webhook.EventID(ev.ID), r.header.Get(webhook.HeaderID), "with the same webhook-id")
		require.NoError(t, r.verified)
	}
}

func TestSeveralDispatchers_NeverSendTheSameAttemptTwice(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	sec := &secrets{}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	count := func(_ int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get(webhook.HeaderID)]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}
	const merchants, perMerchant = 3, 60
	for i := 0; i < merchants; i++ {
		secret := newSecret(t)
		rc := newReceiver(t, secret, time.Now, count)
		m := newMerchant(t, st, sec, rc.URL, secret)
		for k := 0; k < perMerchant; k++ {
			newEvent(t, st, m.ID, store.EventInvoicePaid, time.Now())
		}
	}
	for i := 0; i < 3; i++ {
		start(t, st, sec, webhook.Config{PollInterval: 5 * time.Millisecond, BatchSize: 7, PerEndpoint: 2, Workers: 3})
	}
	require.Eventually(t, func() bool {
		n, err := st.CountDeliveries(ctx, store.DeliveryDelivered, 1)
		require.NoError(t, err)
		return n == merchants*perMerchant
	}, 30*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, merchants*perMerchant)
	for id, n := range seen {
		require.Equal(t, 1, n, "%s sent %d times", id, n)
	}
}

func TestNew_RejectsBadConfig(t *testing.T) {
	st := stores[1].open(t)
	sec := &secrets{}
	for name, cfg := range map[string]webhook.Config{
		"negative rung":        {Schedule: []time.Duration{0, -time.Second}},
		"jitter above 1":       {Jitter: 1.5},
		"short lease":          {Timeout: time.Minute, Lease: time.Minute},
		"batch too large":      {BatchSize: 5000},
		"nine attempts":        {MaxAttempts: 9},
		"block with transport": {BlockPrivateNetworks: true, Transport: http.DefaultTransport},
	} {
		_, err := webhook.New(st, sec, cfg)
		require.Error(t, err, name)
	}
	_, err := webhook.New(nil, sec, webhook.Config{})
	require.Error(t, err)
	d, err := webhook.New(st, sec, webhook.Config{})
	require.NoError(t, err)
	require.NotNil(t, d.Gatherer())
}

func TestRun_OnceAtATime(t *testing.T) {
	st := stores[1].open(t)
	clk, sec := newClock(), &secrets{}
	m := newMerchant(t, st, sec, "", newSecret(t))
	ev := newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	d := start(t, st, sec, fastConfig(clk))
	deliveryOf(t, st, ev) // the first Run is running
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, d.Run(cancelled), "a second Run while the first runs is refused")
}
