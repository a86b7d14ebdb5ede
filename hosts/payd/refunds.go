package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/sweep"
)

// Refunds and payouts in payd (docs/refunds.md): the payout wallets'
// signer of the sweep role, the ledger's reconciliation endpoint of the
// api role, and `payd reconcile`.

// payoutKeysEnv lists merchants whose payout wallet key lives in the HSM
// or KMS: "<merchant id>=<label or key id>,…". The others are derived from
// the mnemonic (m/44'/60'/2'/0/<merchant id>), like the sweep wallet.
const payoutKeysEnv = "PAYOUT_WALLET_KEYS"

// payoutSigner is the sweep role's signer of payout wallets.
func payoutSigner(ctx context.Context, kp KeyProvider, w *hdwallet.Wallet) (sweep.PayoutSigner, error) {
	kr, ok := kp.(*keyring)
	if !ok || kr.env.payoutKeys == "" {
		return w, nil
	}
	keyed := map[int64]accountKey{}
	for _, pair := range splitList(kr.env.payoutKeys) {
		idText, id, ok := strings.Cut(pair, "=")
		merchant, err := strconv.ParseInt(strings.TrimSpace(idText), 10, 64)
		if !ok || err != nil || merchant < 1 || strings.TrimSpace(id) == "" {
			return nil, fmt.Errorf("%s: want <merchant id>=<key label or id>,…; got %q", payoutKeysEnv, pair)
		}
		key, err := kr.accountKey(ctx, fmt.Sprintf("PAYOUT_WALLET_KEY merchant %d", merchant), strings.TrimSpace(id))
		if err != nil {
			return nil, err
		}
		keyed[merchant] = key
	}
	return keyedPayouts{keyed: keyed, derived: w}, nil
}

// keyedPayouts signs with an HSM or KMS key for the merchants that have
// one, and with the mnemonic's payout path for the others.
type keyedPayouts struct {
	keyed   map[int64]accountKey
	derived *hdwallet.Wallet
}

func (k keyedPayouts) PayoutAddress(merchantID int64) (common.Address, error) {
	if key, ok := k.keyed[merchantID]; ok {
		return key.Address(), nil
	}
	return k.derived.PayoutAddress(merchantID)
}

func (k keyedPayouts) SignPayoutTx(ctx context.Context, merchantID int64, tx *types.Transaction, signer types.Signer) (*types.Transaction, error) {
	if key, ok := k.keyed[merchantID]; ok {
		return key.SignTx(ctx, tx, signer)
	}
	return k.derived.SignPayoutTx(ctx, merchantID, tx, signer)
}

// buildReconciliation serves GET /v1/admin/reconciliation (operator
// token): the ledger's balances of the service's wallets against the
// chain's.
func (a *app) buildReconciliation() error {
	r, err := sweep.NewReconciler(a.st, a.eth, sweep.ReconcileConfig{
		Tokens:        a.tokenAddresses(),
		OperatorToken: a.adminToken,
		Registerer:    a.reg,
		Logger:        a.log.With("component", "ledger"),
	})
	if err != nil {
		return err
	}
	r.Register(a.mux)
	return nil
}

// runReconcile is `payd reconcile [--block N]`: it compares the ledger's
// balance of every wallet of the service with the chain's, prints them,
// and exits non-zero when any differs.
func runReconcile(ctx context.Context, args []string, stdout io.Writer) error {
	return reconcile(ctx, args, os.Getenv, stdout)
}

// devDatabaseFile is payd dev's SQLite file in its data directory.
const devDatabaseFile = "payd-dev.db"

// sqliteScheme prefixes a DATABASE_URL that names a SQLite file
// (`sqlite:.payd/payd-dev.db`, `sqlite:///var/lib/evmpay.db`): the store
// of `payd dev` and of embedders on store/sqlite.
const sqliteScheme = "sqlite:"

// reconcileStore is the database `payd reconcile` reads.
type reconcileStore interface {
	Chain(id uint64) store.Store
	Close() error
}

// openReconcileStore opens DATABASE_URL: PostgreSQL, or a SQLite file
// that must exist (reconcile never creates an empty database).
func openReconcileStore(ctx context.Context, dbURL string) (reconcileStore, error) {
	path, ok := strings.CutPrefix(dbURL, sqliteScheme)
	if !ok {
		return postgres.Open(ctx, dbURL, postgres.Config{MaxOpenConns: 2})
	}
	path = strings.TrimPrefix(path, "//") // sqlite:///abs/path is /abs/path
	if path == "" {
		return nil, usageError("payd reconcile: DATABASE_URL=sqlite:PATH names the SQLite file, e.g. sqlite:.payd/" + devDatabaseFile)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("DATABASE_URL: %s is a directory; name the SQLite file in it (payd dev's is %s)", path,
			filepath.Join(path, devDatabaseFile))
	}
	return openSQLite(ctx, path)
}

// reconcile is runReconcile with its environment.
func reconcile(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := newFlagSet("reconcile")
	block := fs.Uint64("block", 0, "compare at this block (default and at most: the ledger's last followed block)")
	all := fs.Bool("all", false, "print every wallet, not only the ones that differ")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dbURL := getenv("DATABASE_URL")
	rpcURL, err := nodeURL(getenv)
	if err != nil {
		return err
	}
	if dbURL == "" || rpcURL == "" {
		return usageError("payd reconcile: set DATABASE_URL (postgres://… or sqlite:PATH, e.g. sqlite:.payd/payd-dev.db for payd dev) and RPC_URL (or RPC_URL_FILE)")
	}
	st, err := openReconcileStore(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	rpcURL = nodeURLs(rpcURL)[0] // a one-off reading: the first of a chain's nodes
	eth, err := ethclient.DialContext(ctx, rpcURL)
	if err != nil {
		return fmt.Errorf("RPC_URL %s: %w", redactURL(rpcURL), err)
	}
	defer eth.Close()
	toks, err := readTokens(getenv)
	if err != nil {
		return err
	}
	var tokens []common.Address
	for _, t := range toks {
		tokens = append(tokens, t.Address)
	}
	chain, err := eth.ChainID(ctx)
	if err != nil {
		return fmt.Errorf("RPC_URL %s does not answer eth_chainId: %w", redactURL(rpcURL), err)
	}
	if !chain.IsUint64() {
		return fmt.Errorf("RPC_URL %s: chain id %s out of range", redactURL(rpcURL), chain)
	}
	// The ledger of the node's chain, compared with that chain.
	r, err := sweep.NewReconciler(st.Chain(chain.Uint64()), eth, sweep.ReconcileConfig{Tokens: tokens})
	if err != nil {
		return err
	}
	rec, err := r.Reconcile(ctx, *block)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tADDRESS\tTOKEN\tLEDGER\tCHAIN\tDIFFERENCE")
	for _, w := range rec.Wallets {
		if w.OK && !*all {
			continue
		}
		token := "native"
		if w.Token != nil {
			token = w.Token.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", w.Role, w.Address, token, w.Ledger, w.Chain, w.Difference)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "block %d: %d ledger entries, %d wallet balances compared, %d differ\n", rec.Block, rec.Entries,
		len(rec.Wallets), rec.Differences)
	if !rec.OK {
		return fmt.Errorf("payd reconcile: %d wallet balances differ from the ledger", rec.Differences)
	}
	return nil
}
