package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
)

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
