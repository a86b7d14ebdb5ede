package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/wait"
	"github.com/evmpay/evmpay/store"
	evmpayapi "github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/store/sqlite"
	"github.com/evmpay/evmpay/store/sqlite/sqlitetest"
	"github.com/evmpay/evmpay/webhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Both stores serve the dispatcher and the API.
var (
	_ webhook.Store           = (*postgres.Store)(nil)
	_ webhook.Store           = (*sqlite.Store)(nil)
	_ webhook.DeliveriesStore = (*postgres.Store)(nil)
	_ webhook.DeliveriesStore = (*sqlite.Store)(nil)
)

var ctx = context.Background()

// testStore is what the tests use of a store: everything the dispatcher
// and the API need, plus set-up.
type testStore interface {
	webhook.Store
	webhook.DeliveriesStore
	store.Store
}

// stores lists the store implementations a test runs against.
var stores = []struct {
	name string
	open func(t *testing.T) testStore
}{
	{"postgres", func(t *testing.T) testStore { return pgtest.New(t) }},
	{"sqlite", func(t *testing.T) testStore { return sqlitetest.New(t) }},
}

// clock is a settable test clock at microsecond precision (what both
// stores keep).
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// secrets is a map-backed webhook.SecretSource.
type secrets struct {
	mu sync.Mutex
	m  map[int64]string
}

func (s *secrets) WebhookSecret(m store.Merchant) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec, ok := s.m[m.ID]
	if !ok {
		return "", errors.New("no secret")
	}
	return sec, nil
}

func (s *secrets) set(id int64, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[int64]string{}
	}
	s.m[id] = secret
}

func newSecret(t testing.TB) string {
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return webhook.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

func randBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

// newMerchant creates a merchant with a webhook URL and registers its
// secret.
func newMerchant(t testing.TB, st store.Tx, sec *secrets, url, secret string) store.Merchant {
	t.Helper()
	m := store.Merchant{
		Name:                    "shop",
		APIKeyDigest:            randBytes(t, 32),
		APIKeyHash:              "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA",
		APIKeyPrefix:            "evmpay_sk_abcdef",
		WebhookURL:              url,
		WebhookSecretCiphertext: randBytes(t, 60),
		SettlementAddress:       common.BytesToAddress(randBytes(t, 20)),
		CreatedAt:               time.Now().UTC(),
		UpdatedAt:               time.Now().UTC(),
	}
	require.NoError(t, st.CreateMerchant(ctx, &m))
	sec.set(m.ID, secret)
	return m
}

// newEvent writes an invoice and its event the way settlement does: in
// one transaction.
func newEvent(t testing.TB, st store.Store, merchantID int64, typ string, at time.Time) store.Event {
	t.Helper()
	var ev store.Event
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		idx, err := tx.NextDerivationIndex(ctx)
		if err != nil {
			return err
		}
		inv := store.Invoice{
			MerchantID:      merchantID,
			Status:          store.StatusPaid,
			AmountWei:       store.MustParseAmount("1500000000000000000"),
			PaidWei:         store.MustParseAmount("1500000000000000000"),
			ChainID:         1337,
			DepositAddress:  common.BytesToAddress(randBytes(t, 20)),
			DerivationIndex: idx,
			PaymentURI:      "ethereum:0x0@1337?value=1500000000000000000",
			OrderID:         "order-1",
			LookupTokenHash: randBytes(t, 32),
			ExpiresAt:       at.Add(15 * time.Minute),
			CreatedAt:       at,
			UpdatedAt:       at,
			SweepStatus:     store.SweepNone,
		}
		if err := tx.CreateInvoice(ctx, &inv); err != nil {
			return err
		}
		ev, err = evmpayapi.InvoiceEvent(typ, inv, at, nil)
		if err != nil {
			return err
		}
		return tx.InsertEvent(ctx, &ev)
	}))
	return ev
}

// request is one webhook a receiver got.
type request struct {
	header   http.Header
	body     []byte
	verified error // webhook.Verify's verdict at receipt
}

// receiver is a real HTTP endpoint that records webhooks and answers as
// told.
type receiver struct {
	*httptest.Server
	t      testing.TB
	secret string
	now    func() time.Time

	mu      sync.Mutex
	reqs    []request
	respond func(n int, w http.ResponseWriter, r *http.Request) // n counts from 1
	release chan struct{}
	once    sync.Once
}

func newReceiver(t testing.TB, secret string, now func() time.Time, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{t: t, secret: secret, now: now, respond: respond, release: make(chan struct{})}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Server.Close)
	t.Cleanup(rc.unblock) // runs first: hung handlers return before Close waits for them
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, request{header: r.Header.Clone(), body: body,
		verified: webhook.Verify(rc.secret, r.Header, body, 0, rc.now())})
	n := len(rc.reqs)
	respond := rc.respond
	rc.mu.Unlock()
	if respond == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	respond(n, w, r)
}

func (rc *receiver) setRespond(f func(n int, w http.ResponseWriter, r *http.Request)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.respond = f
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.reqs...)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

// unblock makes hung requests return.
func (rc *receiver) unblock() { rc.once.Do(func() { close(rc.release) }) }

// hang is a respond function that never answers until the test ends or
// the client gives up.
func (rc *receiver) hang(_ int, w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-rc.release:
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

func status(code int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// start runs a dispatcher until the test ends.
func start(t testing.TB, st webhook.Store, sec webhook.SecretSource, cfg webhook.Config) *webhook.Dispatcher {
	t.Helper()
	d, err := webhook.New(st, sec, cfg)
	require.NoError(t, err)
	stop := run(t, d)
	t.Cleanup(stop)
	return d
}

// run starts d and returns a function that stops it and waits for Run to
// return.
func run(t testing.TB, d *webhook.Dispatcher) (stop func()) {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(rctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
}

// deliveryOf returns the delivery of an event once there is one.
func deliveryOf(t testing.TB, st store.Store, ev store.Event) store.Delivery {
	t.Helper()
	var d store.Delivery
	require.Eventually(t, func() bool {
		ds, err := st.ListDeliveries(ctx, store.DeliveryFilter{MerchantID: ev.MerchantID, Limit: 1000})
		require.NoError(t, err)
		for _, x := range ds {
			if x.EventID == ev.ID {
				d = x
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "no delivery for event %d", ev.ID)
	return d
}

// waitDelivery polls a delivery until cond holds and returns it.
func waitDelivery(t testing.TB, st store.Store, id int64, what string, cond func(store.Delivery) bool) store.Delivery {
	t.Helper()
	// Polled in the test's goroutine (wait.Until) rather than in
	// require.Eventually, whose message arguments are evaluated before the
	// first poll (the "last seen" was always the zero value) and whose
	// poll goroutine may still be writing at the deadline.
	var d store.Delivery
	wait.Poll{Timeout: 15 * time.Second}.Until(t, fmt.Sprintf("delivery %d: %s", id, what), func() (bool, any) {
		var err error
		d, err = st.GetDelivery(ctx, id)
		require.NoError(t, err)
		return cond(d), d
	})
	return d
}

func attempted(n int) func(store.Delivery) bool {
	return func(d store.Delivery) bool { return d.Attempt >= n && d.LockedUntil == nil }
}

// fastConfig is a dispatcher configuration for tests: an injected clock,
// quick polling, no jitter.
func fastConfig(clk *clock) webhook.Config {
	return webhook.Config{Now: clk.Now, PollInterval: 5 * time.Millisecond, Jitter: -1}
}

type ctxT = context.Context

var errSimulatedCrash = errors.New("simulated crash after the response, before the database update")

// attemptCounts reads webhook_attempts_total by outcome.
func attemptCounts(t testing.TB, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "webhook_attempts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// fmtAll prints v every way fmt can.
func fmtAll(v any) string { return fmt.Sprintf("%v %+v %#v %s", v, v, v, v) }
