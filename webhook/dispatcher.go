package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evmpay/evmpay/store"
)

// Store is what a Dispatcher needs from the database. *postgres.Store and
// *sqlite.Store satisfy it.
type Store interface {
	GetMerchant(ctx context.Context, id int64) (store.Merchant, error)
	GetEvents(ctx context.Context, ids []int64) ([]store.Event, error)
	DispatchEvents(ctx context.Context, now, due time.Time, limit int) (int, error)
	ClaimDeliveries(ctx context.Context, c store.DeliveryClaim) ([]store.Delivery, error)
	RenewDeliveryLease(ctx context.Context, id int64, held, until time.Time) (time.Time, error)
	ReleaseDeliveryLease(ctx context.Context, id int64, held time.Time) error
	RecordDeliveryAttempts(ctx context.Context, as []store.DeliveryAttempt) ([]bool, error)
}

// SecretSource opens a merchant's stored webhook secret. The host passes
// *invoice.Credentials.
type SecretSource interface {
	// WebhookSecret returns m's secret, "whsec_" + base64 of the key.
	WebhookSecret(m store.Merchant) (string, error)
}

// EventID is the id of an event as webhooks show it, in the body's "id"
// and the webhook-id header: "evt_" and the event's database id.
func EventID(id int64) string { return "evt_" + strconv.FormatInt(id, 10) }

// Dispatcher turns outbox events into deliveries and delivers them. Any
// number of dispatchers, in any number of processes, may share one
// database: they claim work with leases and never send the same attempt
// twice, except after a crash between sending and recording (delivery is
// at least once; receivers deduplicate on webhook-id).
type Dispatcher struct {
	st       Store
	secrets  SecretSource
	cfg      Config
	client   *http.Client
	rec      *recorder
	met      *metrics
	gatherer prometheus.Gatherer
	log      *slog.Logger
	running  atomic.Bool
	wake     chan struct{}
	wg       sync.WaitGroup // attempts in flight

	mu       sync.Mutex
	lanes    map[int64]*lane // by merchant: the endpoint's claimed work
	down     map[int64]bool  // endpoints whose last attempt timed out or did not connect
	held     int             // deliveries claimed and not yet finished
	inflight int             // attempts running
	stopping bool
	// workCtx is the context of attempts: Run's, without its cancellation,
	// so that attempts in flight finish when Run is stopped.
	workCtx context.Context
	// runCtx is Run's context: retries of a failed recording stop with it.
	runCtx context.Context
}

// lane is the work claimed for one merchant's endpoint.
type lane struct {
	queue     []*job
	running   int  // requests in flight
	recording int  // attempts whose request is over, being recorded
	probing   bool // a request to the endpoint, which is down, is in flight
}

// job is one claimed delivery and what its attempt needs.
type job struct {
	d        store.Delivery
	lease    time.Time // the lease held (the row's locked_until)
	event    store.Event
	merchant store.Merchant
	// missing is set when the event or the merchant no longer exists.
	missing string
	// probe: the one request to an endpoint that is down; notSent: an
	// attempt recorded as failed without a request, because the endpoint
	// is down and a probe is in flight.
	probe, notSent bool
}

// New returns a Dispatcher delivering the events in st, signed with the
// secrets from secrets. Call Run to start it.
func New(st Store, secrets SecretSource, cfg Config) (*Dispatcher, error) {
	if st == nil || secrets == nil {
		return nil, errors.New("webhook: New needs a Store and a SecretSource")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	reg := cfg.Registerer
	var gatherer prometheus.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, gatherer = r, r
	} else if g, ok := reg.(prometheus.Gatherer); ok {
		gatherer = g
	}
	met, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("webhook: registering metrics: %w", err)
	}
	rt := cfg.Transport
	if rt == nil {
		rt = newTransport(cfg.BlockPrivateNetworks, cfg.PerEndpoint)
	}
	return &Dispatcher{
		st:       st,
		secrets:  secrets,
		cfg:      cfg,
		client:   newClient(rt),
		rec:      &recorder{st: st},
		met:      met,
		gatherer: gatherer,
		log:      cfg.Logger,
		wake:     make(chan struct{}, 1),
		lanes:    map[int64]*lane{},
		down:     map[int64]bool{},
	}, nil
}

// Gatherer returns the registry holding the dispatcher's metrics when
// Config.Registerer was nil (or is itself a Gatherer); otherwise nil.
func (d *Dispatcher) Gatherer() prometheus.Gatherer { return d.gatherer }

// Run dispatches new events and delivers due deliveries until ctx is
// cancelled. Then it stops claiming, hands back the deliveries it claimed
// but did not start (another dispatcher may take them at once), waits for
// the attempts in flight (at most Config.Timeout) to finish and be
// recorded, and returns nil. Database errors are logged and retried; they
// do not stop Run. A Dispatcher runs once at a time.
func (d *Dispatcher) Run(ctx context.Context) error {
	if !d.running.CompareAndSwap(false, true) {
		return errors.New("webhook: Dispatcher is already running")
	}
	defer d.running.Store(false)
	d.mu.Lock()
	d.stopping = false
	d.workCtx = context.WithoutCancel(ctx)
	d.runCtx = ctx
	d.mu.Unlock()

	var loops sync.WaitGroup
	loops.Go(func() { d.dispatchLoop(ctx) })
	loops.Go(func() { d.claimLoop(ctx) })
	loops.Wait()

	d.mu.Lock()
	d.stopping = true
	var unstarted []*job
	for mid, l := range d.lanes {
		unstarted = append(unstarted, l.queue...)
		d.held -= len(l.queue)
		l.queue = nil
		if l.running+l.recording == 0 {
			delete(d.lanes, mid)
		}
	}
	d.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, j := range unstarted {
		if err := d.st.ReleaseDeliveryLease(rctx, j.d.ID, j.lease); err != nil {
			d.log.ErrorContext(rctx, "webhook: handing back a claimed delivery", slog.Int64("delivery_id", j.d.ID), slog.Any("error", err))
		}
	}
	d.wg.Wait()
	return nil
}

// signal wakes the claim loop.
func (d *Dispatcher) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// dispatchLoop turns new events into deliveries.
func (d *Dispatcher) dispatchLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		for ctx.Err() == nil {
			now := d.cfg.Now()
			n, err := d.st.DispatchEvents(ctx, now, now.Add(d.cfg.Schedule[0]), d.cfg.BatchSize)
			if err != nil {
				if ctx.Err() == nil {
					d.log.ErrorContext(ctx, "webhook: dispatching events", slog.Any("error", err))
				}
				break
			}
			if n > 0 {
				d.met.dispatched.Add(float64(n))
				d.signal()
			}
			if n < d.cfg.BatchSize {
				break
			}
		}
		timer.Reset(d.cfg.PollInterval)
	}
}

// claimLoop claims due deliveries while there is room for them.
func (d *Dispatcher) claimLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
		}
		for ctx.Err() == nil {
			more, err := d.claim(ctx)
			if err != nil {
				if ctx.Err() == nil {
					d.log.ErrorContext(ctx, "webhook: claiming deliveries", slog.Any("error", err))
				}
				break
			}
			if !more {
				break
			}
		}
		timer.Reset(d.cfg.PollInterval)
	}
}

// depth is how many deliveries of one endpoint may be held (claimed, queued
// or in flight) before the claim loop leaves the endpoint out.
func (d *Dispatcher) depth() int { return 2 * d.cfg.PerEndpoint }

// claim claims one batch of due deliveries and queues them on their
// endpoints' lanes. It reports whether a full batch came back (there may be
// more).
//
// At most 2×Workers deliveries are held at once, and at most about twice
// an endpoint's concurrency per endpoint: endpoints with that much are left
// out of the claim, so a backlog for a slow or dead endpoint stays in the
// database, claimable by other dispatchers, and never crowds out other
// merchants.
func (d *Dispatcher) claim(ctx context.Context) (bool, error) {
	d.mu.Lock()
	room := 2*d.cfg.Workers - d.held
	var exclude []int64
	for mid, l := range d.lanes {
		if len(l.queue)+l.running >= d.depth() {
			exclude = append(exclude, mid)
		}
	}
	d.mu.Unlock()
	if room <= 0 {
		return false, nil
	}
	limit := min(room, d.cfg.BatchSize)
	// The claim and the reads run to completion even when Run is stopped
	// meanwhile: a claim cancelled mid-way may have committed leases whose
	// rows never came back, and they would stay leased for Config.Lease.
	// What a stopped Run claimed is handed back below.
	stopped := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbTimeout)
	defer cancel()
	ds, err := d.st.ClaimDeliveries(ctx, store.DeliveryClaim{
		Now:              d.cfg.Now(),
		Lease:            d.cfg.Lease,
		Limit:            limit,
		PerMerchant:      d.depth(),
		ExcludeMerchants: exclude,
	})
	if err != nil || len(ds) == 0 {
		return false, err
	}
	if stopped.Err() != nil {
		d.release(ctx, ds)
		return false, nil
	}
	jobs, err := d.load(ctx, ds)
	if err != nil {
		d.release(ctx, ds)
		return false, err
	}
	d.mu.Lock()
	for _, j := range jobs {
		l := d.lanes[j.d.MerchantID]
		if l == nil {
			l = &lane{}
			d.lanes[j.d.MerchantID] = l
		}
		l.queue = append(l.queue, j)
	}
	d.held += len(jobs)
	d.schedule()
	d.mu.Unlock()
	// More may be due: the batch was full, or a merchant's cap cut it
	// short (that merchant is now left out, so the next claim reaches the
	// others at once instead of after PollInterval).
	perMerchant := map[int64]int{}
	for _, del := range ds {
		perMerchant[del.MerchantID]++
		if perMerchant[del.MerchantID] >= d.depth() {
			return true, nil
		}
	}
	return len(ds) == limit, nil
}

// load reads the events and merchants of claimed deliveries.
func (d *Dispatcher) load(ctx context.Context, ds []store.Delivery) ([]*job, error) {
	ids := make([]int64, len(ds))
	for i := range ds {
		ids[i] = ds[i].EventID
	}
	evs, err := d.st.GetEvents(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading events: %w", err)
	}
	events := make(map[int64]store.Event, len(evs))
	for _, e := range evs {
		events[e.ID] = e
	}
	merchants := map[int64]*store.Merchant{}
	jobs := make([]*job, len(ds))
	for i, del := range ds {
		j := &job{d: del, lease: *del.LockedUntil}
		jobs[i] = j
		ev, ok := events[del.EventID]
		if !ok {
			j.missing = "event not found"
			continue
		}
		j.event = ev
		m, seen := merchants[del.MerchantID]
		if !seen {
			got, err := d.st.GetMerchant(ctx, del.MerchantID)
			switch {
			case err == nil:
				m = &got
			case !errors.Is(err, store.ErrNotFound):
				return nil, fmt.Errorf("reading merchant %d: %w", del.MerchantID, err)
			}
			merchants[del.MerchantID] = m
		}
		if m == nil {
			j.missing = "merchant not found"
			continue
		}
		j.merchant = *m
	}
	return jobs, nil
}

// release hands claimed deliveries back after a failure to load them.
func (d *Dispatcher) release(ctx context.Context, ds []store.Delivery) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, del := range ds {
		if err := d.st.ReleaseDeliveryLease(ctx, del.ID, *del.LockedUntil); err != nil {
			d.log.ErrorContext(ctx, "webhook: handing back a claimed delivery", slog.Int64("delivery_id", del.ID), slog.Any("error", err))
		}
	}
}

// schedule starts queued attempts while their endpoints and the worker
// pool have room. Called with d.mu held.
//
// An endpoint that answers gets up to PerEndpoint requests at once. One
// that is down (its last attempt timed out or could not connect) gets one
// request, the probe; while the probe is out, its other due deliveries are
// recorded as failed attempts without a request, so that they follow their
// own ladders instead of queueing behind a dead endpoint for hours. The
// first answer, of any status, brings the endpoint back.
func (d *Dispatcher) schedule() {
	if d.stopping {
		return
	}
	for mid, l := range d.lanes { // map order: no endpoint is always first
		for len(l.queue) > 0 {
			if d.inflight >= d.cfg.Workers {
				return
			}
			probe, notSent := false, false
			switch {
			case d.down[mid] && !l.probing:
				probe = true
			case d.down[mid]:
				notSent = true
			}
			if !probe && !notSent && l.running >= d.cfg.PerEndpoint {
				break
			}
			j := l.queue[0]
			j.probe, j.notSent = probe, notSent
			l.probing = l.probing || probe
			l.queue[0] = nil
			l.queue = l.queue[1:]
			l.running++
			d.inflight++
			d.wg.Add(1)
			go d.work(j)
		}
	}
}

// work makes one attempt and frees its slots: the endpoint's as soon as
// the request is over (its result is being recorded, with other attempts'
// results, while the next request to the endpoint runs), the worker's and
// the held delivery's once the result is recorded.
func (d *Dispatcher) work(j *job) {
	defer d.wg.Done()
	d.met.inflight.Inc()
	mid := j.d.MerchantID
	d.attempt(d.workCtx, j, func(res result) {
		d.mu.Lock()
		defer d.mu.Unlock()
		l := d.lanes[mid]
		l.running--
		l.recording++
		if j.probe {
			l.probing = false
		}
		switch {
		case res.unreachable:
			d.down[mid] = true
		case res.status != nil:
			delete(d.down, mid)
		}
		if len(l.queue)+l.running < d.depth() {
			d.signal()
		}
		d.schedule()
	})
	d.met.inflight.Dec()

	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.lanes[mid]
	l.recording--
	d.inflight--
	d.held--
	if len(l.queue)+l.running+l.recording == 0 {
		delete(d.lanes, mid)
	}
	if len(l.queue)+l.running < d.depth() {
		d.signal()
	}
	d.schedule()
}
