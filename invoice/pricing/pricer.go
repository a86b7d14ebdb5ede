package pricing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evmpay/evmpay/store"
)

// Pricer keeps warm rates from its sources and makes quotes from them.
//
// Run refreshes every source every RefreshInterval; quotes read only what
// is in memory, so making one costs microseconds and never waits on a
// source. A pair's rate is the median of the fresh observations that agree
// (see Config); when too few do, the last good rate stands in for MaxAge;
// after that, quotes fail with ErrRateUnavailable.
type Pricer struct {
	cfg        Config
	sources    []Source
	pairs      []Pair
	assets     map[string]bool
	currencies map[string]bool
	pegs       map[string]Peg
	log        *slog.Logger
	m          *metrics
	running    atomic.Bool
	next       atomic.Int64 // Unix nanoseconds of the next refresh while Run runs

	// evals caches each pair's evaluation for as long as it cannot change
	// (until the first of its observations ages out or comes of age):
	// quotes between two refreshes then cost a map lookup per pair.
	evals sync.Map // Pair → *cachedEval
	gen   atomic.Uint64

	mu       sync.RWMutex
	readings map[Pair]map[string]Rate // the latest observation per pair and source
	health   map[string]*sourceHealth
	good     map[Pair]verified
	// What was last logged, so that logs say when a state starts and ends.
	dropLog   map[dropKey]string
	pairLog   map[Pair]string
	pegLog    map[string]bool
	sourceLog map[string]string
}

type sourceHealth struct {
	attempt, success time.Time
	err              string
	rates            int
}

// verified is a pair's last good rate.
type verified struct {
	value   store.Decimal
	sources []store.QuoteSource
	at      time.Time // when it was last verified by enough agreeing sources
}

type cachedEval struct {
	gen         uint64
	from, until time.Time
	ev          evaluation
}

type dropKey struct {
	source string
	pair   Pair
}

// New returns a Pricer of sources (at least one; names unique). Call Run
// to keep its rates warm, or Refresh to fill them once.
func New(sources []Source, cfg Config) (*Pricer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(sources) == 0 {
		return nil, errors.New("pricing: no sources")
	}
	names := map[string]bool{}
	for _, s := range sources {
		if s == nil || s.Name() == "" || names[s.Name()] {
			return nil, errors.New("pricing: every source needs a name of its own")
		}
		names[s.Name()] = true
	}
	p := &Pricer{cfg: cfg, sources: slices.Clone(sources), log: cfg.Logger,
		assets: set(cfg.Assets), currencies: set(cfg.Currencies), pegs: map[string]Peg{},
		readings: map[Pair]map[string]Rate{}, health: map[string]*sourceHealth{}, good: map[Pair]verified{},
		dropLog: map[dropKey]string{}, pairLog: map[Pair]string{}, pegLog: map[string]bool{}, sourceLog: map[string]string{}}
	for _, peg := range cfg.Pegs {
		if p.assets[peg.Asset] {
			p.pegs[peg.Asset] = peg
		}
	}
	p.pairs = p.wantedPairs()
	for _, s := range sources {
		p.health[s.Name()] = &sourceHealth{}
	}
	m, err := newMetrics(cfg.Registerer, p)
	if err != nil {
		return nil, err
	}
	p.m = m
	return p, nil
}

func set(s []string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, v := range s {
		m[v] = true
	}
	return m
}

// wantedPairs are the pairs every source is asked for: each asset in each
// invoice currency, bridge and peg currency; each bridge in each other
// bridge and invoice currency.
func (p *Pricer) wantedPairs() []Pair {
	quotes := slices.Concat(p.cfg.Currencies, p.cfg.Bridges)
	for _, peg := range p.pegs {
		quotes = append(quotes, peg.Currency)
	}
	seen := map[Pair]bool{}
	var out []Pair
	add := func(pr Pair) {
		if pr.Base != pr.Quote && !seen[pr] {
			seen[pr] = true
			out = append(out, pr)
		}
	}
	for _, a := range p.cfg.Assets {
		for _, q := range quotes {
			add(Pair{a, q})
		}
	}
	for _, b := range p.cfg.Bridges {
		for _, q := range quotes {
			add(Pair{b, q})
			add(Pair{q, b})
		}
	}
	return out
}

// Pairs returns the pairs the sources are asked for.
func (p *Pricer) Pairs() []Pair { return slices.Clone(p.pairs) }

// Run refreshes the rates now and then every RefreshInterval until ctx is
// cancelled; it returns nil then. Failures are logged and counted, never
// returned: a source that fails is retried at the next refresh.
func (p *Pricer) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("pricing: Pricer is already running")
	}
	defer p.running.Store(false)
	defer p.next.Store(0)
	t := time.NewTicker(p.cfg.RefreshInterval)
	defer t.Stop()
	for {
		p.next.Store(p.cfg.Now().Add(p.cfg.RefreshInterval).UnixNano())
		_ = p.Refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh asks every source for every pair at once (each bounded by
// SourceTimeout), keeps what they answered, and re-verifies every pair,
// logging and counting the sources dropped. The error joins the sources'
// errors; the rates are refreshed with whatever did answer. A refresh whose
// ctx is cancelled records nothing and returns ctx's error.
func (p *Pricer) Refresh(ctx context.Context) error {
	type answer struct {
		rates []Rate
		err   error
	}
	answers := make([]answer, len(p.sources))
	var wg sync.WaitGroup
	for i, s := range p.sources {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, p.cfg.SourceTimeout)
			defer cancel()
			rates, err := s.Rates(sctx, slices.Clone(p.pairs))
			if err == nil && sctx.Err() != nil && len(rates) == 0 {
				err = sctx.Err()
			}
			answers[i] = answer{rates, err}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err // stopping: what the sources said while cancelled is not news
	}
	now := p.cfg.Now()

	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen.Add(1) // the observations change: every cached evaluation is void
	var errs []error
	for i, s := range p.sources {
		name, a := s.Name(), answers[i]
		h := p.health[name]
		h.attempt, h.rates, h.err = now, 0, ""
		for _, r := range a.rates {
			if !slices.Contains(p.pairs, r.Pair) || r.Value.IsZero() || r.At.IsZero() {
				a.err = errors.Join(a.err, fmt.Errorf("%s: refused %s = %q at %s: not asked, zero or untimed", name, r.Pair, r.Value, r.At))
				continue
			}
			if p.readings[r.Pair] == nil {
				p.readings[r.Pair] = map[string]Rate{}
			}
			p.readings[r.Pair][name] = r
			h.rates++
		}
		outcome := "ok"
		if a.err != nil {
			h.err = a.err.Error()
			errs = append(errs, a.err)
			outcome = "error"
			if h.rates > 0 {
				outcome = "partial"
			}
		}
		if h.rates > 0 {
			h.success = now
		}
		p.m.fetches.WithLabelValues(name, outcome).Inc()
		p.m.up.WithLabelValues(name).Set(boolFloat(a.err == nil))
		p.logSource(ctx, name, h.err)
	}
	for _, pr := range p.pairs {
		ev := p.evaluate(pr, now)
		p.record(ctx, ev, now)
	}
	p.checkPegs(ctx, now)
	return errors.Join(errs...)
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// observation is one source's latest rate of a pair.
type observation struct {
	source string
	rate   Rate
}

// drop is an observation left out, and why: "stale" (older than its max
// age), "future" (observed more than a minute ahead of our clock),
// "deviation" (too far from the median).
type drop struct {
	observation
	reason string
}

// evaluation is a pair's rate now from the observations in memory.
type evaluation struct {
	pair    Pair
	value   store.Decimal
	used    []observation
	dropped []drop
	ok      bool
	reason  string // why not ok
}

// evaluate verifies pair at now: fresh observations, the median, the ones
// too far from it dropped, the median of the rest if enough remain.
// Callers hold p.mu (for reading at least). The result is cached until an
// observation ages out or comes of age, or the next refresh.
func (p *Pricer) evaluate(pair Pair, now time.Time) evaluation {
	gen := p.gen.Load()
	if c, ok := p.evals.Load(pair); ok {
		c := c.(*cachedEval)
		if c.gen == gen && !now.Before(c.from) && now.Before(c.until) {
			return c.ev
		}
	}
	ev, until := p.evaluateNow(pair, now)
	p.evals.Store(pair, &cachedEval{gen: gen, from: now, until: until, ev: ev})
	return ev
}

// evaluateNow is evaluate without the cache; until is when the result may
// first change as time passes.
func (p *Pricer) evaluateNow(pair Pair, now time.Time) (ev evaluation, until time.Time) {
	ev = evaluation{pair: pair}
	until = now.Add(p.cfg.MaxAge)
	soonest := func(t time.Time) {
		if t.Before(until) {
			until = t
		}
	}
	var fresh []observation
	for name, r := range p.readings[pair] {
		o := observation{name, r}
		maxAge := r.MaxAge
		if maxAge <= 0 {
			maxAge = p.cfg.MaxAge
		}
		switch {
		case r.At.After(now.Add(futureSkew)):
			ev.dropped = append(ev.dropped, drop{o, "future"})
			soonest(r.At.Add(-futureSkew)) // no longer in the future then
		case now.Sub(r.At) > maxAge:
			ev.dropped = append(ev.dropped, drop{o, "stale"})
		default:
			fresh = append(fresh, o)
			soonest(r.At.Add(maxAge).Add(time.Nanosecond)) // stale from then
		}
	}
	need := p.cfg.MinSources
	if pair.fiat() {
		need = p.cfg.FXMinSources
	}
	if len(fresh) > 0 {
		m, err := median(fresh)
		if err != nil {
			ev.reason = err.Error()
			return ev, until
		}
		for _, o := range fresh {
			if deviates(o.rate.Value, m, p.cfg.MaxDeviationBps) {
				ev.dropped = append(ev.dropped, drop{o, "deviation"})
			} else {
				ev.used = append(ev.used, o)
			}
		}
	}
	slices.SortFunc(ev.dropped, func(a, b drop) int { return strings.Compare(a.source, b.source) })
	if len(ev.used) < need {
		ev.reason = fmt.Sprintf("%s: %d of %d sources needed", pair, len(ev.used), need)
		if len(ev.dropped) > 0 {
			var why []string
			for _, d := range ev.dropped {
				why = append(why, d.source+": "+d.reason)
			}
			ev.reason += " (" + strings.Join(why, ", ") + ")"
		}
		ev.used = nil
		return ev, until
	}
	v, err := median(ev.used)
	if err != nil {
		ev.reason = err.Error()
		return ev, until
	}
	ev.value, ev.ok = v, true
	return ev, until
}

// median of the observations' values (at least one): the middle one, or
// the mean of the two middle ones. It sorts obs by value, then source.
func median(obs []observation) (store.Decimal, error) {
	slices.SortFunc(obs, func(a, b observation) int {
		if c := a.rate.Value.Cmp(b.rate.Value); c != 0 {
			return c
		}
		return strings.Compare(a.source, b.source)
	})
	n := len(obs)
	if n%2 == 1 {
		return obs[n/2].rate.Value, nil
	}
	return mean2(obs[n/2-1].rate.Value, obs[n/2].rate.Value)
}

func quoteSources(obs []observation) []store.QuoteSource {
	out := make([]store.QuoteSource, len(obs))
	for i, o := range obs {
		out[i] = store.QuoteSource{Name: o.source, Pair: o.rate.Pair.String(), Rate: o.rate.Value, At: o.rate.At}
	}
	slices.SortFunc(out, func(a, b store.QuoteSource) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// record keeps a verified pair as its last good rate, and logs and counts
// the drops. Callers hold p.mu for writing.
func (p *Pricer) record(ctx context.Context, ev evaluation, now time.Time) {
	if ev.ok {
		p.good[ev.pair] = verified{value: ev.value, sources: quoteSources(ev.used), at: now}
	}
	current := map[string]string{}
	for _, d := range ev.dropped {
		current[d.source] = d.reason
		p.m.dropped.WithLabelValues(d.source, ev.pair.String(), d.reason).Inc()
	}
	for name := range p.readings[ev.pair] {
		key := dropKey{name, ev.pair}
		was, is := p.dropLog[key], current[name]
		if was == is {
			continue
		}
		p.dropLog[key] = is
		if is == "" {
			p.log.InfoContext(ctx, "pricing: source used again", slog.String("source", name), slog.String("pair", ev.pair.String()))
			continue
		}
		var d drop
		for _, x := range ev.dropped {
			if x.source == name {
				d = x
			}
		}
		p.log.WarnContext(ctx, "pricing: source dropped", slog.String("source", name), slog.String("pair", ev.pair.String()),
			slog.String("reason", is), slog.String("rate", d.rate.Value.String()), slog.Time("observed_at", d.rate.At),
			slog.Duration("age", now.Sub(d.rate.At).Round(time.Second)))
	}
	state := ev.reason
	if _, ok := p.readings[ev.pair]; !ok && !ev.ok {
		state = "" // no source quotes this pair at all (a bridge crossing not offered): nothing to say
	}
	if was := p.pairLog[ev.pair]; was != state {
		p.pairLog[ev.pair] = state
		if state != "" {
			p.log.WarnContext(ctx, "pricing: rate not verified", slog.String("pair", ev.pair.String()), slog.String("reason", state))
		} else if was != "" {
			p.log.InfoContext(ctx, "pricing: rate verified again", slog.String("pair", ev.pair.String()))
		}
	}
}

func (p *Pricer) logSource(ctx context.Context, name, err string) {
	was := p.sourceLog[name]
	p.sourceLog[name] = err
	if (was == "") == (err == "") {
		// No change of state (an error's text varies with the order its
		// markets answered in): logged when it starts and when it ends.
		return
	}
	if err != "" {
		p.log.WarnContext(ctx, "pricing: source failing", slog.String("source", name), slog.String("error", err))
	} else {
		p.log.InfoContext(ctx, "pricing: source answering again", slog.String("source", name))
	}
}

// checkPegs logs each stablecoin leaving and regaining its band. Callers
// hold p.mu for writing.
func (p *Pricer) checkPegs(ctx context.Context, now time.Time) {
	for asset, peg := range p.pegs {
		l, reason := p.direct(Pair{asset, peg.Currency}, now)
		if reason != "" {
			continue
		}
		holding := !deviates(l.value, peg.Value, peg.BandBps)
		p.m.peg.WithLabelValues(asset).Set(boolFloat(holding))
		if was, seen := p.pegLog[asset]; seen && was == holding || !seen && holding {
			p.pegLog[asset] = holding
			continue
		}
		p.pegLog[asset] = holding
		if holding {
			p.log.InfoContext(ctx, "pricing: stablecoin back within its peg band", slog.String("asset", asset), slog.String("rate", l.value.String()))
		} else {
			p.log.WarnContext(ctx, "pricing: stablecoin off its peg", slog.String("asset", asset), slog.String("rate", l.value.String()),
				slog.String("peg", peg.Value.String()+" "+peg.Currency), slog.Int("band_bps", peg.BandBps))
		}
	}
}
