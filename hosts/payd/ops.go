package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/rpcproxy/nodes"
	"github.com/evmpay/evmpay/settlement"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
	"github.com/evmpay/evmpay/sweep"
	"github.com/evmpay/evmpay/webhook"
)

// readStore is where replica-tolerant reads go: the read replica when
// DATABASE_READ_URL is set, else the primary. The read API tolerates lag:
// it already refuses an index not written for StaleAfter (the indexer's
// cursor, read from the same replica, ages with the lag), and chain data
// below the head does not change. Invoice reads stay on the primary: a
// merchant reads its invoice right after creating it, or after a webhook
// says it changed, and must not get an older state.
func (a *app) readStore() store.Store {
	if a.cfg.reads != nil {
		return a.cfg.reads
	}
	return a.st
}

// buildOps adds what every process serves — health and readiness on the
// HTTP listener, metrics on the operator listener (never on the API
// listener: they tell invoice counts and wallet balances) — and what the
// roles share: the read API (api, gateway), the operator status and the
// sweep retry endpoint (api, sweep).
func (a *app) buildOps() error {
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	a.mux.HandleFunc("GET /readyz", a.serveReady)
	a.metricsMux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	if a.cfg.roles[roleAPI] || a.cfg.roles[roleGateway] {
		ra, err := indexer.NewReadAPI(a.readStore(), indexer.ReadAPIConfig{Logger: a.log.With("component", "readapi")})
		if err != nil {
			return err
		}
		ra.Register(a.mux)
	}
	if a.cfg.roles[roleAPI] {
		a.reg.MustRegister(&dbCollector{st: a.st})
	}
	if a.cfg.roles[roleAPI] || a.cfg.roles[roleSweep] {
		a.mux.HandleFunc("GET /v1/admin/status", a.serveStatus)
		// The sweep retry endpoint needs only the database: API replicas
		// serve it too, without holding a key.
		admin, err := sweep.NewAdmin(a.st, sweep.Config{OperatorToken: a.adminToken, Logger: a.log.With("component", "sweep")})
		if err != nil {
			return err
		}
		admin.Register(a.mux)
	}
	return nil
}

// serveReady answers 200 when the database and the chain node both answer
// and the node serves the recorded chain, not far behind the index.
func (a *app) serveReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]string{"database": "ok", "chain": "ok", "chain_identity": "ok"}
	status := http.StatusOK
	if c := chainProblem(a.chainStatus().Err); c != "" {
		checks["chain_identity"] = c
		status = http.StatusServiceUnavailable
	}
	if c := chainProblem(a.first.stopReason()); c == problemReorgTooDeep {
		checks["indexer"] = c
		status = http.StatusServiceUnavailable
	}
	if err := a.st.Ping(ctx); err != nil {
		checks["database"] = "unreachable"
		status = http.StatusServiceUnavailable
	}
	if _, err := a.eth.BlockNumber(ctx); err != nil {
		checks["chain"] = "unreachable"
		status = http.StatusServiceUnavailable
	}
	for _, u := range a.others {
		if u.svc == nil {
			continue // this process works on no part of the chain
		}
		id := strconv.FormatUint(u.id, 10)
		checks["chain@"+id], checks["chain_identity@"+id] = "ok", "ok"
		if c := chainProblem(u.svc.Identity.Status().Err); c != "" {
			checks["chain_identity@"+id] = c
			status = http.StatusServiceUnavailable
		}
		if c := chainProblem(u.stopReason()); c == problemReorgTooDeep {
			checks["indexer@"+id] = c
			status = http.StatusServiceUnavailable
		}
		if _, err := u.eth.BlockNumber(ctx); err != nil {
			checks["chain@"+id] = "unreachable"
			status = http.StatusServiceUnavailable
		}
	}
	if c := a.replicaReadiness(ctx); c != "" {
		checks["read_replica"] = c
		if c != "ok" {
			status = http.StatusServiceUnavailable
		}
	}
	if p := a.keyProblems(); a.sweeper != nil && p != nil {
		// The sweep role cannot sign: sweeps and top-ups wait.
		checks["keys"] = "ok"
		if len(p) > 0 {
			checks["keys"] = strings.Join(p, "; ")
			status = http.StatusServiceUnavailable
		}
	}
	writeJSON(w, status, checks)
}

// replicaReadiness is /readyz's read_replica check: the read API answers
// from the replica, which must hold this database's schema and chain. ""
// without a replica.
func (a *app) replicaReadiness(ctx context.Context) string {
	if a.cfg.reads == nil {
		return ""
	}
	err := checkReplica(ctx, a.st, a.cfg.reads)
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, errReplica):
		a.log.WarnContext(ctx, "readiness: the read replica does not match the primary", slog.String("error", err.Error()))
		return "mismatch"
	default:
		return "unreachable"
	}
}

// statusReport is GET /v1/admin/status: the observable conditions that mean
// money is not moving as it should.
type statusReport struct {
	Healthy bool `json:"healthy"`
	// StalePaidPending: paid invoices still PENDING after 5 minutes
	// (settlement lags).
	StalePaidPending []int64 `json:"stale_paid_pending"`
	// UnsweptConfirmed: CONFIRMED invoices with no sweep transaction.
	UnsweptConfirmed []int64 `json:"unswept_confirmed"`
	// FailedDeliveries: webhook deliveries that ended FAILED, whatever
	// the reason; FailedByReason splits them (webhook.FailedEndpointBroken:
	// refused before the ladder's end, such as a 410 at attempt 1;
	// webhook.FailedAttemptsExhausted: every attempt failed).
	FailedDeliveries int64            `json:"failed_deliveries_final"`
	FailedByReason   map[string]int64 `json:"failed_deliveries_final_by_reason"`
	// SweepWallet is the sweep wallet's state (processes with the sweep
	// role); Low is the alert: balance below 0.5 × its 24-hour gas spend.
	SweepWallet *sweep.WalletStatus `json:"sweep_wallet,omitempty"`
	// Secrets says where every secret and account key this process read
	// came from (provider, sealed, key id; never a value).
	Secrets []secretSource `json:"secrets,omitempty"`
	// RetiredKeys are rotated-out keys being drained (sweep role).
	RetiredKeys []sweep.RetiredStatus `json:"retired_keys,omitempty"`
	// Pricing is fiat pricing's state (processes that price): each rate
	// source's health and every rate's freshness (docs/pricing.md). Its
	// problems do not make the service unhealthy (no money is at risk:
	// invoices are refused, never mispriced); alert on the metrics.
	Pricing *pricing.Status `json:"pricing,omitempty"`
	// Chain is the last check of the node against the recorded chain.
	Chain  chainReport `json:"chain"`
	Errors []string    `json:"errors,omitempty"`
	// Nodes are the chain's nodes when RPC_URL lists several (failover:
	// docs/chains.md); absent with one node.
	Nodes []nodes.NodeStatus `json:"nodes,omitempty"`
	// OtherChains are the chains besides the first (CHAINS_FILE) that this
	// process works on: the last identity check of each, and its nodes.
	OtherChains []otherChainReport `json:"other_chains,omitempty"`
}

// otherChainReport is a chain besides the first in the status report.
type otherChainReport struct {
	chainReport
	Nodes []nodes.NodeStatus `json:"nodes,omitempty"`
	// Elsewhere: this process runs none of the chain's parts (--chains),
	// so it knows no node head; a problem is the one the process that
	// runs them recorded when they stopped (store.StopStore).
	Elsewhere bool `json:"runs_elsewhere,omitempty"`
}

// chainReport is the node as the last chain-identity check saw it.
type chainReport struct {
	ChainID      uint64 `json:"chain_id"`
	NodeHead     uint64 `json:"node_head"`
	IndexedTip   uint64 `json:"indexed_tip"`
	BehindBlocks uint64 `json:"behind_blocks"`
	// Problem is "" when the node serves the recorded chain, not far
	// behind; node_behind or another_chain otherwise, explained by Reason.
	// A chain whose parts stopped on a reorg its indexer refused says
	// reorg_too_deep.
	Problem   string    `json:"problem,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	CheckedAt time.Time `json:"checked_at"`
}

// chainStatus is the last chain-identity check (none in an app built
// without a node, as some tests build it).
func (a *app) chainStatus() indexer.ChainStatus {
	if a.identity == nil {
		return indexer.ChainStatus{}
	}
	return a.identity.Status()
}

// stoppedBy is r with the chain problem its parts stopped on (stop), when
// the identity check names none.
func (r chainReport) stoppedBy(err error) chainReport {
	if p := chainProblem(err); r.Problem == "" && p != "" {
		r.Problem, r.Reason = p, err.Error()
	}
	return r
}

// problemReorgTooDeep: the chain's indexer refused a reorg (deeper than
// MaxReorgDepth, or of a block recorded as finalized) and the chain's
// parts stopped.
const problemReorgTooDeep = "reorg_too_deep"

// problemAnotherChain: the node serves another chain than the recorded
// one (another chain id or genesis).
const problemAnotherChain = "another_chain"

// chainProblem names what an identity check, or the indexer, found wrong,
// or "".
func chainProblem(err error) string {
	switch {
	case errors.Is(err, store.ErrReorgTooDeep):
		return problemReorgTooDeep
	case errors.Is(err, store.ErrNodeBehind):
		return "node_behind"
	case errors.Is(err, indexer.ErrChainChanged), errors.Is(err, indexer.ErrWrongChain):
		return problemAnotherChain
	}
	return ""
}

func (a *app) serveStatus(w http.ResponseWriter, r *http.Request) {
	if !httpapi.OperatorAuthorized(r, a.adminToken) {
		problem.Reply(w, problem.CodeUnauthorized, "send the operator token as Authorization: Bearer <PAY_ADMIN_TOKEN>")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	rep := statusReport{StalePaidPending: []int64{}, UnsweptConfirmed: []int64{}}
	if c, err := settlement.CheckConditions(ctx, a.st, time.Now()); err != nil {
		rep.Errors = append(rep.Errors, "conditions: database unavailable")
	} else {
		rep.StalePaidPending = invoiceIDs(c.StalePaidPending)
		rep.UnsweptConfirmed = invoiceIDs(c.UnsweptConfirmed)
	}
	if byReason, err := failedDeliveries(ctx, a.st); err != nil {
		rep.Errors = append(rep.Errors, "deliveries: database unavailable")
	} else {
		rep.FailedByReason = byReason
		for _, n := range byReason {
			rep.FailedDeliveries += n
		}
	}
	if a.sweeper != nil {
		if ws, err := a.sweeper.WalletStatus(ctx); err != nil {
			rep.Errors = append(rep.Errors, "sweep wallet: chain unavailable")
		} else {
			rep.SweepWallet = &ws
		}
	}
	a.keysStatus(ctx, &rep)
	if a.pricer != nil {
		ps := a.pricer.Status()
		rep.Pricing = &ps
	}
	if a.pool != nil {
		rep.Nodes = a.pool.Status()
	}
	// A chain's stop is this process's, or recorded by the process that
	// runs the chain's parts (--chains): chainStopped reads both.
	rep.Chain = reportOf(a.chainStatus()).stoppedBy(a.chainStopped(a.chainID))
	chainsOK := rep.Chain.Problem == ""
	for _, u := range a.others {
		var o otherChainReport
		if u.svc == nil {
			o = otherChainReport{chainReport: chainReport{ChainID: u.id}, Elsewhere: true}
		} else {
			o.chainReport = reportOf(u.svc.Identity.Status())
			if u.pool != nil {
				o.Nodes = u.pool.Status()
			}
		}
		o.chainReport = o.chainReport.stoppedBy(a.chainStopped(u.id))
		chainsOK = chainsOK && o.Problem == ""
		rep.OtherChains = append(rep.OtherChains, o)
	}
	rep.Healthy = chainsOK && len(rep.Errors) == 0 && len(rep.StalePaidPending) == 0 && len(rep.UnsweptConfirmed) == 0 &&
		rep.FailedDeliveries == 0 && (rep.SweepWallet == nil || !rep.SweepWallet.Low && len(rep.SweepWallet.Alerts) == 0)
	writeJSON(w, http.StatusOK, rep)
}

// failedDeliveries counts the webhook deliveries that ended FAILED, by
// webhook.FailureReason (payd runs the ladder's default length,
// webhook.MaxAttempts).
func failedDeliveries(ctx context.Context, st store.Store) (map[string]int64, error) {
	all, err := st.CountDeliveries(ctx, store.DeliveryFailed, 0)
	if err != nil {
		return nil, err
	}
	exhausted, err := st.CountDeliveries(ctx, store.DeliveryFailed, webhook.MaxAttempts)
	if err != nil {
		return nil, err
	}
	return map[string]int64{webhook.FailedEndpointBroken: all - exhausted, webhook.FailedAttemptsExhausted: exhausted}, nil
}

func invoiceIDs(invs []store.Invoice) []int64 {
	ids := make([]int64, 0, len(invs))
	for _, inv := range invs {
		ids = append(ids, inv.ID)
	}
	return ids
}

// dbCollector exports gauges read from the database at scrape time: the
// live invoices by status and webhook deliveries failed for good. Each
// reads a partial index of what it counts, so a scrape costs the same at
// a year of history as on the first day (docs/scale.md).
type dbCollector struct{ st store.Store }

var (
	invoicesDesc = prometheus.NewDesc("evmpay_invoices",
		"Invoices not yet settled or expired, by status (PENDING, PAID, CONFIRMED). Settled and expired ones are counted as they happen: evmpay_sweep_swept_total, evmpay_settlement_invoice_transitions_total{to=\"EXPIRED\"}.",
		[]string{"status"}, nil)
	failedDesc = prometheus.NewDesc("evmpay_webhook_deliveries_failed_final",
		"Webhook deliveries that ended FAILED, by reason: endpoint_broken (refused before the ladder's end, such as a 410), attempts_exhausted.",
		[]string{"reason"}, nil)
)

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- invoicesDesc
	ch <- failedDesc
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if counts, err := c.st.CountLiveInvoices(ctx); err == nil {
		for _, s := range []string{store.StatusPending, store.StatusPaid, store.StatusConfirmed} {
			ch <- prometheus.MustNewConstMetric(invoicesDesc, prometheus.GaugeValue, float64(counts[s]), s)
		}
	}
	if byReason, err := failedDeliveries(ctx, c.st); err == nil {
		for reason, n := range byReason {
			ch <- prometheus.MustNewConstMetric(failedDesc, prometheus.GaugeValue, float64(n), reason)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) { httpapi.WriteJSON(w, status, v) }

// reportOf is an identity check as the status report shows it.
func reportOf(cs indexer.ChainStatus) chainReport {
	r := chainReport{ChainID: cs.ChainID, NodeHead: cs.NodeHead, IndexedTip: cs.IndexedTip,
		BehindBlocks: cs.BehindBlocks, Problem: chainProblem(cs.Err), CheckedAt: cs.CheckedAt}
	if r.Problem != "" {
		r.Reason = cs.Err.Error()
	}
	return r
}
