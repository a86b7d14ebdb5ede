package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/evmpay/evmpay/hosts/dashboard"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/sweep"
)

// runServe is production mode: PostgreSQL, a real node, secrets from files.
func runServe(ctx context.Context, args []string, stdout io.Writer) error {
	red := &redactor{}
	// Errors may quote the node URL (Go's HTTP client embeds it): none
	// leaves with its credentials.
	err := serve(ctx, args, stdout, red)
	return red.Error(err)
}

func serve(ctx context.Context, args []string, stdout io.Writer, red *redactor) error {
	fs := newFlagSet("serve")
	rolesFlag := fs.String("roles", "", "comma-separated roles: api,gateway,settlement,sweep,webhooks (or all)")
	httpAddr := fs.String("http", "127.0.0.1:8080", "listen address of the APIs, /healthz, /readyz")
	metricsAddr := fs.String("metrics", "127.0.0.1:9464", "listen address of the operator listener serving /metrics ('' serves no metrics); keep it off the public network")
	proxyAddr := fs.String("rpc-proxy", "127.0.0.1:8546", "listen address of the RPC proxy (gateway role)")
	migrate := fs.Bool("migrate", true, "apply database migrations at start")
	chainsFlag := fs.String("chains", "", "comma-separated chain ids whose indexer, settlement and sweep this process runs (default: every configured chain)")
	log, err := parseLogged(fs, args, stdout)
	if err != nil {
		return err
	}
	roles, err := parseRoles(*rolesFlag)
	if err != nil {
		return err
	}
	only, err := parseChainList(*chainsFlag)
	if err != nil {
		return err
	}
	env, err := readServeEnv(os.Getenv)
	if err != nil {
		return err
	}
	urls := nodeURLs(env.rpcURL)
	for _, c := range env.chains {
		urls = append(urls, nodeURLs(c.rpcURL)...)
	}
	*red = *newRedactor(urls...)
	for _, db := range []string{env.databaseURL, env.databaseReadURL} {
		if u, err := url.Parse(db); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				red.add(pw)
			}
		}
	}
	log = slog.New(red.Handler(log.Handler()))
	st, err := postgres.Open(ctx, env.databaseURL, postgres.Config{})
	if err != nil {
		return err
	}
	defer st.Close()
	var reads store.Store
	if env.databaseReadURL != "" {
		rs, err := postgres.Open(ctx, env.databaseReadURL, postgres.Config{})
		if err != nil {
			return fmt.Errorf("DATABASE_READ_URL: %w", err)
		}
		defer rs.Close()
		reads = rs
	}
	if *migrate {
		if err := st.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	// The HSM or KMS is reached before anything starts: unreachable, a
	// wrong PIN or a key that may not sign stops here with the reason.
	kr, err := newKeyring(ctx, os.Getenv, log)
	if err != nil {
		return err
	}
	defer kr.Close()
	a, err := newApp(ctx, st, appConfig{
		roles:          roles,
		httpAddr:       *httpAddr,
		metricsAddr:    *metricsAddr,
		proxyAddr:      *proxyAddr,
		backfill:       env.backfill,
		keys:           kr,
		keyCheckEvery:  5 * time.Second,
		xpub:           os.Getenv("PAY_XPUB"),
		sweepPolicy:    env.sweepPolicy,
		archiveAfter:   env.archiveAfter,
		archiveEvery:   time.Hour,
		proxyRate:      env.proxyRate,
		proxyBurst:     env.proxyBurst,
		trustedProxies: env.trustedProxies,
		blockPrivateWH: !env.allowPrivateWebhooks,
		reads:          reads,
		publicBaseURL:  env.publicBaseURL,
		mailer:         env.mailer,
		frameAncestors: env.frameAncestors,
		pricing:        env.pricing,
		chain:          env.chainSpec,
		chains:         env.chains,
		onlyChains:     only,
		log:            log,
	})
	if err != nil {
		return err
	}
	log.Info("payd serving", "roles", roles.String(), "http", a.httpURL(), "rpc_proxy", a.proxyURL(), "metrics", a.metricsURL(),
		"chain_id", a.chainID, "nodes", redactedNodes(env.rpcURL), "other_chains", a.otherChainIDs())
	return a.run(ctx)
}

// serveEnv is serve mode's environment.
type serveEnv struct {
	databaseURL string
	// databaseReadURL, optional, is a read replica for replica-tolerant
	// reads.
	databaseReadURL string
	// chainSpec is the first chain's settings (RPC_URL, CHAIN_ID, …);
	// chains the further ones (CHAINS_FILE).
	chainSpec
	chains       []chainSpec
	backfill     bool
	sweepPolicy  sweep.Policy
	archiveAfter time.Duration
	proxyRate    float64
	// trustedProxies are the reverse proxies in front of payd
	// (TRUSTED_PROXIES): behind them a client is its X-Forwarded-For
	// address, for the RPC proxy's and the public read's limits.
	trustedProxies []netip.Prefix
	proxyBurst     int
	// allowPrivateWebhooks lets webhooks go to loopback and private
	// networks (off in production: SSRF).
	allowPrivateWebhooks bool
	// publicBaseURL is where payers and merchants reach the APIs and the
	// checkout page (PUBLIC_BASE_URL); frameAncestors the origins that may
	// embed the page (CHECKOUT_FRAME_ANCESTORS, space-separated).
	publicBaseURL  string
	frameAncestors []string
	// pricing is fiat pricing (PRICING_SOURCES, PRICING_*): off when no
	// source is named.
	pricing pricingConfig
	// mailer sends the dashboard's invitations and password resets
	// (SMTP_URL or SMTP_URL_FILE, SMTP_FROM); nil: none (the owner hands
	// out the links).
	mailer *dashboard.SMTPMailer
}

// readMailer builds the dashboard's mailer from SMTP_URL (or
// SMTP_URL_FILE, for a URL with a password) and SMTP_FROM.
func readMailer(getenv func(string) string) (*dashboard.SMTPMailer, error) {
	u, err := valueOrFile(getenv, "SMTP_URL")
	from := getenv("SMTP_FROM")
	switch {
	case err != nil:
		return nil, err
	case u == "" && from == "":
		return nil, nil
	case u == "":
		return nil, errors.New("SMTP_FROM is set without SMTP_URL: set SMTP_URL (smtp://[user:password@]host:port) or unset SMTP_FROM")
	case from == "":
		return nil, errors.New("SMTP_URL is set without SMTP_FROM: set the sender's address, e.g. SMTP_FROM=\"Pay <pay@example.com>\"")
	}
	m, err := dashboard.NewSMTPMailer(u, from)
	if err != nil {
		// The URL may hold a password: the message never quotes it.
		return nil, fmt.Errorf("SMTP_URL, SMTP_FROM: %w", err)
	}
	return m, nil
}

func readServeEnv(getenv func(string) string) (serveEnv, error) {
	// Secrets in the environment are refused outright, even for roles that
	// would not read them: a deployment that sets them is misconfigured.
	for _, name := range []string{secretMnemonic, secretKey, secretGasFunder, secretAdmin} {
		if getenv(name) != "" {
			_, err := fileProvider{getenv: getenv}.Secret(context.Background(), name)
			return serveEnv{}, err
		}
	}
	e := serveEnv{
		databaseURL:     getenv("DATABASE_URL"),
		databaseReadURL: getenv("DATABASE_READ_URL"),
		sweepPolicy:     sweep.PolicySponsor,
		archiveAfter:    365 * 24 * time.Hour,
		proxyRate:       20,
		proxyBurst:      40,
	}
	var errs []error
	e.chainSpec, errs = readChainSpec(getenv)
	if e.databaseURL == "" {
		errs = append([]error{errors.New("DATABASE_URL is required (postgres://user@host:5432/db)")}, errs...)
	}
	var err error
	if e.chains, err = readChainsFile(getenv("CHAINS_FILE"), e.chainSpec); err != nil {
		errs = append(errs, err)
	}
	parse := func(name string, fn func(string) error) {
		if v := getenv(name); v != "" {
			if err := fn(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
		}
	}
	parse("INDEXER_BACKFILL", func(v string) (err error) { e.backfill, err = strconv.ParseBool(v); return })
	parse("SWEEP_FEE_POLICY", func(v string) error {
		e.sweepPolicy = sweep.Policy(v)
		if e.sweepPolicy != sweep.PolicySponsor && e.sweepPolicy != sweep.PolicyDeduct {
			return errors.New("want sponsor or deduct")
		}
		return nil
	})
	parse("ARCHIVE_AFTER", func(v string) (err error) { e.archiveAfter, err = time.ParseDuration(v); return })
	parse("RPC_PROXY_RATE", func(v string) (err error) { e.proxyRate, err = strconv.ParseFloat(v, 64); return })
	parse("TRUSTED_PROXIES", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(f))
			if err != nil {
				return errors.New("want comma-separated networks (CIDR), e.g. 10.0.0.0/8,192.168.1.7/32")
			}
			e.trustedProxies = append(e.trustedProxies, p.Masked())
		}
		return nil
	})
	parse("RPC_PROXY_BURST", func(v string) (err error) { e.proxyBurst, err = strconv.Atoi(v); return })
	parse("PUBLIC_BASE_URL", func(v string) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return errors.New("want an absolute http(s) URL without query or fragment, e.g. https://pay.example.com")
		}
		e.publicBaseURL = strings.TrimRight(v, "/")
		return nil
	})
	e.frameAncestors = strings.Fields(getenv("CHECKOUT_FRAME_ANCESTORS"))
	parse("WEBHOOK_ALLOW_PRIVATE_NETWORKS", func(v string) (err error) { e.allowPrivateWebhooks, err = strconv.ParseBool(v); return })
	if e.mailer, err = readMailer(getenv); err != nil {
		errs = append(errs, err)
	}
	if e.pricing, err = readPricingEnv(getenv); err != nil {
		errs = append(errs, err)
	}
	return e, errors.Join(errs...)
}

// runMerchants is `payd merchants create`.
func runMerchants(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		return usageError("usage: payd merchants create --webhook-url URL --settlement-address 0x… [--name NAME]")
	}
	fs := newFlagSet("merchants create")
	webhookURL := fs.String("webhook-url", "", "where the merchant's signed webhooks go (http or https URL)")
	settlement := fs.String("settlement-address", "", "the address swept funds go to")
	name := fs.String("name", "", "a name for people")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	addr, err := parseAddress(*settlement)
	if err != nil {
		return usageError("payd merchants create: --settlement-address: " + err.Error())
	}
	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		return errors.New("payd merchants create: set DATABASE_URL")
	}
	kr, err := newKeyring(ctx, os.Getenv, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer kr.Close()
	key, err := loadSecretKey(ctx, kr)
	if err != nil {
		return err
	}
	creds, err := invoice.NewCredentials(key)
	if err != nil {
		return err
	}
	st, err := postgres.Open(ctx, dbURL, postgres.Config{MaxOpenConns: 2})
	if err != nil {
		return err
	}
	defer st.Close()
	env := os.Getenv
	allowPrivate, _ := strconv.ParseBool(env("WEBHOOK_ALLOW_PRIVATE_NETWORKS"))
	var chain invoice.CodeReader
	rpcURL, err := nodeURL(env)
	if err != nil {
		return fmt.Errorf("payd merchants create: %w", err)
	}
	if rpcURL != "" {
		rpcURL = nodeURLs(rpcURL)[0] // a one-off check: the first of a chain's nodes
		c, err := ethclient.DialContext(ctx, rpcURL)
		if err != nil {
			return fmt.Errorf("payd merchants create: RPC_URL %s: %w", redactURL(rpcURL), err)
		}
		defer c.Close()
		chain = c
	} else {
		fmt.Fprintln(stdout, "RPC_URL and RPC_URL_FILE are not set: the settlement address is not checked for contract code")
	}
	rules, err := merchantRules(ctx, kr, true, !allowPrivate, chain, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	created, err := invoice.CreateMerchant(ctx, st, creds, rules, invoice.MerchantParams{Name: *name, WebhookURL: *webhookURL, SettlementAddress: addr})
	if err != nil {
		return fmt.Errorf("payd merchants create: %w", err)
	}
	fmt.Fprintf(stdout, "merchant %d created, settlement address %s. These credentials are shown once; store them now.\n",
		created.Merchant.ID, created.Merchant.SettlementAddress.Hex())
	fmt.Fprintf(stdout, "api_key=%s\nwebhook_secret=%s\n", created.APIKey, created.WebhookSecret)
	return nil
}

// nodeURL returns the chain node's JSON-RPC URL from RPC_URL or the file
// RPC_URL_FILE names ("" when neither is set). The node URL often holds an
// API key: like the secrets, it may come from a file; unlike them, the
// plain variable is accepted too, as most node URLs hold none.
func nodeURL(getenv func(string) string) (string, error) { return valueOrFile(getenv, "RPC_URL") }

// valueOrFile reads the setting name from the environment, or from the
// file that name+"_FILE" names (mode 0600 or stricter: the value may hold
// a password); not both.
func valueOrFile(getenv func(string) string, name string) (string, error) {
	v, file := getenv(name), getenv(name+"_FILE")
	switch {
	case v != "" && file != "":
		return "", fmt.Errorf("%s and %s_FILE are both set: set one", name, name)
	case file == "":
		return v, nil
	}
	b, err := readSecretFile(name+"_FILE", file)
	if err != nil {
		return "", err
	}
	if v = strings.TrimSpace(string(b)); v == "" {
		return "", fmt.Errorf("%s_FILE: %s is empty", name, file)
	}
	return v, nil
}
