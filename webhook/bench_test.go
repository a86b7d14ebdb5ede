package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/webhook"
)

// BenchmarkDeliver10k delivers 10,000 events to a local receiver through a
// dispatcher with the default configuration on real PostgreSQL, first
// alone, then with a second merchant whose endpoint hangs (accepts and
// never answers) and has an older backlog of 1,000 events. It reports
// deliveries per second in both cases and the time the dead endpoint added.
//
//	go test -run '^$' -bench Deliver10k -benchtime 1x ./webhook
func BenchmarkDeliver10k(b *testing.B) {
	const events = 10_000
	var alone, withDead time.Duration
	for i := 0; i < b.N; i++ {
		alone += deliverAll(b, events, false)
		withDead += deliverAll(b, events, true)
	}
	n := float64(b.N)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(events/(alone.Seconds()/n), "deliveries/s")
	b.ReportMetric(events/(withDead.Seconds()/n), "deliveries/s_with_dead_endpoint")
	b.ReportMetric(float64((withDead-alone).Milliseconds())/n, "ms_added_by_dead_endpoint")
}

// deliverAll returns how long the dispatcher took to get n events to the
// receiver.
func deliverAll(b *testing.B, n int, deadEndpoint bool) time.Duration {
	b.StopTimer()
	st := pgtest.New(b)
	sec := &secrets{}
	var (
		got  atomic.Int64
		all  = make(chan struct{})
		once sync.Once
	)
	secret := newSecret(b)
	verifier, err := webhook.NewVerifier(secret)
	require.NoError(b, err)
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if verifier.Verify(r.Header, body) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if got.Add(1) == int64(n) {
			once.Do(func() { close(all) })
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer live.Close()
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			w.WriteHeader(http.StatusServiceUnavailable)
		case <-r.Context().Done():
		}
	}))
	defer dead.Close()
	defer unblock()

	if deadEndpoint {
		dm := newMerchant(b, st, sec, dead.URL, newSecret(b))
		insertEvents(b, st, dm.ID, 1000)
	}
	m := newMerchant(b, st, sec, live.URL, secret)
	insertEvents(b, st, m.ID, n)

	d, err := webhook.New(st, sec, webhook.Config{})
	require.NoError(b, err)
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.StartTimer()
	began := time.Now()
	go func() { done <- d.Run(rctx) }()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d delivered", got.Load(), n)
	}
	took := time.Since(began)
	b.StopTimer()
	unblock() // let the dead endpoint's requests end so that Run can return
	cancel()
	require.NoError(b, <-done)
	delivered, err := st.CountDeliveries(ctx, store.DeliveryDelivered, 1)
	require.NoError(b, err)
	require.EqualValues(b, n, delivered)
	b.Logf("dead endpoint: %v, %d deliveries in %v: %.0f/s", deadEndpoint, n, took.Round(time.Millisecond), float64(n)/took.Seconds())
	return took
}

// insertEvents writes n events of one invoice in one transaction.
func insertEvents(b *testing.B, st store.Store, merchantID int64, n int) {
	now := time.Now()
	ev := newEvent(b, st, merchantID, store.EventInvoicePaid, now)
	require.NoError(b, st.InTx(ctx, func(tx store.Tx) error {
		for i := 1; i < n; i++ {
			e := ev
			e.ID = 0
			if err := tx.InsertEvent(ctx, &e); err != nil {
				return err
			}
		}
		return nil
	}))
}
