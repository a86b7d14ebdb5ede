package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/time/rate"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/dashboard"
	"github.com/evmpay/evmpay/hosts/service"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/invoice/checkout"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/rpcproxy"
	"github.com/evmpay/evmpay/rpcproxy/nodes"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/sweep"
	"github.com/evmpay/evmpay/webhook"
)

// Roles a process can take. `payd dev` takes them all.
const (
	roleAPI        = "api"
	roleGateway    = "gateway"
	roleSettlement = "settlement"
	roleSweep      = "sweep"
	roleWebhooks   = "webhooks"
)

var allRoles = []string{roleAPI, roleGateway, roleSettlement, roleSweep, roleWebhooks}

type roleSet map[string]bool

// parseRoles reads a comma-separated role list.
func parseRoles(s string) (roleSet, error) {
	rs := roleSet{}
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if r == "all" {
			for _, a := range allRoles {
				rs[a] = true
			}
			continue
		}
		known := false
		for _, a := range allRoles {
			known = known || a == r
		}
		if !known {
			return nil, usageError(fmt.Sprintf("--roles: unknown role %q (want a comma-separated list of %s, or all)", r, strings.Join(allRoles, ", ")))
		}
		rs[r] = true
	}
	if len(rs) == 0 {
		return nil, usageError("--roles: name at least one of " + strings.Join(allRoles, ", "))
	}
	return rs, nil
}

func (rs roleSet) String() string {
	var names []string
	for r := range rs {
		names = append(names, r)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// appConfig is everything a process needs to assemble its parts.
type appConfig struct {
	roles     roleSet
	httpAddr  string // invoice, read, admin APIs, /healthz, /readyz, /v1/openapi.json
	proxyAddr string // the RPC proxy (gateway role)
	backfill  bool
	// chain is the first chain's settings (the environment's: RPC_URL,
	// CHAIN_ID, FINALITY, tokens, the checkout's name and explorers…).
	chain chainSpec

	// metricsAddr is the operator listener of /metrics; "" serves no
	// metrics.
	metricsAddr string

	keys KeyProvider
	// xpub, when set, gives the api role its deposit addresses without the
	// mnemonic.
	xpub string

	sweepPolicy  sweep.Policy
	archiveAfter time.Duration
	archiveEvery time.Duration
	proxyRate    float64
	proxyBurst   int
	// trustedProxies are the reverse proxies in front of payd: behind
	// them a client is its X-Forwarded-For address (per-client limits).
	trustedProxies []netip.Prefix
	blockPrivateWH bool
	// reads, when set, serves the reads that tolerate replica lag (the
	// read API: blocks, transactions, address transactions) from a read
	// replica (DATABASE_READ_URL); see docs/scale.md. nil: the primary.
	reads store.Store
	// chainCheckEvery is how often the node's chain is compared with the
	// recorded identity (0: indexer.IdentityConfig's default, 10 s).
	chainCheckEvery time.Duration
	// keyCheckEvery is how often the sweep role probes its HSM or KMS keys
	// (serve: 5 s).
	keyCheckEvery time.Duration

	// publicBaseURL is where payers and merchants reach the HTTP APIs
	// (PUBLIC_BASE_URL); checkout_url starts with it. selfBaseURL makes it
	// the listener's own address (payd dev).
	publicBaseURL string
	selfBaseURL   bool
	// selfRPCURL makes the RPC URL the checkout page offers to browser
	// wallets the RPC proxy's own address (payd dev) instead of
	// chain.publicRPCURL.
	selfRPCURL bool
	// mailer sends the dashboard's one-time links; nil: none.
	mailer *dashboard.SMTPMailer
	// frameAncestors may embed the checkout page (CSP frame-ancestors).
	frameAncestors []string
	// loopbackRedirects accepts http redirect_url values on loopback.
	loopbackRedirects bool
	// pricing configures fiat pricing (PRICING_*; payd dev: the dev rate
	// table); the zero value turns it off.
	pricing pricingConfig
	// chains are the chains besides the first (CHAINS_FILE): each has its
	// own nodes, identity guard, indexer, settlement and sweep, and the API
	// creates invoices on each (docs/chains.md).
	chains []chainSpec
	// onlyChains, when set (--chains), limits the roles that work on a
	// chain — the gateway's indexer, settlement, sweep — to these chains;
	// the api and webhooks roles serve every chain. nil: every chain.
	onlyChains map[uint64]bool

	log *slog.Logger
}

// app is one payd process: the parts its roles need, wired together.
type app struct {
	cfg appConfig
	log *slog.Logger
	// db is the database, bound to no chain; st is db bound to the first
	// chain (what the process's first-chain parts read and write).
	db      store.Store
	st      store.Store
	reg     *prometheus.Registry
	rpc     *rpc.Client
	eth     *ethclient.Client
	chainID uint64
	assets  []store.Asset // the accepted tokens, decimals read from the chain
	// tokenSupplies are the tokens' totalSupply() at start: no invoice is
	// for more.
	tokenSupplies map[common.Address]store.Amount
	// identity compares the node with the chain the database holds, at
	// start, in the background and before sweep sends a signed
	// transaction.
	identity *indexer.Identity
	// pricer quotes fiat prices (api role), values late payments (settlement
	// role) and fiat invoices' gas (sweep role) at today's rates; nil
	// without fiat pricing.
	pricer *pricing.Pricer

	adminToken string
	// svc is evmpay's parts of this process's roles, wired by
	// hosts/service: invoices and sweeper are its.
	svc      *service.Service
	invoices *invoice.Service
	sweeper  *sweep.Sweeper
	// dashboard is the merchant dashboard at /dashboard (api role).
	dashboard *dashboard.Dashboard

	mux        *httpapi.Mux // the HTTP API listener's routes
	metricsMux *httpapi.Mux // the operator listener's routes (/metrics)
	proxy      *rpcproxy.Proxy
	// chainProxies front the further chains (/chains/<id>); proxyHandler
	// routes the proxy listener's requests to proxy or one of them.
	chainProxies []*rpcproxy.Proxy
	proxyHandler http.Handler
	// pool is the chain's nodes when RPC_URL lists several: every role
	// reads and sends through it (failover; docs/chains.md).
	pool    *nodes.Pool
	workers []worker
	// first is the first chain (rpc, eth, pool, chainID, st, assets and
	// tokenSupplies are its, kept apart for the parts that serve it alone);
	// others are the chains besides it (appConfig.chains).
	first  *chainUnit
	others []*chainUnit
	// stops are the chains' stop records as the API last read them.
	stops stopReads
	// keys are the sweep role's signers, loaded once for every chain.
	keys *sweep.Keys

	httpLn, proxyLn, metricsLn net.Listener
}

type worker struct {
	name string
	run  func(context.Context) error
}

// newApp connects to the chain, builds every part the roles need and binds
// the listeners, so that a configuration mistake surfaces before anything
// runs.
func newApp(ctx context.Context, st store.Store, cfg appConfig) (*app, error) {
	a := &app{cfg: cfg, log: cfg.log, db: st, st: st, reg: prometheus.NewRegistry(), mux: httpapi.NewMux(), metricsMux: httpapi.NewMux()}
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ok := false
	defer func() {
		if !ok {
			a.close()
		}
	}()

	var err error
	if err := a.checkChains(); err != nil {
		return nil, err
	}
	first, err := a.connect(ctx, a.cfg.chain)
	if err != nil {
		return nil, err
	}
	a.first = first
	a.rpc, a.eth, a.pool, a.chainID, a.st = first.rpc, first.eth, first.pool, first.id, first.st
	a.assets, a.tokenSupplies = first.assets, first.tokenSupplies
	if a.cfg.reads != nil {
		a.cfg.reads = a.cfg.reads.Chain(a.chainID)
	}
	for _, spec := range cfg.chains {
		u, err := a.connect(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("chain %d (CHAINS_FILE): %w", spec.chainID, err)
		}
		a.others = append(a.others, u)
	}
	if cfg.reads != nil {
		if err := checkReplicaAtStart(ctx, a.st, a.cfg.reads); err != nil {
			return nil, err
		}
	}
	// Rates: the API quotes, settlement values late payments, sweep values
	// the gas of fiat invoices.
	if cfg.roles[roleAPI] || cfg.roles[roleSettlement] || cfg.roles[roleSweep] {
		if a.pricer, err = a.buildPricer(a.eth); err != nil {
			return nil, err
		}
	}
	if cfg.roles[roleAPI] || cfg.roles[roleSweep] {
		if a.adminToken, err = loadAdminToken(ctx, cfg.keys); err != nil {
			return nil, err
		}
	}
	// The listeners are bound first: payd dev's checkout URLs name their
	// addresses (which --http 127.0.0.1:0 only fixes here).
	if a.httpLn, err = net.Listen("tcp", cfg.httpAddr); err != nil {
		return nil, fmt.Errorf("--http %s: %w (is another payd running? choose another address)", cfg.httpAddr, err)
	}
	if cfg.roles[roleGateway] {
		if a.proxyLn, err = net.Listen("tcp", cfg.proxyAddr); err != nil {
			return nil, fmt.Errorf("--rpc-proxy %s: %w (choose another address)", cfg.proxyAddr, err)
		}
	}
	if err := a.buildService(ctx); err != nil {
		return nil, err
	}
	build := []struct {
		role string
		fn   func(context.Context) error
	}{
		{roleAPI, a.buildAPI},
		{roleGateway, a.buildGateway},
		{roleSettlement, a.buildSettlement},
		{roleSweep, a.buildSweep},
	}
	for _, b := range build {
		if cfg.roles[b.role] {
			if err := b.fn(ctx); err != nil {
				return nil, fmt.Errorf("%s role: %w", b.role, err)
			}
		}
	}
	if err := a.buildOps(); err != nil {
		return nil, err
	}
	if cfg.metricsAddr != "" {
		if a.metricsLn, err = net.Listen("tcp", cfg.metricsAddr); err != nil {
			return nil, fmt.Errorf("--metrics %s: %w (choose another address, or --metrics '' to serve no metrics)", cfg.metricsAddr, err)
		}
		if !loopbackListener(a.metricsLn.Addr()) {
			a.log.Warn("the operator listener serves /metrics without authentication beyond this machine: "+
				"it tells invoice counts and wallet balances to anyone who can reach it; bind it to 127.0.0.1 "+
				"(the default) or a private interface, or put it behind a firewall or an authenticating proxy",
				"metrics", a.metricsLn.Addr().String())
		}
	}
	ok = true
	return a, nil
}

// nodeURLs splits RPC_URL's comma-separated list of one chain's nodes.
func nodeURLs(list string) []string {
	var out []string
	for _, u := range strings.Split(list, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// buildService wires evmpay's parts of this process's roles with
// hosts/service — the chain's identity recorded at the first start and
// checked at every start and in the background (a node that serves
// another chain is refused, never taken for a reorg), the confirmations
// set once, the pricer checked — from payd's configuration and keys.
func (a *app) buildService(ctx context.Context) error {
	on := a.runsChain(a.chainID)
	roles := service.Roles{API: a.cfg.roles[roleAPI], Indexer: a.cfg.roles[roleGateway] && on, Settlement: a.cfg.roles[roleSettlement] && on,
		Sweep: a.cfg.roles[roleSweep] && on, Webhooks: a.cfg.roles[roleWebhooks]}
	cfg := a.chainConfig(a.first, roles)
	cfg.Pricer, cfg.PublicBaseURL, cfg.AllowPrivateWebhooks = a.pricer, a.publicBaseURL(), !a.cfg.blockPrivateWH
	cfg.Webhook = webhook.Config{Registerer: a.metrics()}
	if roles.API || roles.Webhooks {
		var err error
		if cfg.SecretKey, err = loadSecretKey(ctx, a.cfg.keys); err != nil {
			return err
		}
	}
	if roles.API {
		if err := a.apiConfig(ctx, &cfg); err != nil {
			return fmt.Errorf("api role: %w", err)
		}
	}
	if a.cfg.roles[roleSweep] {
		w, err := loadWallet(ctx, a.cfg.keys)
		if err != nil {
			return fmt.Errorf("sweep role: %w", err)
		}
		keys, err := sweepKeys(ctx, a.cfg.keys, w, a.log)
		if err != nil {
			return fmt.Errorf("sweep role: %w", err)
		}
		// Refunds and payouts leave from the merchants' payout wallets.
		if keys.Payouts, err = payoutSigner(ctx, a.cfg.keys, w); err != nil {
			return fmt.Errorf("sweep role: %w", err)
		}
		a.keys = &keys
	}
	if roles.Sweep {
		cfg.Keys = a.keys
	}
	// With --chains leaving out the first chain, a process of the
	// chain-bound roles only runs nothing of it (service.New would take
	// no roles for all of them).
	if roles != (service.Roles{}) {
		// With further chains, a chain problem stops the first chain's
		// parts only, as it does a further chain's: the API, webhooks and
		// the other chains go on. With one chain there is nothing to go on
		// for: the process stops, and a restart is refused with what to do.
		if len(a.others) > 0 {
			cfg.ChainStopped = func(ctx context.Context, err error) bool {
				return a.first.stop(ctx, a.log, a.identity, err)
			}
		}
		svc, err := service.New(ctx, cfg)
		if err != nil {
			return err
		}
		a.svc, a.identity, a.invoices, a.sweeper = svc, svc.Identity, svc.Invoices, svc.Sweeper
		run := svc.Run
		if roles.Indexer || roles.Settlement || roles.Sweep {
			run = a.runChainParts(a.st, a.chainID, run)
		}
		a.workers = append(a.workers, worker{chainWorker("evmpay", a.chainID, a.cfg.chains), run})
	}
	for _, u := range a.others {
		if err := a.buildChainService(ctx, u); err != nil {
			return fmt.Errorf("chain %d: %w", u.id, err)
		}
	}
	return nil
}

// apiConfig sets the API role's settings: deposit addresses (from PAY_XPUB
// or the mnemonic's public part), the merchants' rules, the checkout page.
func (a *app) apiConfig(ctx context.Context, cfg *service.Config) error {
	deriver, err := a.deriver(ctx)
	if err != nil {
		return err
	}
	doc, err := openAPIDocument()
	if err != nil {
		return err
	}
	rules, err := merchantRules(ctx, a.cfg.keys, a.cfg.xpub == "", a.cfg.blockPrivateWH, a.eth, a.log.With("component", "invoice"))
	if err != nil {
		return err
	}
	cfg.Deriver = deriver
	cfg.Invoice = invoice.Config{
		TokenMaxAmounts:           a.tokenSupplies,
		PublicLookups:             invoice.LookupLimit{TrustedProxies: a.cfg.trustedProxies},
		AllowLoopbackHTTPRedirect: a.cfg.loopbackRedirects,
		AdminToken:                a.adminToken,
		OpenAPI:                   doc,
		Merchants:                 rules,
		Chains:                    a.invoiceChains(),
		ChainStopped:              a.chainStopped,
	}
	rpcURL := a.cfg.chain.publicRPCURL
	if a.cfg.selfRPCURL {
		rpcURL = a.proxyURL()
	}
	cfg.Checkout = checkout.Config{
		ChainName:          a.cfg.chain.chainName,
		RPCURL:             rpcURL,
		FrameAncestors:     a.cfg.frameAncestors,
		ExplorerTxURL:      a.cfg.chain.explorerTxURL,
		ExplorerAddressURL: a.cfg.chain.explorerAddressURL,
		Networks:           a.checkoutNetworks(),
	}
	return nil
}

// buildAPI mounts the API role's routes: evmpay's (the invoice API, the
// checkout and claim pages, the deliveries API) and the reconciliation.
func (a *app) buildAPI(ctx context.Context) error {
	a.svc.Register(a.mux)
	if err := a.buildDashboard(ctx); err != nil {
		return err
	}
	return a.buildReconciliation()
}

// metrics is the registerer for packages whose metric names carry no
// namespace: under payd every metric starts with evmpay_ (sweep's already
// do).
func (a *app) metrics() prometheus.Registerer {
	return prometheus.WrapRegistererWithPrefix("evmpay_", a.reg)
}

// deriver is the api role's public-only view of the deposit wallet: from
// PAY_XPUB when set, otherwise from the mnemonic (whose private part is
// dropped).
func (a *app) deriver(ctx context.Context) (*hdwallet.Deriver, error) {
	if a.cfg.xpub != "" {
		return hdwallet.NewDeriver(a.cfg.xpub)
	}
	w, err := loadWallet(ctx, a.cfg.keys)
	if err != nil {
		return nil, fmt.Errorf("%w (or set PAY_XPUB, printed by `payd xpub`, so that the API process holds no private key)", err)
	}
	d := w.Deriver()
	w.Wipe()
	return d, nil
}

// buildGateway builds the RPC proxy: the first chain's at every path but
// /chains/, and each further chain this process runs at /chains/<id>,
// each with its own limits, node pool and metrics (chain_id label).
func (a *app) buildGateway(ctx context.Context) error {
	var err error
	if a.proxy, err = a.newProxy(a.chainID, a.cfg.chain.rpcURL, a.pool); err != nil {
		return err
	}
	if len(a.others) == 0 {
		a.proxyHandler = a.proxy
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/", a.proxy)
	var paths []string
	for _, u := range a.others {
		if !a.runsChain(u.id) {
			continue
		}
		p, err := a.newProxy(u.id, u.spec.rpcURL, u.pool)
		if err != nil {
			return fmt.Errorf("chain %d: %w", u.id, err)
		}
		a.chainProxies = append(a.chainProxies, p)
		path := "/chains/" + strconv.FormatUint(u.id, 10)
		mux.Handle(path, p)
		paths = append(paths, path)
	}
	// Another chain's id is no reason to answer for the first chain.
	mux.HandleFunc("/chains/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no chain at this path; this RPC proxy serves / and "+strings.Join(paths, ", "), http.StatusNotFound)
	})
	a.proxyHandler = mux
	return nil
}

// newProxy is an RPC proxy in front of chain id's node URL, or its node
// pool when it has several nodes.
func (a *app) newProxy(id uint64, url string, pool *nodes.Pool) (*rpcproxy.Proxy, error) {
	var upstream http.RoundTripper
	if pool != nil {
		url, upstream = "", pool
	}
	return rpcproxy.New(url, rpcproxy.Config{
		Upstream:       upstream,
		Rate:           rate.Limit(a.cfg.proxyRate),
		TrustedProxies: a.cfg.trustedProxies,
		Burst:          a.cfg.proxyBurst,
		Registerer:     a.chainMetrics(id),
		Logger:         a.log.With("component", "rpcproxy", "chain_id", id),
	})
}

// tokenAddresses are the accepted tokens' contracts, whose Transfer logs
// the indexer records.
func (a *app) tokenAddresses() []common.Address {
	out := make([]common.Address, 0, len(a.assets))
	for _, as := range a.assets {
		if t := as.Token(); t != nil {
			out = append(out, *t)
		}
	}
	return out
}

// buildSettlement adds the settlement role's housekeeping: archiving.
func (a *app) buildSettlement(context.Context) error {
	a.workers = append(a.workers, worker{"archive", a.runArchive})
	return nil
}

// buildSweep adds the sweep role's key health checks (/readyz says when
// an HSM or KMS key cannot be reached).
func (a *app) buildSweep(context.Context) error {
	if kr, ok := a.cfg.keys.(*keyring); ok {
		a.workers = append(a.workers, worker{"key-health", func(ctx context.Context) error { return kr.runHealth(ctx, a.cfg.keyCheckEvery) }})
	}
	return nil
}

// runArchive moves finished invoices older than the retention to
// invoices_archive, in batches, every archiveEvery.
func (a *app) runArchive(ctx context.Context) error {
	if a.cfg.archiveAfter <= 0 {
		return nil
	}
	t := time.NewTicker(a.cfg.archiveEvery)
	defer t.Stop()
	for {
		cutoff := time.Now().Add(-a.cfg.archiveAfter)
		total := 0
		for ctx.Err() == nil {
			n, err := a.st.ArchiveInvoices(ctx, cutoff, 1000)
			if err != nil {
				if ctx.Err() == nil {
					a.log.WarnContext(ctx, "archive failed; will retry", "err", err)
				}
				break
			}
			total += n
			if n == 0 {
				break
			}
		}
		if total > 0 {
			a.log.InfoContext(ctx, "archived invoices", "count", total, "created_before", cutoff.Format(time.RFC3339))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// run serves HTTP and runs the workers until ctx is cancelled or one of them
// fails, then shuts everything down gracefully.
func (a *app) run(ctx context.Context) error {
	defer a.close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var wg sync.WaitGroup
	fail := func(name string, err error) {
		if err != nil && ctx.Err() == nil {
			a.log.Error("part failed; shutting down", "part", name, "err", err)
			cancel(fmt.Errorf("%s: %w", name, err))
		}
	}
	servers := []*http.Server{newServer(a.mux, a.log)}
	listeners := []net.Listener{a.httpLn}
	if a.proxy != nil {
		servers = append(servers, newServer(a.proxyHandler, a.log))
		listeners = append(listeners, a.proxy.LimitListener(a.proxyLn)) // connection caps per client and in total
	}
	if a.metricsLn != nil {
		servers = append(servers, newServer(a.metricsMux, a.log))
		listeners = append(listeners, a.metricsLn)
	}
	for i, srv := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(listeners[i]); !errors.Is(err, http.ErrServerClosed) {
				fail("http "+listeners[i].Addr().String(), err)
			}
		}()
	}
	for _, w := range a.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail(w.name, w.run(ctx))
		}()
	}
	<-ctx.Done()
	a.log.Info("shutting down: finishing in-flight work")
	shutdown, done := context.WithTimeout(context.Background(), 15*time.Second)
	defer done()
	for _, srv := range servers {
		_ = srv.Shutdown(shutdown)
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	a.log.Info("stopped")
	return nil
}

func newServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

func (a *app) close() {
	if a.httpLn != nil {
		a.httpLn.Close()
	}
	if a.proxyLn != nil {
		a.proxyLn.Close()
	}
	if a.metricsLn != nil {
		a.metricsLn.Close()
	}
	if a.proxy != nil {
		a.proxy.CloseIdleConnections()
	}
	for _, p := range a.chainProxies {
		p.CloseIdleConnections()
	}
	for _, u := range append([]*chainUnit{a.first}, a.others...) {
		if u != nil {
			u.rpc.Close()
		}
	}
}

// publicBaseURL is where the HTTP APIs are reached from outside: the
// configured PUBLIC_BASE_URL, or the listener's own address for payd dev,
// or "" (URLs relative to the host).
func (a *app) publicBaseURL() string {
	if a.cfg.selfBaseURL {
		return a.httpURL()
	}
	return strings.TrimRight(a.cfg.publicBaseURL, "/")
}

// httpURL is the address the HTTP APIs listen on, as a URL.
func (a *app) httpURL() string { return "http://" + a.httpLn.Addr().String() }

// metricsURL is the operator listener's URL, or "" when metrics are off.
func (a *app) metricsURL() string {
	if a.metricsLn == nil {
		return ""
	}
	return "http://" + a.metricsLn.Addr().String()
}

// proxyURL is the RPC proxy's URL, or "" without the gateway role.
func (a *app) proxyURL() string {
	if a.proxyLn == nil {
		return ""
	}
	return "http://" + a.proxyLn.Addr().String()
}

// loopbackListener reports whether a listener accepts connections from this
// machine only.
func loopbackListener(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
