// Package service wires evmpay's packages into one running service: the one
// way to do it, with the parts that are easy to leave out already in —
// the confirmations set once for invoice, settlement and sweep, the
// chain's identity checked at start and guarding every sweep broadcast,
// the pricer's routes checked and its rates read before anything quotes,
// webhooks refused to private networks, every worker's error returned and
// a clean shutdown.
//
//	svc, err := service.New(ctx, service.Config{
//		Store: st, RPC: node, SecretKey: key, Wallet: w,
//	})
//	mux.Handle("/", svc.Handler()) // the invoice API, the checkout page, the deliveries API
//	err = svc.Run(ctx)              // indexer, settlement, sweep, webhooks, … until ctx ends
//
// Then act as a merchant through the Go API: svc.Invoices.EnsureMerchant,
// Owner, CreateInvoice, CreateRefund, … (package invoice). payd, the
// reference host, builds on this package, and so do examples/ and the
// test kit (hosts/evmpaytest).
package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/invoice/checkout"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/settlement"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/sweep"
	"github.com/evmpay/evmpay/webhook"
)

// Roles are the parts a process runs; several processes with different
// roles may share one database (docs/scale.md).
type Roles struct {
	// API serves the invoice API, the checkout page and the webhook
	// deliveries API (Handler), and runs the invoice service's
	// housekeeping.
	API bool
	// Indexer follows the chain into the database.
	Indexer bool
	// Settlement matches payments to invoices.
	Settlement bool
	// Sweep moves confirmed funds, sends refunds and payouts, keeps the
	// ledger.
	Sweep bool
	// Webhooks delivers events.
	Webhooks bool
}

// AllRoles runs everything in one process.
func AllRoles() Roles {
	return Roles{API: true, Indexer: true, Settlement: true, Sweep: true, Webhooks: true}
}

func (r Roles) none() bool { return r == Roles{} }

// Config configures New. Every field documents its default; the
// per-package configurations (Invoice, Settlement, Sweep, Webhook,
// Indexer) tune what this one does not set, and setting there what this
// one owns (confirmations, assets, chain id, the pricer, the chain guard,
// the private-network rule) is an error: one setting, one place.
type Config struct {
	// Store is the shared database (store/postgres or store/sqlite).
	// Required.
	Store store.Store
	// RPC is the chain node's JSON-RPC client (rpc.DialContext, or a
	// simulated backend's). Required.
	RPC *rpc.Client
	// Source is how the indexer and the identity check read the chain.
	// Defaults to indexer.NewRPCSource(RPC).
	Source indexer.Source
	// ChainID is the chain id the node must report; 0 takes the node's.
	// Defaults to 0.
	ChainID uint64
	// SecretKey is PAY_SECRET_KEY (at least 32 bytes): it seals webhook
	// secrets and stored responses and keys the API-key digests. Required
	// for the API and Webhooks roles.
	SecretKey []byte
	// Wallet is the HD wallet: deposit addresses (m/44'/60'/0'/0/i), the
	// sweep wallet, the merchants' payout wallets. Required for the Sweep
	// role; the API role can do with Deriver (an xpub) instead.
	Wallet *hdwallet.Wallet
	// Deriver derives deposit addresses without private keys (the API
	// role). Defaults to Wallet's.
	Deriver *hdwallet.Deriver
	// Keys overrides the sweep's signers (keys in an HSM or KMS, a gas
	// funder). Defaults to Wallet's deposit keys, sweep wallet and payout
	// wallets, with no gas funder.
	Keys *sweep.Keys
	// Confirmations is the one threshold of invoice, settlement and
	// sweep: blocks built on a payment's (or a sweep's) block. Defaults to
	// 12; none under FinalityInstant and FinalityTag.
	Confirmations int
	// Finality is the chain's finality mode, for the indexer, invoice,
	// settlement and sweep alike: store.FinalityDepth (Confirmations),
	// store.FinalityInstant (final once included: CometBFT chains such as
	// evmd) or store.FinalityTag (final at or below the node's finalized
	// block, which the indexer records: Ethereum proof of stake; the
	// process that runs the Indexer role must have it too). See
	// docs/chains.md. Defaults to store.FinalityDepth.
	Finality string
	// NativeSymbol is the chain's native coin: what invoices, the
	// checkout page, the ledger and the pricer call it (an evmd chain's
	// own coin rather than "ETH"): 2 to 6 ASCII letters or digits, as
	// browser wallets require (EIP-3085). Its decimals are always 18: JSON-RPC
	// counts every EVM chain's native coin in wei (docs/chains.md).
	// Defaults to invoice.DefaultNativeSymbol ("ETH").
	NativeSymbol string
	// Tokens are the accepted ERC-20 tokens (symbol, address, decimals),
	// besides the native coin. Defaults to none.
	Tokens []store.Asset
	// Pricer prices invoices in fiat currencies (invoice/pricing). New
	// checks that it can quote every accepted asset in its currencies
	// (Pricer.CheckRoutes) and reads the rates once; Run keeps them fresh.
	// Defaults to nil: no fiat pricing.
	Pricer *pricing.Pricer
	// PricerShared says that another Service of this process (one per
	// chain) runs Pricer: this one only reads its rates — no route check,
	// no first read, no refresh of its own. Defaults to false.
	PricerShared bool
	// PublicBaseURL is where payers and merchants reach Handler
	// ("https://pay.example.com"): checkout and claim links start with it.
	// Defaults to "" (links relative to the host).
	PublicBaseURL string
	// AllowPrivateWebhooks lets webhooks go to loopback and private
	// addresses (tests, a receiver on the same machine). Defaults to
	// false: refused, so that a merchant cannot make the service call its
	// own network (SSRF).
	AllowPrivateWebhooks bool
	// Roles are the parts this process runs. Defaults to AllRoles.
	Roles Roles
	// PollInterval is how often the workers look at the chain and the
	// database (indexer, settlement, sweep, webhooks). Defaults to each
	// package's own (1.5 s for the chain).
	PollInterval time.Duration
	// Backfill indexes from the chain's first block when the database has
	// no cursor yet. Defaults to false: from the head.
	Backfill bool
	// Logger receives every part's logs, with a component attribute.
	// Defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives every part's metrics. Defaults to nil: none.
	Registerer prometheus.Registerer
	// ChainStopped, when set, is asked about the error a chain part — the
	// identity guard, the indexer, settlement, the sweep — stopped with.
	// When it returns true, the chain parts stop and the others (the API,
	// webhooks, pricing) go on: a host that serves several chains keeps
	// serving the others when one goes wrong (its node serves another
	// chain, a reorg the indexer refuses). Defaults to nil: a part that
	// fails stops the service, and Run returns its error.
	ChainStopped func(ctx context.Context, err error) bool

	// The packages' own settings, for what this Config does not set.
	Invoice    invoice.Config
	Checkout   checkout.Config
	Settlement settlement.Config
	Sweep      sweep.Config
	Webhook    webhook.Config
	Indexer    indexer.Config
	Identity   indexer.IdentityConfig
}

// nativeSymbol is what browser wallets take as a chain's native coin
// (EIP-3085 nativeCurrency.symbol: 2 to 6 characters).
var nativeSymbol = regexp.MustCompile(`^[A-Za-z0-9]{2,6}$`)

// CheckNativeSymbol reports whether symbol can name a chain's native coin
// (Config.NativeSymbol).
func CheckNativeSymbol(symbol string) error {
	if !nativeSymbol.MatchString(symbol) {
		return errors.New("want 2 to 6 ASCII letters or digits (wallets refuse others: EIP-3085), e.g. ATOM")
	}
	return nil
}

// ErrConfig is wrapped by every configuration mistake New reports.
var ErrConfig = errors.New("service: configuration")

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

// validate refuses what is missing, and what a package's own Config sets
// that this one owns.
func (c *Config) validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, configErr("Store is required"))
	}
	if c.RPC == nil {
		errs = append(errs, configErr("RPC (the chain node's client) is required"))
	}
	if (c.Roles.API || c.Roles.Webhooks) && len(c.SecretKey) == 0 {
		errs = append(errs, configErr("SecretKey (PAY_SECRET_KEY) is required by the API and Webhooks roles"))
	}
	if c.Roles.Sweep && c.Wallet == nil && (c.Keys == nil || c.Keys.Deposits == nil) {
		errs = append(errs, configErr("Wallet (or Keys) is required by the Sweep role"))
	}
	if c.Roles.API && c.Wallet == nil && c.Deriver == nil {
		errs = append(errs, configErr("Wallet or Deriver is required by the API role (deposit addresses)"))
	}
	if c.Confirmations < 0 {
		errs = append(errs, configErr("Confirmations must not be negative"))
	}
	if err := store.CheckFinality(c.Finality, c.Confirmations); err != nil {
		errs = append(errs, configErr("%v", err))
	}
	if c.NativeSymbol != "" {
		if err := CheckNativeSymbol(c.NativeSymbol); err != nil {
			errs = append(errs, configErr("NativeSymbol %q: %v", c.NativeSymbol, err))
		}
	}
	owned := []struct {
		set  bool
		name string
	}{
		{c.Invoice.Confirmations != 0, "Invoice.Confirmations"},
		{c.Settlement.Confirmations != 0, "Settlement.Confirmations"},
		{c.Sweep.Confirmations != 0, "Sweep.Confirmations"},
		{c.Invoice.Finality != "", "Invoice.Finality"},
		{c.Settlement.Finality != "", "Settlement.Finality"},
		{c.Sweep.Finality != "", "Sweep.Finality"},
		{c.Indexer.Finality != "", "Indexer.Finality"},
		{c.Invoice.Assets != nil, "Invoice.Assets"},
		{c.Settlement.Assets != nil, "Settlement.Assets"},
		{c.Sweep.Tokens != nil, "Sweep.Tokens"},
		{c.Sweep.NativeSymbol != "", "Sweep.NativeSymbol"},
		{c.Checkout.NativeSymbol != "", "Checkout.NativeSymbol"},
		{c.Indexer.Tokens != nil, "Indexer.Tokens"},
		{c.Indexer.ChainID != 0, "Indexer.ChainID"},
		{c.Identity.ChainID != 0, "Identity.ChainID"},
		{c.Invoice.Pricer != nil, "Invoice.Pricer"},
		{c.Settlement.Valuer != nil, "Settlement.Valuer"},
		{c.Sweep.Valuer != nil, "Sweep.Valuer"},
		{c.Sweep.ChainGuard != nil, "Sweep.ChainGuard"},
		{c.Webhook.BlockPrivateNetworks, "Webhook.BlockPrivateNetworks"},
	}
	for _, o := range owned {
		if o.set {
			errs = append(errs, configErr("%s is set by service.Config (one setting, one place): leave it zero", o.name))
		}
	}
	return errors.Join(errs...)
}

// Service is evmpay running: its parts, built and checked by New, run by
// Run. The parts of roles not run are nil.
type Service struct {
	// Invoices is the Go API (package invoice): merchants, invoices,
	// refunds, payouts, the ledger.
	Invoices *invoice.Service
	// Identity checks the node against the chain the database holds.
	Identity   *indexer.Identity
	Indexer    *indexer.Indexer
	Settlement *settlement.Settler
	Sweeper    *sweep.Sweeper
	Webhooks   *webhook.Dispatcher
	// ChainID is the chain's id, as the node reported it.
	ChainID uint64

	cfg        Config
	log        *slog.Logger
	handler    *httpapi.Mux
	page       *checkout.Handler
	deliveries *webhook.DeliveriesAPI
	// assets are the accepted assets: the native coin, then Tokens.
	assets  []store.Asset
	workers []worker
}

type worker struct {
	name string
	run  func(context.Context) error
	// chain: a chain part (Config.ChainStopped).
	chain bool
}

// New connects the parts of cfg.Roles and checks them before anything
// runs: the node's chain id (and, against the database, its identity),
// the pricer's routes and first rates, every package's configuration.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Roles.none() {
		cfg.Roles = AllRoles()
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if store.FinalityCountsConfirmations(cfg.Finality) {
		cfg.Confirmations = cmp.Or(cfg.Confirmations, 12)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Service{cfg: cfg, log: cfg.Logger}
	eth := ethclient.NewClient(cfg.RPC)
	id, err := eth.ChainID(ctx)
	if err != nil {
		return nil, fmt.Errorf("service: the chain node does not answer eth_chainId: %w", err)
	}
	if !id.IsUint64() || (cfg.ChainID != 0 && id.Uint64() != cfg.ChainID) {
		return nil, configErr("ChainID is %d but the node reports chain %s: refusing to take payments on the wrong chain", cfg.ChainID, id)
	}
	s.ChainID = id.Uint64()
	// One database may hold several chains' indexes: every part below
	// reads and writes this chain's (store.Store.Chain).
	cfg.Store = cfg.Store.Chain(s.ChainID)
	s.cfg.Store = cfg.Store
	src := cfg.Source
	if src == nil {
		src = indexer.NewRPCSource(cfg.RPC)
	}

	// The chain's identity: recorded at the first start, then checked at
	// every start and in the background; the sweep's guard.
	icfg := cfg.Identity
	icfg.ChainID = s.ChainID
	icfg.Logger = cmp.Or(icfg.Logger, s.log.With("component", "chain-identity"))
	if s.Identity, err = indexer.NewIdentity(src, cfg.Store, icfg); err != nil {
		return nil, err
	}
	st, err := s.Identity.Check(ctx)
	switch {
	case errors.Is(err, store.ErrNodeBehind):
		s.log.WarnContext(ctx, "the chain node is far behind the indexed chain: not ready until it catches up", slog.String("error", err.Error()))
	case err != nil:
		return nil, fmt.Errorf("refusing to start: %w", err)
	default:
		s.log.InfoContext(ctx, "chain identity verified", slog.Uint64("chain_id", st.ChainID), slog.String("genesis", st.GenesisHash.Hex()),
			slog.Uint64("node_head", st.NodeHead), slog.Uint64("indexed_tip", st.IndexedTip), slog.Uint64("verified_at_block", st.VerifiedAt))
	}
	s.workers = append(s.workers, worker{"chain-identity", s.Identity.Run, true})

	if cfg.Pricer != nil && !cfg.PricerShared {
		if err := s.checkPricer(ctx, cfg.Pricer); err != nil {
			return nil, err
		}
		s.workers = append(s.workers, worker{"pricing", cfg.Pricer.Run, false})
	}
	var creds *invoice.Credentials
	if len(cfg.SecretKey) > 0 {
		if creds, err = invoice.NewCredentials(cfg.SecretKey); err != nil {
			return nil, configErr("SecretKey: %v", err)
		}
	}
	s.assets = append([]store.Asset{store.NativeAsset(cmp.Or(cfg.NativeSymbol, invoice.DefaultNativeSymbol))}, cfg.Tokens...)
	var tokens []common.Address
	for _, a := range cfg.Tokens {
		if a.Token() == nil {
			return nil, configErr("Tokens: %s is not an ERC-20 token (the native coin is always accepted)", a.Symbol)
		}
		tokens = append(tokens, *a.Token())
	}
	if cfg.Roles.API {
		if err := s.buildAPI(creds, eth); err != nil {
			return nil, fmt.Errorf("service: the API role: %w", err)
		}
	}
	if cfg.Roles.Indexer {
		c := cfg.Indexer
		c.ChainID, c.Tokens, c.Backfill, c.Finality = s.ChainID, tokens, c.Backfill || cfg.Backfill, cfg.Finality
		c.PollInterval = cmp.Or(c.PollInterval, cfg.PollInterval)
		c.Registerer = cmp.Or(c.Registerer, cfg.Registerer)
		c.Logger = cmp.Or(c.Logger, s.log.With("component", "indexer"))
		if s.Indexer, err = indexer.New(src, cfg.Store, c); err != nil {
			return nil, fmt.Errorf("service: the indexer: %w", err)
		}
		s.workers = append(s.workers, worker{"indexer", s.Indexer.Run, true})
	}
	if cfg.Roles.Settlement {
		c := cfg.Settlement
		c.Confirmations, c.Finality, c.Assets = cfg.Confirmations, cfg.Finality, s.assets
		if cfg.Pricer != nil {
			c.Valuer = cfg.Pricer
		}
		c.PollInterval = cmp.Or(c.PollInterval, cfg.PollInterval)
		c.Registerer = cmp.Or(c.Registerer, cfg.Registerer)
		c.Logger = cmp.Or(c.Logger, s.log.With("component", "settlement"))
		if s.Settlement, err = settlement.New(cfg.Store, c); err != nil {
			return nil, fmt.Errorf("service: settlement: %w", err)
		}
		s.workers = append(s.workers, worker{"settlement", s.Settlement.Run, true})
	}
	if cfg.Roles.Sweep {
		if err := s.buildSweep(eth, tokens); err != nil {
			return nil, fmt.Errorf("service: sweep: %w", err)
		}
	}
	if cfg.Roles.Webhooks {
		c := cfg.Webhook
		c.BlockPrivateNetworks = !cfg.AllowPrivateWebhooks
		c.PollInterval = cmp.Or(c.PollInterval, cfg.PollInterval)
		c.Registerer = cmp.Or(c.Registerer, cfg.Registerer)
		c.Logger = cmp.Or(c.Logger, s.log.With("component", "webhook"))
		if s.Webhooks, err = webhook.New(cfg.Store, creds, c); err != nil {
			return nil, fmt.Errorf("service: webhooks: %w", err)
		}
		s.workers = append(s.workers, worker{"webhooks", s.Webhooks.Run, false})
	}
	return s, nil
}

// checkPricer refuses a pricer that can never quote an accepted asset in
// a currency it serves — an error at start naming the setting, instead of
// 503 rate_unavailable on every fiat invoice for ever — and, for the API
// role, reads the rates once before anything quotes. A rates outage at
// start is not a configuration mistake: it is logged, and Run's refreshes
// (the pricer runs with the other parts: it is never left unrefreshed)
// bring the rates when the sources answer.
func (s *Service) checkPricer(ctx context.Context, p *pricing.Pricer) error {
	if err := p.CheckRoutes(); err != nil {
		return configErr("Pricer: %v", err)
	}
	if !s.cfg.Roles.API {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := p.Refresh(rctx); err != nil {
		s.log.WarnContext(ctx, "service: the first read of the rates failed; fiat quotes wait for the next one", slog.String("error", err.Error()))
	}
	return nil
}

// serviceAddresses are the wallets the configured keys hold besides the
// deposit addresses: the sweep wallet and the gas funder.
func (s *Service) serviceAddresses() []common.Address {
	var out []common.Address
	switch {
	case s.cfg.Keys != nil:
		for _, k := range []sweep.AccountSigner{s.cfg.Keys.Wallet, s.cfg.Keys.Funder} {
			if k != nil {
				out = append(out, k.Address())
			}
		}
	case s.cfg.Wallet != nil:
		if key, err := s.cfg.Wallet.SweepKey(); err == nil {
			out = append(out, crypto.PubkeyToAddress(key.PublicKey))
		}
	}
	return out
}

func (s *Service) buildAPI(creds *invoice.Credentials, eth *ethclient.Client) error {
	cfg := s.cfg
	deriver := cfg.Deriver
	if deriver == nil {
		deriver = cfg.Wallet.Deriver()
	}
	base := cfg.PublicBaseURL
	ic := cfg.Invoice
	ic.Confirmations, ic.Finality, ic.Assets = cfg.Confirmations, cfg.Finality, s.assets
	if cfg.Pricer != nil {
		ic.Pricer = cfg.Pricer
	}
	ic.BaseURL = cmp.Or(ic.BaseURL, base)
	ic.CheckoutURL = cmp.Or(ic.CheckoutURL, base+"/checkout")
	ic.ClaimURL = cmp.Or(ic.ClaimURL, base+"/claim")
	// A merchant's webhook URL and settlement address are checked at
	// create and update: public hosts only (unless allowed), never an
	// address the service holds, never a contract.
	if !cfg.AllowPrivateWebhooks && ic.Merchants.WebhookHost == nil {
		ic.Merchants.WebhookHost = webhook.CheckPublicHost
	}
	if ic.Merchants.Chain == nil {
		ic.Merchants.Chain = eth
	}
	ic.Merchants.ServiceAddresses = append(slices.Clone(ic.Merchants.ServiceAddresses), s.serviceAddresses()...)
	ic.Logger = cmp.Or(ic.Logger, s.log.With("component", "invoice"))
	var err error
	if s.Invoices, err = invoice.New(cfg.Store, creds, deriver, s.ChainID, ic); err != nil {
		return err
	}
	cc := cfg.Checkout
	cc.NativeSymbol = s.assets[0].Symbol
	cc.Logger = cmp.Or(cc.Logger, s.log.With("component", "checkout"))
	if s.page, err = checkout.New(cc); err != nil {
		return err
	}
	if s.deliveries, err = webhook.NewDeliveriesAPI(cfg.Store, s.Invoices.RouteAuthenticator(),
		webhook.DeliveriesAPIConfig{Logger: s.log.With("component", "webhook")}); err != nil {
		return err
	}
	s.handler = httpapi.NewMux()
	s.Register(s.handler)
	s.workers = append(s.workers, worker{"invoice", s.Invoices.Run, false})
	return nil
}

func (s *Service) buildSweep(eth *ethclient.Client, tokens []common.Address) error {
	cfg := s.cfg
	var keys sweep.Keys
	if cfg.Keys != nil {
		keys = *cfg.Keys
	} else {
		key, err := cfg.Wallet.SweepKey()
		if err != nil {
			return err
		}
		keys = sweep.Keys{Deposits: cfg.Wallet, Wallet: sweep.NewKeySigner(key), Payouts: cfg.Wallet}
	}
	c := cfg.Sweep
	c.Confirmations, c.Finality, c.Tokens = uint64(cfg.Confirmations), cfg.Finality, tokens
	c.NativeSymbol = s.assets[0].Symbol
	// No stored signed transaction goes to a node that serves another
	// chain than the one it was signed for.
	c.ChainGuard = s.Identity
	if cfg.Pricer != nil {
		c.Valuer = cfg.Pricer
	}
	c.PollInterval = cmp.Or(c.PollInterval, cfg.PollInterval)
	c.Registerer = cmp.Or(c.Registerer, cfg.Registerer)
	c.Logger = cmp.Or(c.Logger, s.log.With("component", "sweep"))
	var err error
	if s.Sweeper, err = sweep.New(cfg.Store, eth, keys, c); err != nil {
		return err
	}
	s.workers = append(s.workers, worker{"sweep", s.Sweeper.Run, true})
	return nil
}

// Handler serves the API role's HTTP APIs: the invoice API (/v1/…), the
// checkout and claim pages, the webhook deliveries API. Errors are
// RFC 9457 problems, unknown paths included. nil without the API role.
func (s *Service) Handler() http.Handler {
	if s.handler == nil {
		return nil
	}
	return s.handler
}

// Register registers Handler's routes on a host's own mux, beside the
// host's routes (payd adds its read API and admin routes). Nothing without
// the API role.
func (s *Service) Register(mux httpapi.Router) {
	if s.Invoices == nil {
		return
	}
	s.Invoices.Routes(mux)
	s.page.Routes(mux)
	s.deliveries.Register(mux)
}

// Workers names the parts Run runs, in order.
func (s *Service) Workers() []string {
	names := make([]string, len(s.workers))
	for i, w := range s.workers {
		names[i] = w.name
	}
	return names
}

// Run runs every part until ctx is cancelled — then each finishes what it
// holds and Run returns nil — or until one part fails: the others are
// stopped and Run returns that part's error, named. A chain part's error
// that Config.ChainStopped takes stops the chain parts only; Run then goes
// on until ctx is cancelled. Run runs once.
func (s *Service) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	chainCtx, stopChain := context.WithCancel(gctx)
	defer stopChain()
	for _, w := range s.workers {
		wctx := gctx
		if w.chain {
			wctx = chainCtx
		}
		g.Go(func() error {
			err := w.run(wctx)
			failed := err != nil && !errors.Is(err, context.Canceled)
			if failed && w.chain && s.cfg.ChainStopped != nil && s.cfg.ChainStopped(gctx, err) {
				s.log.ErrorContext(gctx, "service: a chain part stopped; stopping the chain's parts, the others go on",
					slog.String("part", w.name), slog.String("error", err.Error()))
				stopChain()
				return nil
			}
			if failed {
				s.log.ErrorContext(gctx, "service: a part stopped; stopping the others", slog.String("part", w.name), slog.String("error", err.Error()))
				return fmt.Errorf("service: %s: %w", w.name, err)
			}
			if err == nil && wctx.Err() == nil {
				return fmt.Errorf("service: %s stopped while the service runs", w.name)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil || ctx.Err() != nil {
		return err
	}
	<-ctx.Done() // only chain parts ran, and they stopped: nothing to run until shutdown
	return nil
}
