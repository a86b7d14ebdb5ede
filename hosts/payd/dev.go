//go:build !nodev

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store/sqlite"
	"github.com/evmpay/evmpay/sweep"
)

// demoSettlementIndex is the dev-mnemonic account that receives the demo
// merchant's swept funds. It is not funded at genesis, so its balance is
// exactly what was swept to it.
const demoSettlementIndex = 100

// runDev runs everything in one process with no set-up: a dev chain, SQLite,
// every API and worker, and a demo merchant.
func runDev(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("dev")
	httpAddr := fs.String("http", "127.0.0.1:8080", "listen address of the invoice, read and admin APIs")
	metricsAddr := fs.String("metrics", "127.0.0.1:9464", "listen address of the operator listener serving /metrics ('' serves no metrics); keep it off the public network")
	proxyAddr := fs.String("rpc-proxy", "127.0.0.1:8546", "listen address of the RPC proxy")
	chainAddr := fs.String("chain-rpc", "127.0.0.1:8545", "listen address of the dev chain's JSON-RPC")
	dataDir := fs.String("data", ".payd", "directory for the SQLite file and generated development secrets")
	blockTime := fs.Duration("block-time", 1200*time.Millisecond, "time between dev chain blocks")
	webhookURL := fs.String("webhook-url", "", "the demo merchant's webhook URL")
	log, err := parseLogged(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		return fmt.Errorf("--data %s: %w", *dataDir, err)
	}
	keys, err := newDevProvider(os.Getenv, *dataDir)
	if err != nil {
		return err
	}

	// The chain funds the gas funder and the sweep wallet at genesis, so the
	// first sweep does not wait for a top-up.
	funder, err := loadGasFunder(ctx, keys)
	if err != nil {
		return err
	}
	wallet, err := loadWallet(ctx, keys)
	if err != nil {
		return err
	}
	sweepKey, err := wallet.SweepKey()
	if err != nil {
		return err
	}
	log.Info("starting the dev chain", "rpc", *chainAddr, "block_time", blockTime.String())
	chain, err := startDevChain(*chainAddr, *blockTime,
		[]common.Address{crypto.PubkeyToAddress(funder.PublicKey), crypto.PubkeyToAddress(sweepKey.PublicKey)})
	if err != nil {
		return err
	}
	log.Info("deploying the test token and minting it to the funded accounts")
	usdc, err := chain.deployDevToken(ctx)
	if err != nil {
		chain.backend.Close()
		return err
	}
	decimals := usdc.Decimals
	chainCtx, stopChain := context.WithCancel(context.Background())
	chainDone := make(chan error, 1)
	go func() { chainDone <- chain.Run(chainCtx) }()
	defer func() {
		stopChain()
		<-chainDone
	}()

	// The dev chain starts from genesis on every run, so the database does
	// too: blocks and invoices of an earlier run's chain would be lies.
	dbPath := filepath.Join(*dataDir, devDatabaseFile)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(dbPath + suffix)
	}
	st, err := sqlite.Open(ctx, dbPath, sqlite.Config{})
	if err != nil {
		return err
	}
	defer st.Close()

	a, err := newApp(ctx, st, appConfig{
		roles:        roleSet{roleAPI: true, roleGateway: true, roleSettlement: true, roleSweep: true, roleWebhooks: true},
		httpAddr:     *httpAddr,
		metricsAddr:  *metricsAddr,
		proxyAddr:    *proxyAddr,
		keys:         keys,
		sweepPolicy:  sweep.PolicySponsor,
		archiveAfter: 365 * 24 * time.Hour,
		archiveEvery: time.Hour,
		proxyRate:    50,
		proxyBurst:   100,
		// The checkout page and its wallet button use this process's own
		// addresses; merchants' redirect_url may be a local shop.
		selfBaseURL: true,
		selfRPCURL:  true,
		chain: chainSpec{rpcURL: chain.url, confirmations: 12, chainName: "evmpay dev chain",
			tokens: []tokenConfig{{Symbol: usdc.Symbol, Address: usdc.Address, Decimals: &decimals}}},
		loopbackRedirects: true,
		// Offline fiat pricing: the documented fixed dev rates.
		pricing: pricingConfig{dev: true},
		log:     log,
	})
	if err != nil {
		return err
	}
	demo, err := createDemoMerchant(ctx, a, *webhookURL)
	if err != nil {
		a.close()
		return err
	}
	banner := devBanner(a, chain, demo, usdc, *dataDir)
	dash, err := devDashboardBanner(ctx, a, demo.Merchant.ID)
	if err != nil {
		a.close()
		return err
	}
	banner += dash
	bannerPath := filepath.Join(*dataDir, devBannerFile)
	// The banner holds the demo merchant's credentials: readable by its
	// owner only, like the dev secrets beside it.
	if err := os.WriteFile(bannerPath, []byte(banner), 0o600); err != nil {
		a.close()
		return fmt.Errorf("write %s: %w", bannerPath, err)
	}
	fmt.Fprint(stdout, banner)
	fmt.Fprintf(stdout, "  (This banner is kept in %s: `cat %s` shows it again.)\n\n", bannerPath, bannerPath)
	return a.run(ctx)
}

func createDemoMerchant(ctx context.Context, a *app, webhookURL string) (invoice.CreatedMerchant, error) {
	w, err := devWallet()
	if err != nil {
		return invoice.CreatedMerchant{}, err
	}
	settle, err := w.Address(demoSettlementIndex)
	if err != nil {
		return invoice.CreatedMerchant{}, err
	}
	return a.invoices.CreateMerchant(ctx, invoice.MerchantParams{
		Name:              "demo",
		WebhookURL:        webhookURL,
		SettlementAddress: settle,
	})
}

// devBannerFile is where `payd dev` keeps its banner, in the data
// directory: the demo merchant's credentials stay retrievable after the
// log has scrolled them away.
const devBannerFile = "dev-banner.txt"

// devBanner is what `payd dev` prints once it serves: the chain, the
// listeners, the demo merchant's credentials and commands to paste.
func devBanner(a *app, chain *devChain, demo invoice.CreatedMerchant, usdc *testtoken.Token, dataDir string) string {
	api := a.httpURL()
	var b strings.Builder
	fmt.Fprintf(&b, "\n  evmpay dev is running — everything in this process, state in %s\n\n", dataDir)
	fmt.Fprintf(&b, "  dev chain     %s   chain id %d, a block every %s\n", chain.url, a.chainID, chain.period)
	fmt.Fprintf(&b, "                funded: the 10 first accounts of %q\n", devMnemonic)
	fmt.Fprintf(&b, "  test token    %s %s   (%d decimals, EIP-2612 permit; 1,000,000 minted to each funded account)\n",
		usdc.Symbol, usdc.Address.Hex(), usdc.Decimals)
	fmt.Fprintf(&b, "  API           %s   (OpenAPI: %s/v1/openapi.json)\n", api, api)
	fmt.Fprintf(&b, "  RPC proxy     %s\n", a.proxyURL())
	if m := a.metricsURL(); m != "" {
		fmt.Fprintf(&b, "  metrics       %s/metrics   (operator listener, --metrics)\n\n", m)
	} else {
		fmt.Fprintf(&b, "  metrics       off (--metrics '')\n\n")
	}
	fmt.Fprintf(&b, "  demo merchant id %d, settlement address %s\n", demo.Merchant.ID, demo.Merchant.SettlementAddress.Hex())
	fmt.Fprintf(&b, "    api_key         %s\n", demo.APIKey)
	fmt.Fprintf(&b, "    webhook_secret  %s\n\n", demo.WebhookSecret)
	fmt.Fprintf(&b, "  Create an invoice for 0.5 coin:\n\n")
	fmt.Fprintf(&b, "    curl -s -X POST %s/v1/invoices \\\n", api)
	fmt.Fprintf(&b, "      -H 'Authorization: Bearer %s' \\\n", demo.APIKey)
	fmt.Fprintf(&b, "      -H 'Idempotency-Key: demo-1' -H 'Content-Type: application/json' \\\n")
	fmt.Fprintf(&b, "      -d '{\"amount_wei\": \"500000000000000000\"}'\n\n")
	fmt.Fprintf(&b, "  Open the answer's checkout_url in a browser: the payer's page,\n")
	fmt.Fprintf(&b, "    %s/checkout#<lookup_token>\n\n", api)
	fmt.Fprintf(&b, "  Pay it (in another terminal) with its payment_uri, and watch the page follow:\n\n")
	fmt.Fprintf(&b, "    go run ./hosts/payd pay 'ethereum:0x…@%d?value=500000000000000000'\n\n", a.chainID)
	fmt.Fprintf(&b, "  Or an invoice for 12.5 %s (each new invoice needs its own Idempotency-Key):\n\n", usdc.Symbol)
	fmt.Fprintf(&b, "    curl -s -X POST %s/v1/invoices \\\n", api)
	fmt.Fprintf(&b, "      -H 'Authorization: Bearer %s' \\\n", demo.APIKey)
	fmt.Fprintf(&b, "      -H 'Idempotency-Key: demo-usdc-1' -H 'Content-Type: application/json' \\\n")
	fmt.Fprintf(&b, "      -d '{\"asset\": \"%s\", \"amount_formatted\": \"12.5\"}'\n\n", usdc.Symbol)
	fmt.Fprintf(&b, "    and pay its payment_uri the same way: payd pay 'ethereum:%s@%d/transfer?address=0x…&uint256=12500000'\n\n",
		usdc.Address.Hex(), a.chainID)
	fmt.Fprintf(&b, "  Or an invoice priced in euros, payable in ETH or %s (offline dev rates: 1 ETH = 2,000 EUR, 1 %s = 0.80 EUR):\n\n", usdc.Symbol, usdc.Symbol)
	fmt.Fprintf(&b, "    curl -s -X POST %s/v1/invoices \\\n", api)
	fmt.Fprintf(&b, "      -H 'Authorization: Bearer %s' \\\n", demo.APIKey)
	fmt.Fprintf(&b, "      -H 'Idempotency-Key: demo-eur-1' -H 'Content-Type: application/json' \\\n")
	fmt.Fprintf(&b, "      -d '{\"price\": {\"amount\": \"49.90\", \"currency\": \"EUR\"}}'\n\n")
	fmt.Fprintf(&b, "    its quotes list each asset's exact amount and payment_uri; its checkout_url shows the price first.\n\n")
	fmt.Fprintf(&b, "  Read an invoice as the merchant: curl -s %s/v1/invoices/<id> -H 'Authorization: Bearer %s'\n\n", api, demo.APIKey)
	return b.String()
}
