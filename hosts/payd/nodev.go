//go:build nodev

package main

import (
	"context"
	"errors"
	"io"
)

// errNoDevChain answers `payd dev` and `payd devchain` in a production
// build (-tags nodev), which leaves go-ethereum's in-process node (its p2p
// stack, database and the test tokens) out of the binary.
var errNoDevChain = errors.New("this payd was built for production (-tags nodev), without the dev chain: " +
	"run `go run ./hosts/payd dev` from a checkout of evmpay for the development setup")

func runDev(context.Context, []string, io.Writer) error { return errNoDevChain }

func runDevChain(context.Context, []string, io.Writer) error { return errNoDevChain }

// openSQLite answers `payd reconcile` with a sqlite: DATABASE_URL in a
// production build, which leaves the SQLite store out of the binary.
func openSQLite(context.Context, string) (reconcileStore, error) {
	return nil, errors.New("this payd was built for production (-tags nodev), without the SQLite store: " +
		"run `go run ./hosts/payd reconcile` from a checkout of evmpay to reconcile a SQLite database")
}
