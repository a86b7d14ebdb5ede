package service_test

import (
	"context"
	"errors"
	"html"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/evmpaytest"
	"github.com/evmpay/evmpay/hosts/service"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var ctx = context.Background()

// rig is a simulated chain, a store and a wallet whose sweep wallet the
// chain funded.
type rig struct {
	chain  *evmpaytest.Chain
	st     store.Store
	wallet *hdwallet.Wallet
}

func newRig(t *testing.T) rig {
	m, err := hdwallet.GenerateMnemonic(24)
	require.NoError(t, err)
	w, err := hdwallet.NewWallet(m, "")
	require.NoError(t, err)
	key, err := w.SweepKey()
	require.NoError(t, err)
	sweepAddr := crypto.PubkeyToAddress(key.PublicKey)
	return rig{chain: evmpaytest.NewChain(t, evmpaytest.ChainConfig{Fund: []common.Address{sweepAddr}}), st: evmpaytest.NewStore(t), wallet: w}
}

func (r rig) config() service.Config {
	// Backfill: the indexer starts at block 0, not at the head of its
	// first poll, which a payment made at once may already be below (make
	// test saw an invoice stay PENDING for good that way).
	return service.Config{Store: r.st, RPC: r.chain.RPC(), SecretKey: []byte(strings.Repeat("k", 32)), Wallet: r.wallet,
		Confirmations: 2, PollInterval: 20 * time.Millisecond, AllowPrivateWebhooks: true, Backfill: true}
}

// What service.Config owns is set there only: a package's own setting of
// it is refused, naming it; what is missing is named too.
func TestNew_OneSettingOnePlace_AndWhatIsMissing(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cfg := r.config()
	cfg.Settlement.Confirmations = 6
	cfg.Sweep.Confirmations = 3
	_, err := service.New(ctx, cfg)
	require.ErrorIs(t, err, service.ErrConfig)
	require.ErrorContains(t, err, "Settlement.Confirmations is set by service.Config")
	require.ErrorContains(t, err, "Sweep.Confirmations is set by service.Config")

	_, err = service.New(ctx, service.Config{})
	require.ErrorContains(t, err, "Store is required")
	require.ErrorContains(t, err, "RPC (the chain node's client) is required")
	require.ErrorContains(t, err, "SecretKey (PAY_SECRET_KEY) is required")

	cfg = r.config()
	cfg.ChainID = 1
	_, err = service.New(ctx, cfg)
	require.ErrorContains(t, err, "ChainID is 1 but the node reports chain 1337")

	cfg = r.config()
	cfg.Checkout.NativeSymbol = "ATOM"
	cfg.Sweep.NativeSymbol = "ATOM"
	_, err = service.New(ctx, cfg)
	require.ErrorContains(t, err, "Checkout.NativeSymbol is set by service.Config")
	require.ErrorContains(t, err, "Sweep.NativeSymbol is set by service.Config")
	cfg = r.config()
	cfg.NativeSymbol = "A TOM"
	_, err = service.New(ctx, cfg)
	require.ErrorContains(t, err, `NativeSymbol "A TOM": want 2 to 6 ASCII letters or digits`)
}

// A pricer that can never quote is an error at start that names the
// setting (issue #34: pricing.New took one source while MinSources is 2,
// and every fiat invoice answered 503 "retry after" for ever).
func TestNew_PricerThatCanNeverQuote_RefusedAtStartNamingTheSetting(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rates := map[pricing.Pair]store.Decimal{{Base: "ETH", Quote: "USD"}: store.MustParseDecimal("2500")}
	one := pricing.NewFixed("dev", rates, nil)
	p, err := pricing.New([]pricing.Source{one}, pricing.Config{Assets: []string{"ETH"}, Currencies: []string{"USD"}})
	require.NoError(t, err)
	cfg := r.config()
	cfg.Pricer = p
	_, err = service.New(ctx, cfg)
	require.ErrorIs(t, err, service.ErrConfig)
	require.ErrorContains(t, err, "MinSources")

	// Two sources that agree: it starts, and quotes at once.
	other := pricing.NewFixed("dev2", rates, nil)
	p, err = pricing.New([]pricing.Source{one, other}, pricing.Config{Assets: []string{"ETH"}, Currencies: []string{"USD"}})
	require.NoError(t, err)
	cfg.Pricer = p
	svc, err := service.New(ctx, cfg)
	require.NoError(t, err)
	m, _, err := svc.Invoices.EnsureMerchant(ctx, "shop", invoice.MerchantParams{SettlementAddress: common.Address{0x5e}})
	require.NoError(t, err)
	owner, err := svc.Invoices.Owner(ctx, m.ID)
	require.NoError(t, err)
	inv, err := svc.Invoices.CreateInvoice(ctx, owner, "fiat", invoice.InvoiceParams{Price: &invoice.Price{Amount: "25.00", Currency: "USD"}})
	require.NoError(t, err)
	require.Equal(t, "10000000000000000", inv.Amount.String(), "25 USD at 2,500 USD the coin")
}

// Webhooks to private networks are refused unless allowed: the default is
// safe (issue #34: BlockPrivateNetworks was off unless the host set it).
func TestNew_PrivateWebhooksRefusedByDefault(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cfg := r.config()
	cfg.AllowPrivateWebhooks = false
	svc, err := service.New(ctx, cfg)
	require.NoError(t, err)
	_, _, err = svc.Invoices.EnsureMerchant(ctx, "shop", invoice.MerchantParams{WebhookURL: "http://127.0.0.1:9/hooks",
		SettlementAddress: common.Address{0x5e}})
	require.ErrorIs(t, err, invoice.ErrInvalidMerchant)
	require.Equal(t, "webhook_url_not_public", invoice.ErrorCode(err))
	cfg.Webhook.BlockPrivateNetworks = true
	_, err = service.New(ctx, cfg)
	require.ErrorContains(t, err, "Webhook.BlockPrivateNetworks is set by service.Config")
}

// The whole service from one Config: an invoice made through the Go API,
// paid on the chain, confirmed with the one Confirmations and swept with
// the chain guard wired; Run returns nil when stopped. The chain's coin
// is not "ETH" here (NativeSymbol): the invoice, the checkout page and
// the ledger all call it by its name.
func TestService_InvoiceToSettled_ThenACleanStop(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cfg := r.config()
	cfg.NativeSymbol = "TEST"
	svc, err := service.New(ctx, cfg)
	require.NoError(t, err)
	require.Equal(t, []string{"chain-identity", "invoice", "indexer", "settlement", "sweep", "webhooks"}, svc.Workers())
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()

	payTo := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	m, created, err := svc.Invoices.EnsureMerchant(ctx, "shop-1", invoice.MerchantParams{SettlementAddress: payTo})
	require.NoError(t, err)
	require.True(t, created)
	owner, err := svc.Invoices.Owner(ctx, m.ID)
	require.NoError(t, err)
	inv, err := svc.Invoices.CreateInvoice(ctx, owner, "order-1", invoice.InvoiceParams{AmountFormatted: "0.5", OrderID: "order-1"})
	require.NoError(t, err)
	res, err := http.Get(srv.URL + "/v1/public/invoice")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "the handler serves the API (a lookup token is needed)")

	r.chain.Pay(inv.PaymentURI)
	deadline := time.Now().Add(time.Minute)
	for {
		r.chain.Mine(1)
		got, err := svc.Invoices.Invoice(ctx, m.ID, inv.ID)
		require.NoError(t, err)
		if got.Status == store.StatusSettled {
			break
		}
		require.True(t, time.Now().Before(deadline), "not settled: %s %s", got.Status, got.SweepStatus)
		time.Sleep(30 * time.Millisecond)
	}
	require.Equal(t, 0, r.chain.Balance(nil, payTo).Cmp(new(big.Int).Div(big.NewInt(1e18), big.NewInt(2))), "the merchant got exactly 0.5")
	require.Equal(t, "TEST", inv.Asset.Symbol)
	var kinds []string
	for e, err := range svc.Invoices.Ledger(ctx, m.ID, invoice.LedgerQuery{}) {
		require.NoError(t, err)
		require.Equal(t, "TEST", e.Asset.Symbol, "ledger entry %s", e.Kind)
		kinds = append(kinds, e.Kind)
	}
	require.NotEmpty(t, kinds)
	page, err := http.Get(srv.URL + "/checkout")
	require.NoError(t, err)
	body, err := io.ReadAll(page.Body)
	page.Body.Close()
	require.NoError(t, err)
	require.Contains(t, html.UnescapeString(string(body)), `"native_symbol":"TEST"`, "the page offers the wallet the chain's coin")
	stop()
	require.NoError(t, <-done)
}

// Under tag finality (the node's finalized block; the simulated chain
// finalizes every 32nd block) the one Finality reaches the indexer, which
// records the finalized block, and settlement and sweep, which wait for
// it: the invoice is never CONFIRMED while its payment is above the
// recorded block, and it settles once the chain finalized both the
// payment and the sweep.
func TestService_TagFinality_ConfirmedOnlyOnceFinalized(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cfg := r.config()
	cfg.Confirmations, cfg.Finality = 0, store.FinalityTag
	svc, err := service.New(ctx, cfg)
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()

	payTo := common.HexToAddress("0x00000000000000000000000000000000000000bb")
	m, _, err := svc.Invoices.EnsureMerchant(ctx, "shop-tag", invoice.MerchantParams{SettlementAddress: payTo})
	require.NoError(t, err)
	owner, err := svc.Invoices.Owner(ctx, m.ID)
	require.NoError(t, err)
	inv, err := svc.Invoices.CreateInvoice(ctx, owner, "tag-1", invoice.InvoiceParams{AmountFormatted: "0.25"})
	require.NoError(t, err)
	paidIn := r.chain.Pay(inv.PaymentURI).BlockNumber.Uint64()

	deadline := time.Now().Add(2 * time.Minute)
	var sawPaid bool
	for {
		got, err := svc.Invoices.Invoice(ctx, m.ID, inv.ID)
		require.NoError(t, err)
		fin, ok, err := r.st.FinalizedBlock(ctx)
		require.NoError(t, err)
		switch got.Status {
		case store.StatusPaid:
			sawPaid = true
		case store.StatusConfirmed, store.StatusSettled:
			require.True(t, ok && fin >= paidIn, "%s with the payment in block %d above the finalized block %d (recorded: %v)", got.Status, paidIn, fin, ok)
		}
		if got.Status == store.StatusSettled {
			break
		}
		require.True(t, time.Now().Before(deadline), "not settled: %s %s; finalized %d (%v), head %d", got.Status, got.SweepStatus, fin, ok, r.chain.Head())
		r.chain.Mine(1)
		time.Sleep(20 * time.Millisecond)
	}
	require.True(t, sawPaid, "PAID was seen before the payment's block was final")
	require.Equal(t, 0, r.chain.Balance(nil, payTo).Cmp(new(big.Int).Div(big.NewInt(1e18), big.NewInt(4))), "the merchant got exactly 0.25")
	stop()
	require.NoError(t, <-done)
}

// A part that stops (here the indexer, when the node starts answering for
// another chain) stops the service: Run returns its error, named, at once
// — not at the end of a wait.
func TestRun_APartStops_RunReturnsItsError(t *testing.T) {
	t.Parallel()
	done, _ := runThenSwap(t, nil)
	select {
	case err := <-done:
		require.ErrorContains(t, err, "service: ")
		require.True(t, errors.Is(err, indexer.ErrWrongChain) || errors.Is(err, indexer.ErrChainChanged), "%v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return when a part stopped")
	}
}

// With Config.ChainStopped taking the error, the same stop ends the chain
// parts only: Run goes on (the API's part with it) until it is cancelled,
// and then returns nil.
func TestRun_ChainStopped_OnlyTheChainPartsStop(t *testing.T) {
	t.Parallel()
	stopped := make(chan error, 4)
	done, stop := runThenSwap(t, func(cfg *service.Config) {
		cfg.ChainStopped = func(_ context.Context, err error) bool {
			stopped <- err
			return errors.Is(err, indexer.ErrWrongChain) || errors.Is(err, indexer.ErrChainChanged)
		}
	})
	select {
	case err := <-stopped:
		require.True(t, errors.Is(err, indexer.ErrWrongChain) || errors.Is(err, indexer.ErrChainChanged), "%v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no chain part stopped on another chain")
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned although only chain parts stopped: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return when cancelled")
	}
}

// runThenSwap runs a service (the rig's config, then mutate) until its
// indexer has followed two blocks, then has the node answer for another
// chain. It returns Run's result and the cancel of Run's context.
func runThenSwap(t *testing.T, mutate func(*service.Config)) (<-chan error, context.CancelFunc) {
	t.Helper()
	r := newRig(t)
	src := &swappable{Source: indexer.NewRPCSource(r.chain.RPC())}
	cfg := r.config()
	cfg.Source = src
	cfg.Identity.CheckInterval = 20 * time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	svc, err := service.New(ctx, cfg)
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	r.chain.Mine(2)
	require.Eventually(t, func() bool {
		cur, err := r.st.GetCursor(ctx, "indexer")
		return err == nil && cur.BlockNumber >= 2
	}, 30*time.Second, 10*time.Millisecond, "the indexer follows the chain")
	src.otherChain.Store(true)
	return done, stop
}

// swappable is the node's Source until otherChain is set: then it answers
// for chain 7.
type swappable struct {
	indexer.Source
	otherChain atomic.Bool
}

func (s *swappable) ChainID(ctx context.Context) (uint64, error) {
	if s.otherChain.Load() {
		return 7, nil
	}
	return s.Source.ChainID(ctx)
}
