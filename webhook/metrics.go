package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Attempt outcomes, the values of the "outcome" label.
const (
	outcomeDelivered = "delivered" // 2xx
	outcomeRetry     = "retry"     // failed, another attempt is scheduled
	outcomeFailed    = "failed"    // failed, no automatic retry (4xx, redirect, configuration)
	outcomeExhausted = "exhausted" // the final attempt failed: permanently failed
)

type metrics struct {
	attempts   *prometheus.CounterVec
	delivered  prometheus.Counter
	retry      prometheus.Counter
	failed     prometheus.Counter
	exhausted  prometheus.Counter
	duration   prometheus.Histogram
	delay      prometheus.Histogram
	dispatched prometheus.Counter
	inflight   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_attempts_total",
			Help: "Webhook delivery attempts by outcome: delivered (2xx), retry (failed, retry scheduled), " +
				"failed (no automatic retry: 4xx, redirect, configuration), exhausted (the final attempt failed).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "webhook_attempt_duration_seconds",
			Help:    "Time from sending a webhook request to the end of reading its response (or the failure).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15), // 1 ms … 16 s
		}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "webhook_delivery_delay_seconds",
			Help:    "Time from an event's creation to its successful delivery, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12), // 10 ms … ~12 h
		}),
		dispatched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhook_events_dispatched_total",
			Help: "Outbox events turned into webhook deliveries.",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhook_requests_in_flight",
			Help: "Webhook requests being sent by this dispatcher.",
		}),
	}
	for _, c := range []prometheus.Collector{m.attempts, m.duration, m.delay, m.dispatched, m.inflight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.delivered = m.attempts.WithLabelValues(outcomeDelivered)
	m.retry = m.attempts.WithLabelValues(outcomeRetry)
	m.failed = m.attempts.WithLabelValues(outcomeFailed)
	m.exhausted = m.attempts.WithLabelValues(outcomeExhausted)
	return m, nil
}
