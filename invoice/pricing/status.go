package pricing

import (
	"slices"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
)

// Status is the health of the sources and the freshness of every rate,
// for an operator (payd's /v1/admin/status). Its JSON is stable.
type Status struct {
	Sources []SourceStatus `json:"sources"`
	Rates   []RateStatus   `json:"rates"`
	Pegs    []PegStatus    `json:"pegs"`
}

// SourceStatus is one source's last refresh.
type SourceStatus struct {
	Name string `json:"name"`
	// Healthy is true when the source's last refresh failed nowhere.
	Healthy       bool       `json:"healthy"`
	LastAttemptAt *time.Time `json:"last_attempt_at"`
	// LastSuccessAt is the last refresh in which it answered a rate.
	LastSuccessAt *time.Time `json:"last_success_at"`
	LastError     string     `json:"last_error,omitempty"`
	// Rates is how many rates it answered at its last refresh.
	Rates int `json:"rates"`
}

// RateStatus is one pair's rate now.
type RateStatus struct {
	Pair string `json:"pair"`
	// Available is true when quotes can use the pair now: verified, or
	// its last good rate (Stale) still younger than MaxAge.
	Available bool           `json:"available"`
	Stale     bool           `json:"stale"`
	Rate      *store.Decimal `json:"rate"`
	// VerifiedAt is when enough sources last agreed on the pair, at a
	// refresh; AgeSeconds is the time since.
	VerifiedAt *time.Time `json:"verified_at"`
	AgeSeconds *int64     `json:"age_seconds"`
	// Reason says why the pair is not verified now.
	Reason       string              `json:"reason,omitempty"`
	Observations []ObservationStatus `json:"observations"`
}

// ObservationStatus is a source's latest observation of a pair, used or
// dropped ("stale", "future", "deviation").
type ObservationStatus struct {
	Source  string        `json:"source"`
	Rate    store.Decimal `json:"rate"`
	At      time.Time     `json:"at"`
	Used    bool          `json:"used"`
	Dropped string        `json:"dropped,omitempty"`
}

// PegStatus is a stablecoin's market rate against its peg.
type PegStatus struct {
	Asset    string         `json:"asset"`
	Peg      string         `json:"peg"` // "1 USD"
	BandBps  int            `json:"band_bps"`
	Market   *store.Decimal `json:"market"`
	Holding  bool           `json:"holding"`
	OffPeg   string         `json:"off_peg"` // "market" or "refuse"
	Verified bool           `json:"verified"`
}

// Status returns the sources' health and every pair's freshness now.
func (p *Pricer) Status() Status {
	now := p.cfg.Now()
	p.mu.RLock()
	defer p.mu.RUnlock()
	st := Status{Sources: []SourceStatus{}, Rates: []RateStatus{}, Pegs: []PegStatus{}}
	for _, s := range p.sources {
		h := p.health[s.Name()]
		ss := SourceStatus{Name: s.Name(), Healthy: !h.attempt.IsZero() && h.err == "", LastError: h.err, Rates: h.rates}
		if !h.attempt.IsZero() {
			ss.LastAttemptAt = ptr(h.attempt.UTC())
		}
		if !h.success.IsZero() {
			ss.LastSuccessAt = ptr(h.success.UTC())
		}
		st.Sources = append(st.Sources, ss)
	}
	for _, pair := range p.pairs {
		if _, quoted := p.readings[pair]; !quoted {
			continue // no source quotes it
		}
		ev := p.evaluate(pair, now)
		rs := RateStatus{Pair: pair.String(), Observations: []ObservationStatus{}}
		for _, o := range ev.used {
			rs.Observations = append(rs.Observations, ObservationStatus{Source: o.source, Rate: o.rate.Value, At: o.rate.At, Used: true})
		}
		for _, d := range ev.dropped {
			rs.Observations = append(rs.Observations, ObservationStatus{Source: d.source, Rate: d.rate.Value, At: d.rate.At, Dropped: d.reason})
		}
		if !ev.ok {
			// Fresh but too few: not used either.
			for name, r := range p.readings[pair] {
				if !slices.ContainsFunc(rs.Observations, func(o ObservationStatus) bool { return o.Source == name }) {
					rs.Observations = append(rs.Observations, ObservationStatus{Source: name, Rate: r.Value, At: r.At})
				}
			}
		}
		slices.SortFunc(rs.Observations, func(a, b ObservationStatus) int { return strings.Compare(a.Source, b.Source) })
		if g, ok := p.good[pair]; ok {
			rs.VerifiedAt = ptr(g.at.UTC())
			rs.AgeSeconds = ptr(int64(now.Sub(g.at) / time.Second))
		}
		l, why := p.direct(pair, now)
		if why == "" {
			rs.Available, rs.Stale, rs.Rate = true, l.stale, ptr(l.value)
		}
		if !ev.ok {
			rs.Reason = ev.reason
		}
		st.Rates = append(st.Rates, rs)
	}
	for _, asset := range p.cfg.Assets {
		peg, ok := p.pegs[asset]
		if !ok {
			continue
		}
		ps := PegStatus{Asset: asset, Peg: peg.Value.String() + " " + peg.Currency, BandBps: peg.BandBps, OffPeg: "market"}
		if peg.Outside == PegRefuse {
			ps.OffPeg = "refuse"
		}
		if l, why := p.direct(Pair{asset, peg.Currency}, now); why == "" {
			ps.Market, ps.Verified = ptr(l.value), true
			ps.Holding = !deviates(l.value, peg.Value, peg.BandBps)
		}
		st.Pegs = append(st.Pegs, ps)
	}
	return st
}

func ptr[T any](v T) *T { return &v }
