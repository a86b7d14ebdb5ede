package webhook_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/webhook"
)

// When Run returns, the dispatcher holds no connection to an endpoint
// open: a host that receives its own webhooks shuts its server down
// without waiting for them (issue #34: Shutdown waited about 5 s for a
// kept-alive or never-used connection).
func TestRun_ReturnsWithNoConnectionLeftOpen(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(2 * time.Millisecond)
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateClosed, http.StateHijacked:
			delete(open, c)
		default:
			open[c] = true
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	m := newMerchant(t, st, sec, srv.URL, secret)
	var last store.Event
	for range 20 {
		last = newEvent(t, st, m.ID, store.EventInvoicePaid, clk.Now())
	}
	cfg := fastConfig(clk)
	cfg.PerEndpoint = 4
	d, err := webhook.New(st, sec, cfg)
	require.NoError(t, err)
	stop := run(t, d)
	waitDelivery(t, st, deliveryOf(t, st, last).ID, "delivered", attempted(1))
	mu.Lock()
	require.NotEmpty(t, open, "connections were kept alive while it ran")
	mu.Unlock()
	stop()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(open) == 0
	}, 5*time.Second, 5*time.Millisecond, "every connection closed once Run returned (a kept-alive one stays open 90 s otherwise)")
}
