//go:build !nodev

package main

import (
	"context"

	"github.com/evmpay/evmpay/store/sqlite"
)

// openSQLite opens a SQLite store for `payd reconcile` (payd dev's
// database, or an embedder's on store/sqlite). The production build
// (-tags nodev) leaves SQLite out: its databases are PostgreSQL.
func openSQLite(ctx context.Context, path string) (reconcileStore, error) {
	return sqlite.Open(ctx, path, sqlite.Config{MaxOpenConns: 2})
}
