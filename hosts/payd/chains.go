package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evmpay/evmpay/hosts/service"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/invoice/checkout"
	"github.com/evmpay/evmpay/rpcproxy/nodes"
	"github.com/evmpay/evmpay/settlement"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/sweep"
)

// chainSpec is one chain's settings: the first chain's from the
// environment (RPC_URL, CHAIN_ID, FINALITY, …), each further chain's from
// CHAINS_FILE (docs/chains.md, "One payd, several chains").
type chainSpec struct {
	// rpcURL is the chain's node, or several, comma-separated (failover).
	rpcURL string
	// chainID is the chain id the node must report; 0 (the first chain
	// only): whatever it reports.
	chainID       uint64
	confirmations int
	// finality is the chain's finality mode (FINALITY: depth, instant, tag).
	finality string
	// minGasPrice is the node's minimum gas price in wei (MIN_GAS_PRICE):
	// no sweep transaction is priced below it.
	minGasPrice store.Amount
	// tokens are the accepted ERC-20 tokens (PAY_TOKENS or PAY_TOKENS_FILE).
	tokens []tokenConfig
	// publicRPCURL is the RPC URL offered to browser wallets
	// (PUBLIC_RPC_URL); chainName the chain's name on the checkout page
	// (CHAIN_NAME).
	publicRPCURL string
	chainName    string
	// nativeSymbol is the chain's native coin (NATIVE_SYMBOL, e.g. an
	// evmd chain's "TEST"); "" is "ETH".
	nativeSymbol string
	// explorerTxURL and explorerAddressURL are the chain's block explorer
	// pages the checkout page links to (CHAIN_EXPLORER_TX_URL with {tx},
	// CHAIN_EXPLORER_ADDRESS_URL with {address}).
	explorerTxURL, explorerAddressURL string
}

// readChainSpec reads one chain's settings with getenv (the environment,
// or a CHAINS_FILE entry as fileChainEnv presents it).
func readChainSpec(getenv func(string) string) (chainSpec, []error) {
	c := chainSpec{confirmations: 12}
	var errs []error
	rpcURL, err := nodeURL(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	c.rpcURL = rpcURL
	if c.rpcURL == "" && err == nil {
		errs = append(errs, errors.New("RPC_URL is required (the chain node's JSON-RPC, e.g. http://127.0.0.1:8545; or RPC_URL_FILE naming a file that holds it)"))
	}
	parse := func(name string, fn func(string) error) {
		if v := getenv(name); v != "" {
			if err := fn(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
		}
	}
	parse("CHAIN_ID", func(v string) (err error) { c.chainID, err = strconv.ParseUint(v, 10, 64); return })
	parse("CONFIRMATIONS", func(v string) (err error) { c.confirmations, err = strconv.Atoi(v); return })
	parse("FINALITY", func(v string) error {
		c.finality = v
		if v != "" && !store.FinalityCountsConfirmations(v) {
			if getenv("CONFIRMATIONS") != "" {
				return fmt.Errorf("%s finality takes no CONFIRMATIONS: unset it", v)
			}
			c.confirmations = 0
		}
		return store.CheckFinality(v, c.confirmations)
	})
	parse("MIN_GAS_PRICE", func(v string) (err error) {
		if c.minGasPrice, err = store.ParseAmount(v); err != nil {
			return errors.New("want a decimal number of wei per gas, e.g. 1000000000")
		}
		return nil
	})
	parse("PUBLIC_RPC_URL", func(v string) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("want an absolute http(s) URL, e.g. https://rpc.pay.example.com")
		}
		c.publicRPCURL = v
		return nil
	})
	c.chainName = getenv("CHAIN_NAME")
	parse("NATIVE_SYMBOL", func(v string) error { c.nativeSymbol = v; return service.CheckNativeSymbol(v) })
	explorer := func(name, placeholder string, dst *string) {
		parse(name, func(v string) error {
			u, err := url.Parse(strings.Replace(v, placeholder, "x", 1))
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Count(v, placeholder) != 1 {
				return fmt.Errorf("want an absolute http(s) URL with %s once, e.g. https://explorer.example/…/%s", placeholder, placeholder)
			}
			*dst = v
			return nil
		})
	}
	explorer("CHAIN_EXPLORER_TX_URL", "{tx}", &c.explorerTxURL)
	explorer("CHAIN_EXPLORER_ADDRESS_URL", "{address}", &c.explorerAddressURL)
	var toks []tokenConfig
	if raw := getenv(tokensJSON); raw != "" {
		if toks, err = parseTokensJSON([]byte(raw)); err == nil {
			err = checkTokens(toks)
		}
		if err != nil {
			err = fmt.Errorf("tokens: %w", err)
		}
	} else {
		toks, err = readTokens(getenv)
	}
	if err != nil {
		errs = append(errs, err)
	}
	c.tokens = toks
	return c, errs
}

// fileChainKeys maps a CHAINS_FILE entry's members to the settings of the
// environment they stand for.
var fileChainKeys = map[string]string{
	"chain_id": "CHAIN_ID", "rpc_url": "RPC_URL", "name": "CHAIN_NAME", "native_symbol": "NATIVE_SYMBOL",
	"finality": "FINALITY", "confirmations": "CONFIRMATIONS", "min_gas_price": "MIN_GAS_PRICE",
	"public_rpc_url": "PUBLIC_RPC_URL", "explorer_tx_url": "CHAIN_EXPLORER_TX_URL",
	"explorer_address_url": "CHAIN_EXPLORER_ADDRESS_URL", "tokens": tokensJSON,
}

// tokensJSON is the name under which fileChainEnv presents an entry's
// tokens array: no environment variable can have it (a NUL byte).
const tokensJSON = "\x00tokens"

// readChainsFile reads CHAINS_FILE: the chains besides the environment's
// first one, as a JSON object {"chains": [{…}, …]} whose entries have the
// members of fileChainKeys (chain_id and rpc_url required; tokens an
// array as PAY_TOKENS_FILE holds). "" reads none.
func readChainsFile(path string, first chainSpec) ([]chainSpec, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CHAINS_FILE: %w", err)
	}
	var doc struct {
		Chains []map[string]json.RawMessage `json:"chains"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf(`CHAINS_FILE %s: want {"chains": [{"chain_id": 9000, "rpc_url": "http://…", …}]}: %w`, path, err)
	}
	var (
		out  []chainSpec
		errs []error
	)
	seen := []uint64{first.chainID}
	for i, entry := range doc.Chains {
		where := fmt.Sprintf("CHAINS_FILE %s: chains[%d]", path, i)
		getenv, err := fileChainEnv(entry)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		c, cerrs := readChainSpec(getenv)
		for _, err := range cerrs {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		switch {
		case len(cerrs) > 0:
		case c.chainID == 0:
			errs = append(errs, fmt.Errorf("%s: chain_id is required", where))
		case slices.Contains(seen, c.chainID):
			errs = append(errs, fmt.Errorf("%s: chain %d is configured twice (CHAIN_ID names the first chain)", where, c.chainID))
		default:
			seen = append(seen, c.chainID)
			out = append(out, c)
		}
	}
	if len(out) > 0 && first.chainID == 0 {
		errs = append(errs, errors.New("CHAINS_FILE lists more chains: set CHAIN_ID for the first one (RPC_URL's)"))
	}
	return out, errors.Join(errs...)
}

// fileChainEnv presents a CHAINS_FILE entry as the environment of its
// chain: member chain_id is CHAIN_ID, and so on (fileChainKeys). Numbers
// may be given as JSON numbers or strings.
func fileChainEnv(entry map[string]json.RawMessage) (func(string) string, error) {
	env := map[string]string{}
	for k, raw := range entry {
		name, ok := fileChainKeys[k]
		if !ok {
			return nil, fmt.Errorf("unknown member %q", k)
		}
		if name == tokensJSON {
			env[name] = string(raw)
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			var n json.Number
			d := json.NewDecoder(bytes.NewReader(raw))
			d.UseNumber()
			if d.Decode(&n) != nil {
				return nil, fmt.Errorf("%s must be a string or a number", k)
			}
			s = n.String()
		}
		env[name] = s
	}
	return func(name string) string { return env[name] }, nil
}

// chainUnit is one chain of the process: its nodes, checked against the
// chain the database holds, its tokens read from the chain, and (for a
// chain besides the first) the evmpay parts that work on it.
type chainUnit struct {
	spec chainSpec
	id   uint64
	rpc  *rpc.Client
	eth  *ethclient.Client
	// pool is the chain's nodes when its RPC URL lists several.
	pool *nodes.Pool
	// st is the database bound to this chain.
	st            store.Store
	assets        []store.Asset
	tokenSupplies map[common.Address]store.Amount
	svc           *service.Service
	// stopped is why the chain's parts stopped while the process went on
	// (nil while they run): see stop.
	stopped atomic.Pointer[error]
}

// stopReason is why the chain's parts stopped, or nil (also for no unit:
// an app built without a node).
func (u *chainUnit) stopReason() error {
	if u == nil {
		return nil
	}
	if p := u.stopped.Load(); p != nil {
		return *p
	}
	return nil
}

// chainStopped is why chain id's parts stopped — in this process, or in
// the one that runs them (--chains), as its stop record says — or nil:
// the API refuses new invoices on a stopped chain
// (invoice.Config.ChainStopped).
func (a *app) chainStopped(id uint64) error {
	if err := a.unitOf(id).stopReason(); err != nil {
		return err
	}
	if a.db == nil {
		return nil // an app built without a database, as some tests build it
	}
	return a.stops.stopped(a.db, id)
}

// unitOf is chain id's unit, nil when it is not configured.
func (a *app) unitOf(id uint64) *chainUnit {
	if a.first != nil && a.first.id == id {
		return a.first
	}
	for _, u := range a.others {
		if u.id == id {
			return u
		}
	}
	return nil
}

// stopReadEvery is how long the API trusts a chain's stop record it read
// (store.StopStore): a creation costs no read of its own, and a stop is
// seen this long after it is recorded at most.
const stopReadEvery = 2 * time.Second

// stopReads are the chains' stop records as the API last read them.
type stopReads struct {
	mu   sync.Mutex
	last map[uint64]stopRead
}

// stopRead is a chain's stop record as read at read: problem is "" when
// the chain's parts run (or the read failed).
type stopRead struct {
	read    time.Time
	problem string
	at      time.Time
}

// stopped is chain id's recorded stop, read again when the last read is
// older than stopReadEvery. A failed read is no stop: the creation that
// asks fails on the database anyway, or goes through.
func (r *stopReads) stopped(db store.Store, id uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.last[id]
	if !ok || time.Since(e.read) >= stopReadEvery {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		e = stopRead{read: time.Now()}
		if problem, at, ok, err := db.Chain(id).ChainStop(ctx); err == nil && ok {
			e.problem, e.at = problem, at
		}
		if r.last == nil {
			r.last = map[uint64]stopRead{}
		}
		r.last[id] = e
	}
	return e.err(id)
}

// recordedCauses are the errors a stop record's problem stands for, so
// that chainProblem names a recorded stop as the stopping process did.
var recordedCauses = map[string]error{
	problemReorgTooDeep: store.ErrReorgTooDeep,
	problemAnotherChain: indexer.ErrWrongChain,
}

// err is the recorded stop as the error the stopping process saw, or nil.
func (e stopRead) err(id uint64) error {
	if e.problem == "" {
		return nil
	}
	cause, ok := recordedCauses[e.problem]
	if !ok { // a problem a later version records
		return fmt.Errorf("chain %d's parts stopped at %s: %s", id, e.at.Format(time.RFC3339), e.problem)
	}
	return fmt.Errorf("chain %d's parts stopped at %s, as the process that runs them recorded: %w",
		id, e.at.Format(time.RFC3339), cause)
}

// runChainParts is run (a chain's service's Run) after clearing the
// chain's stop record: a process that starts the chain's parts again says
// so to the API processes that read it.
func (a *app) runChainParts(st store.Store, id uint64, run func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := st.SetChainStop(ctx, "", time.Time{}); err != nil {
			a.log.WarnContext(ctx, "could not clear the chain's stop record; the API may refuse its invoices until it is",
				slog.Uint64("chain_id", id), slog.String("error", err.Error()))
		}
		return run(ctx)
	}
}

// checkChains refuses --chains naming a chain that is not configured.
func (a *app) checkChains() error {
	for id := range a.cfg.onlyChains {
		known := id == a.cfg.chain.chainID
		for _, c := range a.cfg.chains {
			known = known || c.chainID == id
		}
		if !known {
			return usageError(fmt.Sprintf("--chains: chain %d is not configured (CHAIN_ID names the first chain, CHAINS_FILE the others)", id))
		}
	}
	if len(a.cfg.onlyChains) > 0 && a.cfg.chain.chainID == 0 {
		return usageError("--chains needs CHAIN_ID: set the first chain's id")
	}
	return nil
}

// runsChain tells whether this process's chain-bound roles work on chain
// id (--chains).
func (a *app) runsChain(id uint64) bool {
	return a.cfg.onlyChains == nil || a.cfg.onlyChains[id]
}

// connect dials a chain's nodes — through a node pool when its RPC URL
// lists several — checks the chain id and, against the database, the
// chain's identity, and reads its tokens' decimals and supplies.
func (a *app) connect(ctx context.Context, spec chainSpec) (*chainUnit, error) {
	u := &chainUnit{spec: spec}
	var err error
	if urls := nodeURLs(spec.rpcURL); len(urls) > 1 {
		if u.pool, err = a.startNodePool(ctx, spec.chainID, urls); err != nil {
			return nil, err
		}
		if u.rpc, err = u.pool.Client(ctx); err != nil {
			return nil, err
		}
	} else if u.rpc, err = rpc.DialContext(ctx, spec.rpcURL); err != nil {
		return nil, fmt.Errorf("chain node %s: %w", redactURL(spec.rpcURL), err)
	}
	u.eth = ethclient.NewClient(u.rpc)
	if u.id, err = a.verifyChain(ctx, u, spec); err != nil {
		u.rpc.Close()
		return nil, err
	}
	u.st = a.db.Chain(u.id)
	if u.assets, u.tokenSupplies, err = resolveTokens(ctx, u.eth, spec.tokens); err != nil {
		u.rpc.Close()
		return nil, err
	}
	return u, nil
}

// verifyChain reads the node's chain id and compares it with the expected
// one (CHAIN_ID; paying into the wrong chain loses money), then the node
// with the chain the database holds, before anything is read from it: on
// another chain the configured tokens are not there, and "decimals()
// returned 0 bytes" would hide the real reason. (service.New checks again
// and keeps checking.)
func (a *app) verifyChain(ctx context.Context, u *chainUnit, spec chainSpec) (uint64, error) {
	id, err := u.eth.ChainID(ctx)
	if err != nil {
		return 0, fmt.Errorf("chain node %s does not answer eth_chainId (is RPC_URL right and the node up?): %w", redactURL(spec.rpcURL), err)
	}
	if !id.IsUint64() {
		return 0, fmt.Errorf("chain id %s out of range", id)
	}
	if spec.chainID != 0 && spec.chainID != id.Uint64() {
		return 0, fmt.Errorf("CHAIN_ID is %d but the node at %s reports chain %d: refusing to take payments on the wrong chain", spec.chainID, redactURL(spec.rpcURL), id)
	}
	ident, err := indexer.NewIdentity(indexer.NewRPCSource(u.rpc), a.db.Chain(id.Uint64()), indexer.IdentityConfig{ChainID: id.Uint64()})
	if err != nil {
		return 0, err
	}
	if _, err := ident.Check(ctx); err != nil && !errors.Is(err, store.ErrNodeBehind) {
		return 0, fmt.Errorf("refusing to start: %w", err)
	}
	return id.Uint64(), nil
}

// startNodePool makes a chain's nodes one (rpcproxy/nodes): a read goes
// to a healthy node that is not behind, never below a head already served;
// a transaction goes to every node. Each node is checked against the
// chain the database holds (its identity) before it is used; at least one
// must pass at start.
func (a *app) startNodePool(ctx context.Context, chainID uint64, urls []string) (*nodes.Pool, error) {
	pool, err := nodes.New(urls, nodes.Config{
		ChainID:        chainID,
		RequestTimeout: 30 * time.Second, // the heaviest call the proxy allows
		Registerer:     a.chainMetrics(chainID),
		Logger:         a.log.With("component", "nodes", "chain_id", chainID),
		Guard: func(ctx context.Context, _ string, c *rpc.Client) error {
			// The node is compared with the record of the chain it
			// serves (the pool has already refused a node of another
			// chain than the pool's).
			chain, err := ethclient.NewClient(c).ChainID(ctx)
			if err != nil {
				return err
			}
			if !chain.IsUint64() {
				return fmt.Errorf("chain id %s out of range", chain)
			}
			id, err := indexer.NewIdentity(indexer.NewRPCSource(c), a.db.Chain(chain.Uint64()), indexer.IdentityConfig{ChainID: chainID})
			if err != nil {
				return err
			}
			_, err = id.Check(ctx)
			return err
		},
	})
	if err != nil {
		return nil, fmt.Errorf("RPC_URL: %w", err)
	}
	if err := pool.Check(ctx); err != nil {
		return nil, fmt.Errorf("RPC_URL: no usable chain node at start: %w", err)
	}
	a.workers = append(a.workers, worker{chainWorker("nodes", chainID, a.cfg.chains), pool.Run})
	a.log.Info("chain nodes", "chain_id", chainID, "nodes", len(urls), "usable", usable(pool.Status()))
	return pool, nil
}

// chainWorker names a worker of chain id: "name@id" when the process
// serves several chains.
func chainWorker(name string, id uint64, others []chainSpec) string {
	if len(others) == 0 {
		return name
	}
	return name + "@" + strconv.FormatUint(id, 10)
}

// chainMetrics is the registerer of a chain's parts: with several chains,
// every metric of a chain's parts carries its chain_id label (the same
// names for every chain); with one, none (as before several chains).
func (a *app) chainMetrics(id uint64) prometheus.Registerer {
	return a.chainLabel(id, a.metrics())
}

// chainLabel is reg with the chain_id label when the process serves
// several chains.
func (a *app) chainLabel(id uint64, reg prometheus.Registerer) prometheus.Registerer {
	if len(a.cfg.chains) == 0 {
		return reg
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{"chain_id": strconv.FormatUint(id, 10)}, reg)
}

func usable(st []nodes.NodeStatus) int {
	n := 0
	for _, s := range st {
		if s.Up {
			n++
		}
	}
	return n
}

// chainConfig is the service configuration of chain u's parts for roles.
func (a *app) chainConfig(u *chainUnit, roles service.Roles) service.Config {
	return service.Config{
		Store: u.st, RPC: u.rpc, ChainID: u.id, Confirmations: u.spec.confirmations, Finality: u.spec.finality,
		NativeSymbol: u.spec.nativeSymbol, Tokens: u.assets, Roles: roles, Backfill: a.cfg.backfill,
		Logger:   a.log,
		Identity: indexer.IdentityConfig{CheckInterval: a.cfg.chainCheckEvery},
		// Metrics: every name starts with evmpay_ (sweep's already do);
		// with several chains each carries its chain_id.
		Indexer:    indexer.Config{Registerer: a.chainMetrics(u.id)},
		Settlement: settlement.Config{Registerer: a.chainMetrics(u.id)},
		Sweep: sweep.Config{Policy: a.cfg.sweepPolicy, TokenPaths: tokenPaths(u.spec.tokens), MinGasPrice: u.spec.minGasPrice,
			OperatorToken: a.adminToken, Registerer: a.chainLabel(u.id, a.reg)},
	}
}

// buildChainService wires the parts of a chain besides the first that
// this process runs on it (--roles, --chains): its own identity guard,
// indexer (gateway role), settlement and sweep. The api and webhooks roles
// are the first chain's service's: they serve every chain.
func (a *app) buildChainService(ctx context.Context, u *chainUnit) error {
	on := a.runsChain(u.id)
	roles := service.Roles{Indexer: a.cfg.roles[roleGateway] && on, Settlement: a.cfg.roles[roleSettlement] && on,
		Sweep: a.cfg.roles[roleSweep] && on}
	if roles == (service.Roles{}) {
		return nil // nothing of this process works on the chain
	}
	cfg := a.chainConfig(u, roles)
	cfg.Logger = a.log.With("chain_id", u.id)
	// The rates are the first chain's service's to refresh: this chain's
	// settlement and sweep only read them.
	cfg.Pricer, cfg.PricerShared = a.pricer, true
	if roles.Sweep {
		cfg.Keys = a.keys
	}
	cfg.ChainStopped = func(ctx context.Context, err error) bool { return u.stop(ctx, a.log, u.svc.Identity, err) }
	svc, err := service.New(ctx, cfg)
	if err != nil {
		return err
	}
	u.svc = svc
	a.workers = append(a.workers, worker{chainWorker("evmpay", u.id, a.cfg.chains), a.runChainParts(u.st, u.id, svc.Run)})
	return nil
}

// stop reports whether err — what the chain's parts stopped with — is a
// chain problem that stops this chain's parts only: its node serves
// another chain, or its indexer refused a reorg (deeper than
// MaxReorgDepth, or of a block recorded as finalized). If so it records
// why, for /readyz and /v1/admin/status, which name the chain (its
// identity guard keeps the last check). Every chain's service asks it
// (service.Config.ChainStopped); the first chain's, whose API and webhooks
// serve every chain, only when there are others.
func (u *chainUnit) stop(ctx context.Context, log *slog.Logger, identity *indexer.Identity, err error) bool {
	problem := chainProblem(err)
	why, ok := map[string]string{
		problemAnotherChain: "its node serves another chain",
		problemReorgTooDeep: "its node's chain rewrote history the index will not follow (docs/chains.md)",
	}[problem]
	if !ok {
		return false
	}
	u.stopped.Store(&err)
	// Recorded for API processes that do not run the chain (--chains).
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if rerr := u.st.SetChainStop(wctx, problem, time.Now()); rerr != nil {
		log.WarnContext(ctx, "could not record the chain's stop; API processes that do not run it still take its invoices",
			slog.Uint64("chain_id", u.id), slog.String("error", rerr.Error()))
	}
	log.ErrorContext(ctx, "this chain's indexer, settlement and sweep stopped: "+why+"; the rest of the process goes on",
		slog.Uint64("chain_id", u.id), slog.String("error", err.Error()))
	// The indexer may have seen another chain before the guard's next
	// check, whose loop stopped with the rest: check once more, so that
	// /readyz and /v1/admin/status say what the node serves.
	if problem == problemAnotherChain && identity != nil {
		_, _ = identity.Check(ctx)
	}
	return true
}

// invoiceChains are the chains besides the first that the API creates
// invoices on: each with its native coin, tokens (their supplies cap an
// invoice) and finality.
func (a *app) invoiceChains() []invoice.Chain {
	var out []invoice.Chain
	for _, u := range a.others {
		assets := append([]store.Asset{store.NativeAsset(cmp.Or(u.spec.nativeSymbol, invoice.DefaultNativeSymbol))}, u.assets...)
		out = append(out, invoice.Chain{ID: u.id, Assets: assets, TokenMaxAmounts: u.tokenSupplies,
			Confirmations: u.spec.confirmations, Finality: u.spec.finality})
	}
	return out
}

// parseChainList reads --chains: comma-separated chain ids; "" is nil
// (every configured chain).
func parseChainList(s string) (map[uint64]bool, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[uint64]bool{}
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil || id == 0 {
			return nil, usageError(fmt.Sprintf("--chains: %q is not a chain id (want comma-separated chain ids, e.g. 1337,9000)", strings.TrimSpace(f)))
		}
		out[id] = true
	}
	return out, nil
}

// otherChainIDs are the ids of the chains besides the first.
func (a *app) otherChainIDs() []uint64 {
	out := make([]uint64, len(a.others))
	for i, u := range a.others {
		out[i] = u.id
	}
	return out
}

// checkoutNetworks are the chains besides the first as the checkout page
// names them (the first chain's settings are checkout.Config's own).
func (a *app) checkoutNetworks() []checkout.Network {
	var out []checkout.Network
	for _, u := range a.others {
		out = append(out, checkout.Network{ChainID: u.id, Name: u.spec.chainName, NativeSymbol: u.spec.nativeSymbol,
			RPCURL: u.spec.publicRPCURL, ExplorerTxURL: u.spec.explorerTxURL, ExplorerAddressURL: u.spec.explorerAddressURL})
	}
	return out
}
