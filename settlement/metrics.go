package settlement

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	processed   prometheus.Gauge
	head        prometheus.Gauge
	lag         prometheus.Gauge
	payments    prometheus.Counter
	transitions *prometheus.CounterVec
	events      *prometheus.CounterVec
	reorgs      prometheus.Counter
	errors      prometheus.Counter
	blockTime   prometheus.Histogram
	filterInUse prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		processed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "settlement_processed_block",
			Help: "The last block number settlement processed (its cursor).",
		}),
		head: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "settlement_indexed_head_block",
			Help: "The highest indexed block, as settlement last read it.",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "settlement_lag_blocks",
			Help: "Indexed head minus the last block settlement processed.",
		}),
		payments: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "settlement_payments_matched_total",
			Help: "Payments recorded against invoices.",
		}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settlement_invoice_transitions_total",
			Help: "Invoice status changes made by settlement, by old and new status.",
		}, []string{"from", "to"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settlement_events_total",
			Help: "Outbox events written by settlement, by type.",
		}, []string{"type"}),
		reorgs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "settlement_reorgs_total",
			Help: "Reorgs undone: processed blocks found orphaned and their payments removed.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "settlement_errors_total",
			Help: "Failures that were retried.",
		}),
		blockTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "settlement_block_seconds",
			Help:    "Time to process one block (one database transaction; the head block's carries the confirmation pass).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		filterInUse: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "settlement_deposit_filter_in_use",
			Help: "1 when settlement looks up only the block recipients its deposit-address filter cannot rule out; 0 while the filter loads, or when an invoice was inserted without reserving its derivation index (every recipient is then looked up: slower, still correct).",
		}),
	}
	for _, c := range []prometheus.Collector{m.processed, m.head, m.lag, m.payments, m.transitions,
		m.events, m.reorgs, m.errors, m.blockTime, m.filterInUse} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) setPosition(head, processed uint64) {
	m.head.Set(float64(head))
	m.processed.Set(float64(processed))
	if head > processed {
		m.lag.Set(float64(head - processed))
	} else {
		m.lag.Set(0)
	}
}
