package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// usageError is a command-line mistake: main exits 2 and the message says
// what to type instead.
type usageError string

func (e usageError) Error() string { return string(e) }

const usage = `payd — evmpay's reference host

Usage:
  payd dev       [--http 127.0.0.1:8080] [--rpc-proxy 127.0.0.1:8546] [--chain-rpc 127.0.0.1:8545]
                 [--metrics 127.0.0.1:9464]
                 [--data .payd] [--block-time 1.2s] [--webhook-url URL] [--log-format text|json]
                 Everything in one process: a dev chain, SQLite, every API and worker,
                 and a demo merchant whose credentials are printed.
  payd serve     --roles api,gateway,settlement,sweep,webhooks [--http …] [--rpc-proxy …]
                 [--metrics 127.0.0.1:9464 (operator listener; '' for none)]
                 [--migrate=true] [--chains 1337,9000] [--log-format text|json]
                 Production mode: DATABASE_URL, RPC_URL, CHAIN_ID, INDEXER_BACKFILL and secrets
                 from PAY_MNEMONIC_FILE, PAY_SECRET_KEY_FILE, GAS_FUNDER_PRIVATE_KEY_FILE,
                 PAY_ADMIN_TOKEN_FILE; more chains from CHAINS_FILE (docs/chains.md).
  payd devchain  [--chain-rpc 127.0.0.1:8545] [--block-time 1.2s] [--fund 0xaddr,…] [--chain-id 1337]
                 The dev chain alone, for use with serve.
  payd pay       [--rpc 127.0.0.1:8545] [--key-file file] <ethereum:… URI>
                 Pay a payment URI from a funded dev account; prints the tx hash.
  payd migrate   Apply database migrations to DATABASE_URL.
  payd merchants create --webhook-url URL --settlement-address 0x… [--name NAME]
                 Create a merchant on DATABASE_URL and print its credentials once.
  payd dashboard-user --merchant ID --email ADDRESS [--role owner]
                 Give a merchant a dashboard user (DATABASE_URL, PUBLIC_BASE_URL,
                 PAY_SECRET_KEY_FILE, PAY_XPUB or PAY_MNEMONIC_FILE) and print a
                 one-time sign-in link to hand over (docs/dashboard.md).
  payd xpub      Print the xpub of the deposit account (from PAY_MNEMONIC_FILE).
  payd reconcile [--block N] [--all]
                 Compare the ledger's balance of every wallet of the service with the
                 chain's (DATABASE_URL: postgres://… or sqlite:PATH, e.g. payd dev's
                 sqlite:.payd/payd-dev.db; RPC_URL, PAY_TOKENS); exit 1 when any differs.
  payd secrets seal NAME --out FILE [--in FILE|-]
                 Seal a secret (plaintext on standard input) under PAY_SEAL_KEY in
                 PAY_KEYS_PROVIDER (pkcs11 or awskms); see docs/keys.md.
  payd keys create --kind signing|wrap --label LABEL
  payd keys import --label LABEL < hex-key
                 Make a key in the HSM or KMS (PAY_KEYS_PROVIDER); prints its id and address.
`

// run is payd's whole program: main only adds signals and exit codes, and
// tests call run directly.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return usageError("payd: missing command")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "dev":
		return runDev(ctx, rest, stdout)
	case "serve":
		return runServe(ctx, rest, stdout)
	case "devchain":
		return runDevChain(ctx, rest, stdout)
	case "pay":
		return runPay(ctx, rest, stdout)
	case "migrate":
		return runMigrate(ctx, rest, stdout)
	case "merchants":
		return runMerchants(ctx, rest, stdout)
	case "dashboard-user":
		return runDashboardUser(ctx, rest, stdout)
	case "xpub":
		return runXPub(ctx, rest, stdout)
	case "reconcile":
		return runReconcile(ctx, rest, stdout)
	case "secrets":
		return runSecrets(ctx, rest, os.Stdin, stdout)
	case "keys":
		return runKeys(ctx, rest, os.Stdin, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return usageError(fmt.Sprintf("payd: unknown command %q (try `payd help`)", cmd))
	}
}

// newFlagSet returns a flag set whose errors come back as usage errors
// (parseFlags) instead of being printed.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseLogged adds --log-format to fs, parses args and returns the
// process logger.
func parseLogged(fs *flag.FlagSet, args []string, stdout io.Writer) (*slog.Logger, error) {
	format := fs.String("log-format", "text", "log format: text or json")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	return newLogger(stdout, *format)
}

// parseFlags parses args and turns flag errors into usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return usageError(usage)
		}
		return usageError(fmt.Sprintf("payd %s: %v (try `payd help`)", fs.Name(), err))
	}
	return nil
}

// newLogger returns the process logger: text by default, JSON on request.
func newLogger(w io.Writer, format string) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	switch strings.ToLower(format) {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, usageError(fmt.Sprintf("--log-format %q: want text or json", format))
	}
}
