package indexer

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	head         prometheus.Gauge
	indexed      prometheus.Gauge
	lag          prometheus.Gauge
	nodeBehind   prometheus.Gauge
	finalized    prometheus.Gauge
	backfillRate prometheus.Gauge
	blocks       prometheus.Counter
	txs          prometheus.Counter
	transfers    prometheus.Counter
	reorgs       prometheus.Counter
	reorgDepth   prometheus.Histogram
	errors       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		head: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "indexer_head_block",
			Help: "The node's head block number, as last polled.",
		}),
		indexed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "indexer_indexed_block",
			Help: "The highest block number written to the database.",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "indexer_lag_blocks",
			Help: "Head block minus indexed block.",
		}),
		nodeBehind: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "indexer_node_behind_blocks",
			Help: "Indexed block minus the node's head when the node is behind the index (a lagging, resyncing or reset node); 0 otherwise.",
		}),
		finalized: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "indexer_finalized_block",
			Help: "The finalized block recorded under finality \"tag\" (the node's finalized block, checked against the indexed chain); 0 before one is recorded and under other finality modes.",
		}),
		backfillRate: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "indexer_backfill_blocks_per_second",
			Help: "Blocks written per second while catching up (0 when following the head).",
		}),
		blocks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "indexer_blocks_indexed_total",
			Help: "Blocks written to the database.",
		}),
		txs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "indexer_transactions_indexed_total",
			Help: "Transactions written to the database.",
		}),
		transfers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "indexer_token_transfers_indexed_total",
			Help: "ERC-20 Transfer logs of the configured tokens written to the database.",
		}),
		reorgs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "indexer_reorgs_total",
			Help: "Chain reorganisations followed.",
		}),
		reorgDepth: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "indexer_reorg_depth_blocks",
			Help:    "Blocks orphaned by each reorg followed.",
			Buckets: []float64{1, 2, 3, 5, 8, 13, 21, 34, 64},
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "indexer_errors_total",
			Help: "Failures that were retried, by kind (upstream, store; finalized: the node's finalized block could not be read under finality \"tag\").",
		}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.head, m.indexed, m.lag, m.nodeBehind, m.finalized, m.backfillRate, m.blocks,
		m.txs, m.transfers, m.reorgs, m.reorgDepth, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) setPosition(head, indexed uint64) {
	m.head.Set(float64(head))
	m.indexed.Set(float64(indexed))
	if head > indexed {
		m.lag.Set(float64(head - indexed))
	} else {
		m.lag.Set(0)
	}
}
