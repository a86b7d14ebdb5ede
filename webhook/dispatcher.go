package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evmpay/evmpay/store"
)

// Store is what a Dispatcher needs from the database. *postgres.Store and
// *sqlite.Store satisfy it.
type Store interface {
	DispatchEvents(ctx context.Context, now, due time.Time, limit int) (int, error)
	ClaimDeliveriesWithEvents(ctx context.Context, c store.DeliveryClaim) ([]store.ClaimedDelivery, error)
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
	// A claim that left the merchants idleExcluded out found nothing due
	// for any other merchant: until othersIdleUntil, or until events are
	// dispatched, a claim that would leave out at least those is not made.
	// See claim.
	idleExcluded    []int64
	othersIdleUntil time.Time
	stopping        bool
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
	// busy holds the subjects (subjectOf) with a request in flight: the
	// next event of the same invoice, refund or payout waits for it, so
	// that one subject's events reach the endpoint in the order they were
	// written (docs/webhook.md, "Ordering").
	busy map[string]bool
	// depth is how many deliveries the endpoint may hold while it answers:
	// 2 × PerEndpoint at first, doubled (up to maxDepth) each time an
	// answer finds fewer than PerEndpoint deliveries queued, back to
	// 2 × PerEndpoint when an attempt times out or cannot connect. See
	// Dispatcher.depthOf.
	depth int
}

// job is one claimed delivery and what its attempt needs.
type job struct {
	d        store.Delivery
	lease    time.Time // the lease held (the row's locked_until)
	event    store.Event
	merchant store.Merchant
	// missing is set when the event or the merchant no longer exists.
	missing string
	// subject is what the event is about (subjectOf).
	subject string
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
	// Nothing is in flight: the kept-alive connections to the endpoints
	// are closed, so that a receiver's own server (a host that receives its
	// webhooks) does not wait for them in its shutdown (issue #34: an idle
	// or never-used connection held http.Server.Shutdown about 5 s).
	d.client.CloseIdleConnections()
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
				d.mu.Lock()
				d.othersIdleUntil = time.Time{} // new deliveries, for anyone
				d.mu.Unlock()
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

// baseDepth is how many deliveries of one endpoint may be held (claimed,
// queued or in flight) before the claim loop leaves the endpoint out,
// unless the endpoint has earned a deeper queue (depthOf).
func (d *Dispatcher) baseDepth() int { return 2 * d.cfg.PerEndpoint }

// maxDepth is the deepest queue an endpoint that answers may earn.
func (d *Dispatcher) maxDepth() int { return 8 * d.cfg.PerEndpoint }

// depthOf is how many deliveries the lane of merchant mid may hold. An
// endpoint that answers faster than one claim per baseDepth deliveries
// refills its queue earns a deeper one (lane.depth), so that a claim, its
// database round trip and its commit are paid for up to maxDepth
// deliveries instead of baseDepth. Only while this dispatcher holds fewer
// than Workers deliveries, though (half of what it may hold): beyond that
// every endpoint is back to baseDepth, so the room left is for other
// merchants; and never for an endpoint that is down.
func (d *Dispatcher) depthOf(mid int64, l *lane) int {
	if l == nil || d.down[mid] || d.held >= d.cfg.Workers {
		return d.baseDepth()
	}
	return max(l.depth, d.baseDepth())
}

// held is how many deliveries the lane holds towards its depth.
func (l *lane) held() int { return len(l.queue) + l.running }

// claim claims one batch of due deliveries and queues them on their
// endpoints' lanes. It reports whether a full batch came back (there may be
// more).
//
// At most 2×Workers deliveries are held at once, and at most about twice
// an endpoint's depth per endpoint (depthOf): endpoints holding their depth
// are left out of the claim, so a backlog for a slow or dead endpoint stays
// in the database, claimable by other dispatchers, and never crowds out
// other merchants. One claim's cap per merchant is the deepest depth of
// the endpoints it may refill, so a merchant this dispatcher holds nothing
// of may get that many at once (at most maxDepth), and is then left out
// until it is below its own depth.
func (d *Dispatcher) claim(ctx context.Context) (bool, error) {
	d.mu.Lock()
	room := 2*d.cfg.Workers - d.held
	var exclude []int64
	per := d.baseDepth()
	for mid, l := range d.lanes {
		if depth := d.depthOf(mid, l); l.held() >= depth {
			exclude = append(exclude, mid)
		} else {
			per = max(per, depth)
		}
	}
	idle := d.othersIdle(exclude)
	d.mu.Unlock()
	if room <= 0 || idle {
		return false, nil
	}
	limit := min(room, d.cfg.BatchSize)
	// The claim runs to completion even when Run is stopped meanwhile: a
	// claim cancelled mid-way may have committed leases whose rows never
	// came back, and they would stay leased for Config.Lease. What a
	// stopped Run claimed is handed back below.
	stopped := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbTimeout)
	defer cancel()
	cs, err := d.st.ClaimDeliveriesWithEvents(ctx, store.DeliveryClaim{
		Now:              d.cfg.Now(),
		Lease:            d.cfg.Lease,
		Limit:            limit,
		PerMerchant:      per,
		ExcludeMerchants: exclude,
	})
	if err == nil && len(cs) == 0 && len(exclude) > 0 {
		d.mu.Lock()
		d.idleExcluded, d.othersIdleUntil = exclude, time.Now().Add(d.cfg.PollInterval)
		d.mu.Unlock()
	}
	if err != nil || len(cs) == 0 {
		return false, err
	}
	if stopped.Err() != nil {
		d.release(ctx, cs)
		return false, nil
	}
	d.mu.Lock()
	for i := range cs {
		j := newJob(cs[i])
		l := d.lanes[j.d.MerchantID]
		if l == nil {
			l = &lane{depth: d.baseDepth()}
			d.lanes[j.d.MerchantID] = l
		}
		l.queue = append(l.queue, j)
	}
	d.held += len(cs)
	d.schedule()
	d.mu.Unlock()
	// More may be due: the batch was full, or a merchant's cap cut it
	// short (that merchant is now left out, so the next claim reaches the
	// others at once instead of after PollInterval).
	perMerchant := map[int64]int{}
	for _, c := range cs {
		perMerchant[c.MerchantID]++
		if perMerchant[c.MerchantID] >= per {
			return true, nil
		}
	}
	return len(cs) == limit, nil
}

// othersIdle reports whether a claim leaving out the merchants exclude
// would find nothing: a claim that left out at most those found nothing
// due for anyone else less than PollInterval ago, and no event was
// dispatched since. Such a claim walks the left-out merchants' due backlog
// to its end (the due index is in time order, not by merchant), and it
// came after most claims of a merchant with a backlog, the claim loop
// woken while that merchant's queue was full. A retry of another merchant
// that falls due meanwhile waits for the next claim, at most PollInterval.
// Called with d.mu held.
func (d *Dispatcher) othersIdle(exclude []int64) bool {
	if len(exclude) == 0 || !time.Now().Before(d.othersIdleUntil) {
		return false
	}
	for _, mid := range d.idleExcluded {
		if !slices.Contains(exclude, mid) {
			return false
		}
	}
	return true
}

// newJob is the job of a claimed delivery.
func newJob(c store.ClaimedDelivery) *job {
	j := &job{d: c.Delivery, lease: *c.LockedUntil}
	switch {
	case c.Event == nil:
		j.missing = "event not found"
	case c.Merchant == nil:
		j.missing = "merchant not found"
	default:
		j.event, j.merchant = *c.Event, *c.Merchant
	}
	j.subject = subjectOf(c.Delivery, j.event)
	return j
}

// subjectOf names what an event is about: its invoice for invoice.*
// events, its refund or payout for refund.* and payout.* ones (the
// outbound's id in its data), the merchant otherwise.
func subjectOf(d store.Delivery, ev store.Event) string {
	kind, _, _ := strings.Cut(d.EventType, ".")
	switch kind {
	case "invoice":
		return "invoice:" + strconv.FormatInt(d.InvoiceID, 10)
	case "refund", "payout":
		var o struct {
			ID int64 `json:"id"`
		}
		if json.Unmarshal(ev.Data, &o) == nil && o.ID != 0 {
			return kind + ":" + strconv.FormatInt(o.ID, 10)
		}
	}
	return kind
}

// release hands claimed deliveries back when Run was stopped during the
// claim.
func (d *Dispatcher) release(ctx context.Context, cs []store.ClaimedDelivery) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, c := range cs {
		if err := d.st.ReleaseDeliveryLease(ctx, c.ID, *c.LockedUntil); err != nil {
			d.log.ErrorContext(ctx, "webhook: handing back a claimed delivery", slog.Int64("delivery_id", c.ID), slog.Any("error", err))
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
			// The first queued delivery whose subject has no request in
			// flight (the queue is in due order).
			i := slices.IndexFunc(l.queue, func(j *job) bool { return !l.busy[j.subject] })
			if i < 0 {
				break
			}
			j := l.queue[i]
			j.probe, j.notSent = probe, notSent
			l.probing = l.probing || probe
			l.queue = slices.Delete(l.queue, i, i+1)
			if l.busy == nil {
				l.busy = map[string]bool{}
			}
			l.busy[j.subject] = true
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
		delete(l.busy, j.subject)
		if j.probe {
			l.probing = false
		}
		switch {
		case res.unreachable:
			d.down[mid] = true
			l.depth = d.baseDepth()
		case res.status != nil:
			delete(d.down, mid)
			if len(l.queue) < d.cfg.PerEndpoint {
				// Less than one round of requests is left waiting:
				// the claims barely keep up with this endpoint.
				l.depth = min(2*l.depth, d.maxDepth())
			}
		}
		if l.held() < d.depthOf(mid, l) {
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
	if l.held()+l.recording == 0 {
		delete(d.lanes, mid)
	}
	if l.held() < d.depthOf(mid, l) {
		d.signal()
	}
	d.schedule()
}
