package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/webhook"
)

// BenchmarkDeliver10k delivers 10,000 events to a local receiver through a
// dispatcher on real PostgreSQL, first alone, then beside a second
// merchant whose endpoint hangs (accepts connections, never answers) and
// has an older backlog of 1,000 events. It reports deliveries per second
// in both cases. Then, in each case (once the dead endpoint is down and its
// backlog has moved up the ladder), it sends 200 single events one after
// another and reports the p50 and p99 of the time from a delivery's
// creation to its arrival at the receiver: the delay a dead endpoint adds
// to another merchant's webhooks is the difference.
//
// The dispatcher has the default configuration but a 20 ms PollInterval,
// so that the probe measures scheduling rather than polling. cpu_us is the
// CPU time (user + system) of the test process per delivery while the
// 10,000 are delivered: the dispatcher and the receiver, not the database.
//
//	go test -run '^$' -bench Deliver10k -benchtime 1x -count 5 ./webhook
func BenchmarkDeliver10k(b *testing.B) {
	const events = 10_000
	var alone, withDead scenario
	for i := 0; i < b.N; i++ {
		alone.add(deliverAll(b, events, false))
		withDead.add(deliverAll(b, events, true))
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(events/(alone.took.Seconds()/float64(b.N)), "deliveries/s")
	b.ReportMetric(events/(withDead.took.Seconds()/float64(b.N)), "deliveries/s_dead_endpoint")
	b.ReportMetric(float64(alone.cpu.Microseconds())/float64(events*b.N), "cpu_us/delivery")
	b.ReportMetric(float64(withDead.cpu.Microseconds())/float64(events*b.N), "cpu_us/delivery_dead_endpoint")
	for _, c := range []struct {
		name string
		s    scenario
	}{{"", alone}, {"_dead_endpoint", withDead}} {
		slices.Sort(c.s.probes)
		b.ReportMetric(ms(c.s.probes[len(c.s.probes)/2]), "p50_ms"+c.name)
		b.ReportMetric(ms(c.s.probes[len(c.s.probes)*99/100]), "p99_ms"+c.name)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type scenario struct {
	took   time.Duration
	cpu    time.Duration // the process's CPU time while delivering
	probes []time.Duration
}

func (s *scenario) add(o scenario) {
	s.took += o.took
	s.cpu += o.cpu
	s.probes = append(s.probes, o.probes...)
}

// deliverAll measures one scenario.
func deliverAll(b *testing.B, n int, deadEndpoint bool) scenario {
	b.StopTimer()
	st := pgtest.New(b)
	sec := &secrets{}
	var (
		mu       sync.Mutex
		received = map[string]time.Time{}
		arrived  = make(chan string, 2*n)
	)
	secret := newSecret(b)
	verifier, err := webhook.NewVerifier(secret)
	require.NoError(b, err)
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		if verifier.Verify(r.Header, body) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		id := r.Header.Get(webhook.HeaderID)
		mu.Lock()
		received[id] = at
		mu.Unlock()
		arrived <- id
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

	var deadID int64
	if deadEndpoint {
		dm := newMerchant(b, st, sec, dead.URL, newSecret(b))
		deadID = dm.ID
		insertEvents(b, st, dm.ID, 1000)
	}
	m := newMerchant(b, st, sec, live.URL, secret)
	insertEvents(b, st, m.ID, n)

	d, err := webhook.New(st, sec, webhook.Config{PollInterval: 20 * time.Millisecond})
	require.NoError(b, err)
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.StartTimer()
	began, cpuBefore := time.Now(), processCPU(b)
	go func() { done <- d.Run(rctx) }()
	timeout := time.After(5 * time.Minute)
	for i := 0; i < n; i++ {
		select {
		case <-arrived:
		case <-timeout:
			b.Fatalf("only %d of %d delivered", i, n)
		}
	}
	var s scenario
	s.took, s.cpu = time.Since(began), processCPU(b)-cpuBefore
	b.StopTimer()

	if deadEndpoint {
		// Let the dead endpoint reach its steady state: its first requests
		// timed out, it is down, and its backlog has moved up the ladder
		// (one probe hangs at a time).
		require.Eventually(b, func() bool {
			ds, err := st.ListDeliveries(ctx, store.DeliveryFilter{MerchantID: deadID, Status: store.DeliveryPending, Limit: 1000})
			require.NoError(b, err)
			for _, x := range ds {
				if x.LockedUntil == nil && x.NextAttemptAt.Before(time.Now().Add(time.Minute)) {
					return false
				}
			}
			return true
		}, 2*time.Minute, 100*time.Millisecond)
	}

	// Probes: one event at a time.
	const probes = 200
	for i := 0; i < probes; i++ {
		newEvent(b, st, m.ID, store.EventInvoicePaid, time.Now())
		select {
		case <-arrived:
		case <-timeout:
			b.Fatalf("probe %d not delivered", i)
		}
	}
	ds, err := st.ListDeliveries(ctx, store.DeliveryFilter{MerchantID: m.ID, Limit: probes})
	require.NoError(b, err)
	mu.Lock()
	for _, del := range ds {
		s.probes = append(s.probes, received[webhook.EventID(del.EventID)].Sub(del.CreatedAt))
	}
	mu.Unlock()

	unblock() // let the dead endpoint's requests end so that Run can return
	cancel()
	require.NoError(b, <-done)
	delivered, err := st.CountDeliveries(ctx, store.DeliveryDelivered, 1)
	require.NoError(b, err)
	require.EqualValues(b, n+probes, delivered)
	slices.Sort(s.probes)
	b.Logf("dead endpoint: %v, %d deliveries in %v: %.0f/s; probe p50 %.1f ms, p99 %.1f ms", deadEndpoint, n,
		s.took.Round(time.Millisecond), float64(n)/s.took.Seconds(), ms(s.probes[probes/2]), ms(s.probes[probes*99/100]))
	return s
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

// processCPU returns the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
