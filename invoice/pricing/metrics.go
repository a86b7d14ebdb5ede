package pricing

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	fetches     *prometheus.CounterVec
	up          *prometheus.GaugeVec
	dropped     *prometheus.CounterVec
	unavailable *prometheus.CounterVec
	stale       *prometheus.CounterVec
	peg         *prometheus.GaugeVec
}

// ageCollector reports each pair's time since it was last verified, at
// scrape time.
type ageCollector struct {
	p    *Pricer
	desc *prometheus.Desc
}

func (c ageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c ageCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.p.cfg.Now()
	c.p.mu.RLock()
	defer c.p.mu.RUnlock()
	for pair, g := range c.p.good {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, now.Sub(g.at).Seconds(), pair.String())
	}
}

func newMetrics(reg prometheus.Registerer, p *Pricer) (*metrics, error) {
	m := &metrics{
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pricing_source_refreshes_total",
			Help: "Refreshes of each rate source by outcome: ok, partial (some rates, some errors), error (no rate).",
		}, []string{"source", "outcome"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pricing_source_up",
			Help: "1 when the source's last refresh failed nowhere, else 0.",
		}, []string{"source"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pricing_source_dropped_total",
			Help: "Refreshes at which a source's rate of a pair was left out of the median: stale, future, deviation.",
		}, []string{"source", "pair", "reason"}),
		unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pricing_rate_unavailable_total",
			Help: "Quotes and valuations refused for want of a fresh, agreed rate (or a stablecoin refused off its peg).",
		}, []string{"asset", "currency"}),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pricing_quotes_stale_total",
			Help: "Quotes made from a last good rate because too few sources answered.",
		}, []string{"asset", "currency"}),
		peg: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pricing_peg_holding",
			Help: "1 while a stablecoin's market rate is within its peg band, 0 off it.",
		}, []string{"asset"}),
	}
	age := ageCollector{p: p, desc: prometheus.NewDesc("pricing_rate_age_seconds",
		"Time since a pair's rate was last verified by enough agreeing sources.", []string{"pair"}, nil)}
	for _, c := range []prometheus.Collector{m.fetches, m.up, m.dropped, m.unavailable, m.stale, m.peg, age} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
