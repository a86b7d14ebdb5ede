package rpcproxy

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// knownMethods are the method names that get their own "method" label; every
// other name is counted as "other", so a client cannot grow the number of
// series by inventing methods. Exact AllowMethods entries are added.
var knownMethods = []string{
	"eth_accounts", "eth_blobBaseFee", "eth_blockNumber", "eth_call", "eth_chainId",
	"eth_coinbase", "eth_config", "eth_createAccessList", "eth_estimateGas", "eth_feeHistory",
	"eth_gasPrice", "eth_getBalance", "eth_getBlockByHash", "eth_getBlockByNumber",
	"eth_getBlockReceipts", "eth_getBlockTransactionCountByHash",
	"eth_getBlockTransactionCountByNumber", "eth_getCode", "eth_getFilterChanges",
	"eth_getFilterLogs", "eth_getHeaderByHash", "eth_getHeaderByNumber", "eth_getLogs",
	"eth_getProof", "eth_getStorageAt", "eth_getTransactionByBlockHashAndIndex",
	"eth_getTransactionByBlockNumberAndIndex", "eth_getTransactionByHash",
	"eth_getTransactionCount", "eth_getTransactionReceipt", "eth_getUncleByBlockHashAndIndex",
	"eth_getUncleByBlockNumberAndIndex", "eth_getUncleCountByBlockHash",
	"eth_getUncleCountByBlockNumber", "eth_hashrate", "eth_maxPriorityFeePerGas", "eth_mining",
	"eth_newBlockFilter", "eth_newFilter", "eth_newPendingTransactionFilter",
	"eth_protocolVersion", "eth_sendRawTransaction", "eth_sendTransaction", "eth_sign",
	"eth_signTransaction", "eth_simulateV1", "eth_syncing", "eth_uninstallFilter",
	"net_listening", "net_peerCount", "net_version", "web3_clientVersion", "web3_sha3",
	"debug_traceBlockByHash", "debug_traceBlockByNumber", "debug_traceCall",
	"debug_traceTransaction", "txpool_content", "txpool_status",
}

const otherMethod = "other"

type metrics struct {
	requests    *prometheus.CounterVec
	calls       *prometheus.CounterVec
	rateLimited prometheus.Counter
	latency     prometheus.Histogram
	over        *prometheus.CounterVec

	methods map[string]*methodCounters // read-only after construction
	other   *methodCounters
	codes   [600]lazyCounter // by HTTP status
}

// lazyCounter resolves a labelled child on first use, so that the hot path
// is an atomic load and series appear only once they are non-zero.
type lazyCounter struct {
	once sync.Once
	c    prometheus.Counter
}

func (l *lazyCounter) get(vec *prometheus.CounterVec, labels ...string) prometheus.Counter {
	l.once.Do(func() { l.c = vec.WithLabelValues(labels...) })
	return l.c
}

type methodCounters struct {
	name string
	c    [numOutcomes]lazyCounter
}

// gauges are the proxy's readings behind its gauge metrics.
type gauges struct {
	buckets, inFlight, buffered, conns func() float64
}

func newMetrics(reg prometheus.Registerer, extraMethods []string, g gauges) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rpcproxy_requests_total",
			Help: "HTTP requests handled by the RPC proxy, by HTTP status code (499: client went away).",
		}, []string{"code"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rpcproxy_calls_total",
			Help: "JSON-RPC calls (batch elements count one each), by method (unknown names are \"other\") and outcome.",
		}, []string{"method", "outcome"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rpcproxy_rate_limited_calls_total",
			Help: "JSON-RPC calls refused because the client's token bucket was empty.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rpcproxy_upstream_request_duration_seconds",
			Help:    "Time from sending a request to the upstream node to receiving its response headers.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16), // 250µs … ~8s
		}),
		over: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rpcproxy_over_capacity_total",
			Help: "Connections and requests refused at a cap, by limit (connections, connections_per_client, requests, requests_per_client, buffered_bytes).",
		}, []string{"limit"}),
		methods: map[string]*methodCounters{},
		other:   &methodCounters{name: otherMethod},
	}
	for _, name := range append(append([]string(nil), knownMethods...), extraMethods...) {
		m.methods[name] = &methodCounters{name: name}
	}
	collectors := []prometheus.Collector{m.requests, m.calls, m.rateLimited, m.latency, m.over,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rpcproxy_rate_limit_buckets",
			Help: "Client token buckets currently held in memory.",
		}, g.buckets),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rpcproxy_requests_in_flight",
			Help: "Requests being handled.",
		}, g.inFlight),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rpcproxy_buffered_bytes",
			Help: "Bytes held in request bodies and buffered node answers (buffer capacity), against Config.MaxBufferedBytes.",
		}, g.buffered),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rpcproxy_connections_open",
			Help: "Open client connections on listeners wrapped by Proxy.LimitListener.",
		}, g.conns),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) request(status int) {
	if status >= 0 && status < len(m.codes) {
		m.codes[status].get(m.requests, strconv.Itoa(status)).Inc()
		return
	}
	m.requests.WithLabelValues(strconv.Itoa(status)).Inc()
}

func (m *metrics) call(method []byte, o outcome) {
	mc := m.methods[string(method)]
	if mc == nil {
		mc = m.other
	}
	mc.c[o].get(m.calls, mc.name, outcomeNames[o]).Inc()
	if o == outcomeRateLimited {
		m.rateLimited.Inc()
	}
}

func (m *metrics) overCapacity(limit string) { m.over.WithLabelValues(limit).Inc() }
