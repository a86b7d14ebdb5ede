package nodes

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the pool's Prometheus collectors. Nodes are labelled by
// their redacted URL.
type metrics struct {
	up         *prometheus.GaugeVec
	head       *prometheus.GaugeVec
	lag        *prometheus.GaugeVec
	served     prometheus.Gauge
	requests   *prometheus.CounterVec
	failovers  prometheus.Counter
	waits      prometheus.Counter
	fanout     prometheus.Histogram
	broadcasts *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evmpay_nodes_up",
			Help: "1 when the node is usable (answers, right chain id, serves the head it reports, passes the guard), else 0.",
		}, []string{"node"}),
		head: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evmpay_nodes_head",
			Help: "The node's head block as last seen (health check or an eth_blockNumber answer).",
		}, []string{"node"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evmpay_nodes_lag_blocks",
			Help: "Blocks between the highest head of the usable nodes and this node's head.",
		}, []string{"node"}),
		served: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "evmpay_nodes_served_head",
			Help: "The highest head the pool has served reads from; no read goes to a node below it.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evmpay_nodes_requests_total",
			Help: "Requests sent to each node, by outcome: ok, failed (transport, 5xx, timeout, invalid answer), head_refused (an eth_blockNumber answer below the served head, or for a block the node does not serve).",
		}, []string{"node", "outcome"}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "evmpay_nodes_failovers_total",
			Help: "Reads sent again to another node after a node failed them.",
		}),
		waits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "evmpay_nodes_waits_total",
			Help: "Requests that found no usable node and waited for a check.",
		}),
		fanout: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "evmpay_nodes_broadcast_fanout",
			Help:    "Nodes each request carrying eth_sendRawTransaction was sent to.",
			Buckets: []float64{1, 2, 3, 4, 5, 8},
		}),
		broadcasts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evmpay_nodes_broadcast_sends_total",
			Help: "eth_sendRawTransaction calls sent to each node, by its answer: accepted, known (already known, or nonce too low for a transaction the node has), refused, failed (no answer).",
		}, []string{"node", "outcome"}),
	}
	for _, c := range []prometheus.Collector{m.up, m.head, m.lag, m.served, m.requests, m.failovers, m.waits, m.fanout, m.broadcasts} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
