package sweep

import (
	"errors"
	"math/big"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the sweep's Prometheus series. Wei gauges are float64 (a
// gauge's type): exact figures are in WalletStatus.
type metrics struct {
	balance, spend, reserve, low, funderEmpty prometheus.Gauge
	stuck, chainGuard                         prometheus.Gauge

	swept      prometheus.Counter
	topUps     prometheus.Counter
	failed     *prometheus.CounterVec // by sweep_error
	signed     *prometheus.CounterVec // by kind
	replaced   *prometheus.CounterVec // by kind
	reorged    *prometheus.CounterVec // by kind
	broadcasts *prometheus.CounterVec // by kind and node answer
	stopped    *prometheus.CounterVec // by kind and reason: replacing stopped (operator alert)

	outboundConfirmed, outboundFailed prometheus.Counter // refunds and payouts
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "evmpay", Subsystem: "sweep", Name: name, Help: help})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "evmpay", Subsystem: "sweep", Name: name, Help: help})
	}
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evmpay", Subsystem: "sweep", Name: name, Help: help}, labels)
	}
	m := &metrics{
		balance:     gauge("wallet_balance_wei", "Balance of the sweep wallet, in wei."),
		spend:       gauge("wallet_gas_spend_24h_wei", "Gas paid by the sweep wallet in the last 24 hours (its fees and the gas it funded), in wei."),
		reserve:     gauge("wallet_reserve_wei", "Sweep wallet balance below which the gas funder tops it up, in wei."),
		low:         gauge("wallet_low", "1 when the sweep wallet balance is below half its 24-hour gas spend (alert)."),
		funderEmpty: gauge("funder_cannot_pay", "1 when the gas funder's last top-up was refused for insufficient funds."),
		stuck:       gauge("stuck_transactions", "Unmined sweep-wallet and gas-funder transactions no longer re-priced: at the replacement cap or the fee ceiling (alert)."),
		chainGuard:  gauge("chain_guard_failed", "1 when the chain guard refused the node at the last check: nothing is broadcast (alert)."),
		swept:       counter("swept_total", "Invoices swept and settled."),
		topUps:      counter("topups_total", "Top-ups of the sweep wallet signed by the gas funder."),
		failed:      vec("failed_total", "Sweeps marked FAILED, by sweep_error.", "sweep_error"),
		signed:      vec("signed_total", "Transactions signed and stored, by kind.", "kind"),
		replaced:    vec("replaced_total", "Replacements (same nonce, bumped fee), by kind.", "kind"),
		reorged:     vec("reorged_total", "Mined transactions reorged out and re-broadcast, by kind.", "kind"),
		broadcasts:  vec("broadcasts_total", "Broadcasts of stored transactions, by kind and the node's answer.", "kind", "answer"),
		stopped: vec("replacement_stopped_total", "Stuck transactions the sweeper stopped re-pricing (replacement cap or fee ceiling), by kind and reason.",
			"kind", "reason"),
		outboundConfirmed: counter("outbound_confirmed_total", "Refunds and payouts confirmed on chain."),
		outboundFailed:    counter("outbound_failed_total", "Refunds and payouts that failed (nothing was sent)."),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.balance, m.spend, m.reserve, m.low, m.funderEmpty, m.stuck, m.chainGuard, m.swept,
		m.topUps, m.failed, m.signed, m.replaced, m.reorged, m.broadcasts, m.stopped, m.outboundConfirmed, m.outboundFailed} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, errors.New("sweep: metrics already registered (one Sweeper per Registerer)")
			}
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observeWallet(ws WalletStatus) {
	m.balance.Set(weiFloat(ws.BalanceWei.Big()))
	m.spend.Set(weiFloat(ws.GasSpend24hWei.Big()))
	m.reserve.Set(weiFloat(ws.ReserveWei.Big()))
	if ws.Low {
		m.low.Set(1)
	} else {
		m.low.Set(0)
	}
}

func weiFloat(x *big.Int) float64 {
	f, _ := new(big.Float).SetInt(x).Float64()
	return f
}
