package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
)

// runDevChain runs the dev chain alone, for `payd serve` to use.
func runDevChain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("devchain")
	addr := fs.String("chain-rpc", "127.0.0.1:8545", "JSON-RPC listen address")
	period := fs.Duration("block-time", 1200*time.Millisecond, "time between blocks")
	fund := fs.String("fund", "", "comma-separated extra addresses to fund (e.g. the gas funder)")
	log, err := parseLogged(fs, args, stdout)
	if err != nil {
		return err
	}
	var extra []common.Address
	for _, s := range strings.Split(*fund, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !common.IsHexAddress(s) {
			return usageError(fmt.Sprintf("payd devchain: --fund %q is not an address", s))
		}
		extra = append(extra, common.HexToAddress(s))
	}
	chain, err := startDevChain(*addr, *period, extra)
	if err != nil {
		return err
	}
	id, err := chain.ChainID(ctx)
	if err != nil {
		return err
	}
	log.Info("dev chain running", "rpc", chain.url, "chain_id", id, "block_time", period.String(),
		"funded_accounts", devAccounts+len(extra), "mnemonic", "test test … junk (public, dev only)")
	return chain.Run(ctx)
}

// runMigrate applies the PostgreSQL migrations to DATABASE_URL.
func runMigrate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("migrate")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		return errors.New("payd migrate: set DATABASE_URL (postgres://user@host/db)")
	}
	st, err := postgres.Open(ctx, url, postgres.Config{MaxOpenConns: 2})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "database schema is up to date")
	return nil
}

// runXPub prints the deposit account's xpub, for API processes that should
// not hold the mnemonic (PAY_XPUB).
func runXPub(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("xpub")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	kr, err := newKeyring(ctx, os.Getenv, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer kr.Close()
	w, err := loadWallet(ctx, kr)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, w.Deriver().XPub())
	return nil
}

// parseAddress accepts a 0x-prefixed 20-byte hex address in one case, or
// in mixed case with a valid EIP-55 checksum.
func parseAddress(s string) (common.Address, error) {
	a, err := store.ParseAddress(s)
	if errors.Is(err, store.ErrAddressChecksum) {
		return common.Address{}, fmt.Errorf("%q has a wrong EIP-55 checksum (mixed case must match it): check it for a typo", s)
	}
	if err != nil {
		return common.Address{}, fmt.Errorf("%q is not a 0x address", s)
	}
	if a == (common.Address{}) {
		return common.Address{}, errors.New("the zero address cannot receive funds")
	}
	return a, nil
}
