package evmpaytest

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/hosts/evmpaytest/wait"
	"github.com/evmpay/evmpay/hosts/service"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/settlement"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/sqlite"
	"github.com/evmpay/evmpay/store/sqlite/sqlitetest"
	"github.com/evmpay/evmpay/sweep"
	"github.com/evmpay/evmpay/webhook"
)

// Config configures New. The zero value is usable: every field documents
// its default.
type Config struct {
	// Chain configures the simulated chain; the sweep wallet of Mnemonic
	// is funded besides its accounts. Defaults to ChainConfig's defaults.
	Chain ChainConfig
	// Store is the database the packages share, bound to the chain
	// (store.Store.Chain) by New: two Envs of two chains (ChainConfig.ChainID)
	// may share one. Defaults to NewStore's fresh SQLite file (pass
	// pgtest.New(t) to run on PostgreSQL).
	Store store.Store
	// Mnemonic is the deposit wallet's BIP-39 mnemonic: the deposit
	// addresses (m/44'/60'/0'/0/<index>) and the sweep wallet
	// (hdwallet.SweepPath, funded at genesis). Defaults to a fresh random
	// 24-word mnemonic.
	Mnemonic string
	// Tokens are test stablecoins deployed at start (Chain.DeployToken:
	// minted to every funded account), accepted by the invoice API and
	// known to the indexer, settlement and sweep. Defaults to none: the
	// native coin only.
	Tokens []Token
	// Confirmations is the settlement and sweep threshold: blocks built on
	// top of a payment's (or a sweep's) block. Defaults to 12, the
	// service's; none under FinalityInstant and FinalityTag.
	Confirmations int
	// Finality is the chain's finality mode (service.Config.Finality):
	// store.FinalityDepth, store.FinalityInstant, or store.FinalityTag
	// (the simulated chain finalizes every 32nd block: mine past the next
	// multiple of 32 for a payment to become final). Defaults to
	// store.FinalityDepth.
	Finality string
	// WebhookURL is the merchant's webhook_url. Defaults to "": no
	// webhooks are sent.
	WebhookURL string
	// NoServices starts none of evmpay's packages: Env is then the chain,
	// the store and the funded deposit wallet, for a test of code that
	// wires the packages itself (Sync and WaitInvoice work the same: they
	// read the store). Defaults to false: the invoice API (at URL), the
	// indexer, settlement, sweep and the webhook dispatcher run until the
	// test ends.
	NoServices bool
	// Manual builds evmpay's packages (the invoice API serves at URL) but
	// runs none of their workers: the test advances them itself with Step,
	// synchronously, as rivertest runs a job inside the test (Sync and
	// WaitInvoice then call Step instead of waiting). Webhooks are not
	// delivered; the events are recorded (Events, RequireEvents). Defaults
	// to false: the workers run on their own until the test ends.
	Manual bool
	// PollInterval is how often the running packages look at the chain
	// and the store. Defaults to 20 ms.
	PollInterval time.Duration
	// Now is the running packages' clock (invoice expiry, the webhook
	// retry ladder, sweep retries). Defaults to time.Now.
	Now func() time.Time
	// Logger receives the running packages' logs. Defaults to the test's
	// log (t.Log), warnings and errors only.
	Logger *slog.Logger
	// Wait is how Sync and WaitInvoice poll, and how long they wait before
	// failing the test. Defaults to wait.Poll's defaults: every 5 ms, for
	// up to 2 minutes.
	Wait wait.Poll
	// Pricer prices invoices in fiat currencies (invoice/pricing; for
	// tests, pricing.NewFixed sources). Defaults to nil: no fiat pricing.
	Pricer *pricing.Pricer
	// CaptureWebhooks gives the Merchant a Receiver (Env.Webhooks) as its
	// webhook_url: every delivery verified and kept. Defaults to false
	// (WebhookURL, or none).
	CaptureWebhooks bool
}

// Token is a test stablecoin to deploy (testtoken.Stable: EIP-2612
// permit).
type Token struct {
	// Symbol names the token in invoice requests ("asset":"USDC").
	Symbol string
	// Decimals are the token's decimals (USDC has 6).
	Decimals uint8
}

// Env is evmpay in one process on a simulated chain: what a test of code
// that takes payments needs. Its methods fail the test on error: call them
// from the test's goroutine.
type Env struct {
	// Chain is the simulated chain.
	Chain *Chain
	// Store is the database the packages share.
	Store store.Store
	// Wallet is the deposit wallet (Config.Mnemonic); its sweep key's
	// address holds the chain's funds.
	Wallet *hdwallet.Wallet
	// Tokens are Config.Tokens, deployed, in order.
	Tokens []*testtoken.Token

	// Unless Config.NoServices:

	// Invoices is the invoice service.
	Invoices *invoice.Service
	// URL is an HTTP server with the invoice API and the webhook
	// deliveries API (invoice.Service.Routes, webhook.DeliveriesAPI).
	URL string
	// Merchant is a merchant created at start, with Config.WebhookURL and
	// a fresh settlement address that holds nothing.
	Merchant store.Merchant
	// APIKey authenticates the Merchant against URL (Authorization:
	// Bearer).
	APIKey string
	// WebhookSecret verifies the Merchant's webhooks (webhook.Verifier).
	WebhookSecret string
	// Owner is the Merchant acting through the Go API (Invoices'
	// CreateInvoice, CreateRefund, …), without a key.
	Owner invoice.Principal
	// Service is evmpay wired by hosts/service, running until the test
	// ends.
	Service *service.Service
	// Webhooks receives the Merchant's webhooks when
	// Config.CaptureWebhooks is set.
	Webhooks *Receiver

	tb  testing.TB
	cfg Config

	mu      sync.Mutex
	stopped error // the first worker that stopped with an error
	keys    int   // idempotency keys used by CreateInvoice
}

// New starts an Env that stops when the test ends.
func New(tb testing.TB, cfg Config) *Env {
	tb.Helper()
	if store.FinalityCountsConfirmations(cfg.Finality) {
		cfg.Confirmations = cmp.Or(cfg.Confirmations, 12)
	}
	cfg.PollInterval = cmp.Or(cfg.PollInterval, 20*time.Millisecond)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	e := &Env{tb: tb, cfg: cfg}
	e.Wallet = newWallet(tb, cfg.Mnemonic)
	sweepKey, err := e.Wallet.SweepKey()
	must(tb, err)
	cfg.Chain.Fund = append(cfg.Chain.Fund, crypto.PubkeyToAddress(sweepKey.PublicKey))
	e.Chain = NewChain(tb, cfg.Chain)
	if e.Store = cfg.Store; e.Store == nil {
		e.Store = NewStore(tb)
	}
	// The store's rows of this chain: one store may hold several kits'
	// chains side by side (ChainConfig.ChainID).
	e.Store = e.Store.Chain(e.Chain.ID())
	for _, t := range cfg.Tokens {
		e.Tokens = append(e.Tokens, e.Chain.DeployToken(t.Symbol, t.Decimals))
	}
	if !cfg.NoServices {
		e.start(sweepKey)
	}
	return e
}

// NewStore opens a fresh SQLite store (store/sqlite) in a temporary file,
// closed and removed when the test ends.
func NewStore(tb testing.TB) *sqlite.Store {
	tb.Helper()
	return sqlitetest.New(tb)
}

func newWallet(tb testing.TB, phrase string) *hdwallet.Wallet {
	tb.Helper()
	var (
		m   *hdwallet.Mnemonic
		err error
	)
	if phrase == "" {
		m, err = hdwallet.GenerateMnemonic(24)
	} else {
		m, err = hdwallet.ParseMnemonic(phrase)
	}
	must(tb, err)
	w, err := hdwallet.NewWallet(m, "")
	must(tb, err)
	return w
}

// start wires evmpay's packages with hosts/service, as payd and embedders
// do, and runs them until the test ends.
func (e *Env) start(sweepKey *ecdsa.PrivateKey) {
	tb, cfg, ctx := e.tb, e.cfg, context.Background()
	tb.Helper()
	secret := make([]byte, invoice.MinSecretKeyLen)
	_, _ = rand.Read(secret)
	mux := httpapi.NewMux()
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	e.URL = srv.URL
	retryMin, retryMax := cfg.PollInterval, 20*cfg.PollInterval
	log := func(component string) *slog.Logger { return cfg.Logger.With("component", component) }
	svc, err := service.New(ctx, service.Config{
		Store: e.Store, RPC: e.Chain.RPC(), Source: e.Chain.Source(), SecretKey: secret, Wallet: e.Wallet,
		Confirmations: cfg.Confirmations, Finality: cfg.Finality, Tokens: e.assets()[1:], Pricer: cfg.Pricer, PublicBaseURL: srv.URL,
		AllowPrivateWebhooks: true, PollInterval: cfg.PollInterval, Backfill: true, Logger: cfg.Logger,
		Invoice:    invoice.Config{Now: cfg.Now, Logger: log("invoice")},
		Indexer:    indexer.Config{RetryMin: retryMin, RetryMax: retryMax, LockRetryInterval: retryMax, Now: cfg.Now},
		Settlement: settlement.Config{RetryMin: retryMin, RetryMax: retryMax, LockRetryInterval: retryMax, Now: cfg.Now},
		Sweep:      sweep.Config{IdleInterval: retryMax, RetryBackoff: retryMax, Now: cfg.Now},
		Webhook:    webhook.Config{Now: cfg.Now},
	})
	must(tb, err)
	e.Service, e.Invoices = svc, svc.Invoices
	svc.Register(mux)
	webhookURL := cfg.WebhookURL
	if cfg.CaptureWebhooks {
		e.Webhooks = NewReceiver(tb, "")
		webhookURL = e.Webhooks.URL
	}
	settlementKey, err := crypto.GenerateKey()
	must(tb, err)
	m, err := e.Invoices.CreateMerchant(ctx, invoice.MerchantParams{Name: "evmpaytest merchant",
		WebhookURL: webhookURL, SettlementAddress: crypto.PubkeyToAddress(settlementKey.PublicKey)})
	must(tb, err)
	e.Merchant, e.APIKey, e.WebhookSecret = m.Merchant, m.APIKey, m.WebhookSecret
	if e.Webhooks != nil {
		e.Webhooks.SetSecret(m.WebhookSecret)
	}
	e.Owner, err = e.Invoices.Owner(ctx, m.Merchant.ID)
	must(tb, err)
	_ = sweepKey
	if !cfg.Manual {
		e.Go("evmpay", svc.Run)
	}
}

// Step processes what the chain holds now, synchronously, and returns:
// the indexer indexes every block up to the head (indexer.Indexer.Sync),
// settlement settles them — payments, confirmations, expiries
// (settlement.Settler.Sync) — and the sweep makes one pass
// (sweep.Sweeper.RunOnce: it may sign and send transactions, which the
// next mined block holds). It mines nothing and fails the test with the
// first error. Only with Config.Manual.
func (e *Env) Step() {
	e.tb.Helper()
	if !e.cfg.Manual || e.Service == nil {
		e.tb.Fatalf("evmpaytest: Step needs Config.Manual (otherwise the workers run by themselves)")
	}
	ctx := context.Background()
	must(e.tb, e.Service.Indexer.Sync(ctx))
	must(e.tb, e.Service.Settlement.Sync(ctx))
	must(e.tb, e.Service.Sweeper.RunOnce(ctx))
}

// assets are the accepted assets: the native coin, then the tokens.
func (e *Env) assets() []store.Asset {
	out := []store.Asset{store.NativeAsset(invoice.DefaultNativeSymbol)}
	for _, t := range e.Tokens {
		a := t.Address
		out = append(out, store.Asset{Symbol: t.Symbol, Address: &a, Decimals: t.Decimals})
	}
	return out
}

// CreateInvoice creates an invoice of the Merchant through the invoice
// API: request is the JSON body of POST /v1/invoices (for example
// {"amount_wei":"250000"}, or {"asset":"USDC","amount":"12500000"}), sent with
// a fresh Idempotency-Key. It fails the test unless the API answers 201,
// and returns the invoice as stored.
func (e *Env) CreateInvoice(request string) store.Invoice {
	e.tb.Helper()
	if e.URL == "" {
		e.tb.Fatalf("evmpaytest: CreateInvoice needs the invoice API (Config.NoServices is set)")
	}
	e.mu.Lock()
	e.keys++
	key := fmt.Sprintf("evmpaytest-%d", e.keys)
	e.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, e.URL+"/v1/invoices", strings.NewReader(request))
	must(e.tb, err)
	req.Header.Set("Authorization", "Bearer "+e.APIKey)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	must(e.tb, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(e.tb, err)
	var created struct {
		ID int64 `json:"id"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &created) != nil || created.ID == 0 {
		e.tb.Fatalf("evmpaytest: POST /v1/invoices %s: %s: %s", request, resp.Status, body)
	}
	inv, err := e.Store.GetInvoice(context.Background(), created.ID)
	must(e.tb, err)
	return inv
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("evmpaytest: %v", err)
	}
}

// testWriter writes log lines to the test's log.
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
