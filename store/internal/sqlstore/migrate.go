package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
	// NoTx: the file starts with the line "-- evmpay:no-transaction". Its
	// statements run one by one outside a transaction, for what
	// PostgreSQL refuses inside one (CREATE INDEX CONCURRENTLY, which
	// builds an index on a big table without blocking its writes). Such a
	// file must be safe to run again from the top after failing half-way
	// (DROP INDEX CONCURRENTLY IF EXISTS before each CREATE INDEX
	// CONCURRENTLY: a failed build leaves an INVALID index behind).
	// Statements are separated by a semicolon at the end of a line.
	NoTx bool
}

// noTxMarker is the first line of a migration that runs outside a
// transaction.
const noTxMarker = "-- evmpay:no-transaction"

// LoadMigrations reads files named NNNN_name.sql from dir in fsys, in
// version order.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: want NNNN_name.sql", name)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %q and %q share version %d", prev, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(body),
			NoTx: strings.HasPrefix(string(body), noTxMarker+"\n")})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// Migrate applies the migrations not yet recorded in schema_migrations, in
// order, each in its own transaction together with its record. lockSQL runs
// first in each transaction to serialise concurrent migrators (an advisory
// lock on PostgreSQL). It returns the versions it applied.
func (s *Store) Migrate(ctx context.Context, ms []Migration, lockSQL string) ([]int, error) {
	if _, err := s.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    BIGINT PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TIMESTAMP NOT NULL)`); err != nil {
		return nil, fmt.Errorf("create schema_migrations: %w", err)
	}
	var (
		applied      []int
		defaultChain string // read once, by the first pending migration that names it
	)
	for _, m := range ms {
		if strings.Contains(m.SQL, defaultChainToken) {
			done, err := s.applied(ctx, s.q, m.Version)
			if err != nil {
				return applied, fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if done {
				continue
			}
			if defaultChain == "" {
				c, err := s.defaultChain(ctx)
				if err != nil {
					return applied, fmt.Errorf("migration %s: %w", m.Name, err)
				}
				defaultChain = strconv.FormatInt(c, 10)
			}
			m.SQL = strings.ReplaceAll(m.SQL, defaultChainToken, defaultChain)
		}
		if m.NoTx {
			done, err := s.migrateNoTx(ctx, m)
			if err != nil {
				return applied, fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if done {
				applied = append(applied, m.Version)
			}
			continue
		}
		done := false
		err := s.withTx(ctx, func(t *Store) error {
			if lockSQL != "" {
				if _, err := t.exec(ctx, lockSQL); err != nil {
					return err
				}
			}
			if done, err := t.applied(ctx, t.q, m.Version); err != nil || done {
				return err
			}
			if _, err := t.q.ExecContext(ctx, m.SQL); err != nil {
				return t.wrap(err)
			}
			if _, err := t.exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, time.Now().UTC()); err != nil {
				return err
			}
			done = true
			return nil
		})
		if err != nil {
			return applied, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if done {
			applied = append(applied, m.Version)
		}
	}
	return applied, nil
}

// applied reports whether version is recorded in schema_migrations, read
// through q (the store, a transaction, or a migration's connection).
func (s *Store) applied(ctx context.Context, q sqlx.QueryerContext, version int) (bool, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, s.qc.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), version)
	return n > 0, s.wrap(err)
}

// defaultChainToken, in a migration's text, stands for the chain that the
// rows of a one-chain database belong to (migrations 0190–0192 make the
// chain part of every chain-derived row).
const defaultChainToken = "{{DEFAULT_CHAIN_ID}}"

// defaultChain returns the chain a one-chain database holds: the recorded
// chain identity's, else the invoices' one chain, else 0 when no row of
// the chain's tables needs one. Rows without a chain to give them are an
// error that says what to do, never a guess.
func (s *Store) defaultChain(ctx context.Context) (int64, error) {
	for _, q := range []string{`SELECT DISTINCT chain_id FROM chain_identity`, `SELECT DISTINCT chain_id FROM invoices`} {
		var ids []int64
		if err := s.sel(ctx, &ids, q+` LIMIT 2`); err != nil {
			return 0, err
		}
		switch len(ids) {
		case 1:
			return ids[0], nil
		case 2:
			return 0, fmt.Errorf("the database records more than one chain (%s): it was not a one-chain database", q)
		}
	}
	for _, table := range []string{"blocks", "transactions", "token_transfers", "reorgs", "cursors",
		"settlement_blocks", "chain_checkpoints", "chain_finalized", "sweep_txs", "wallet_nonces", "outbounds",
		"ledger_entries"} {
		var n int
		if err := s.get(ctx, &n, `SELECT COUNT(*) FROM (SELECT 1 FROM `+table+` LIMIT 1) t`); err != nil {
			return 0, err
		}
		if n > 0 {
			return 0, fmt.Errorf("table %s holds rows but the database records no chain they belong to "+
				"(no chain identity, no invoice): start the previous evmpay version once against the chain's node, "+
				"so that its indexer records the chain's identity, then upgrade", table)
		}
	}
	return 0, nil
}

// migrateNoTx applies a NoTx migration on one connection, holding a
// session advisory lock (PostgreSQL) instead of the transaction's, and
// records it once every statement succeeded. A failure part-way leaves it
// unrecorded: the next Migrate runs the file again from the top.
func (s *Store) migrateNoTx(ctx context.Context, m Migration) (bool, error) {
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return false, s.wrap(err)
	}
	defer conn.Close()
	if s.d.Name == "postgres" {
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(7042017)`); err != nil {
			return false, s.wrap(err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(7042017)`)
		defer resetSession(ctx, conn)
	}
	if done, err := s.applied(ctx, conn, m.Version); err != nil || done {
		return false, err
	}
	for _, stmt := range strings.Split(m.SQL, ";\n") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		if err := s.execNoTx(ctx, conn, stmt); err != nil {
			return false, err
		}
	}
	_, err = conn.ExecContext(ctx, s.qc.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
		m.Version, m.Name, time.Now().UTC())
	return err == nil, s.wrap(err)
}

// Lock waits of a migration's statements on PostgreSQL. An ALTER TABLE
// waits for the table's lock behind every open transaction on it, and
// every statement that asks for the table after it waits behind the ALTER:
// a long report would stall the service's writes. Each statement that
// takes such a lock (all but CREATE/DROP INDEX CONCURRENTLY, which lock
// nothing that writers need and wait for old transactions by design) gives
// up after lockWait and is tried again, lockTries times in all, with a
// growing pause that lets the queue drain.
const (
	lockWait  = 500 * time.Millisecond
	lockTries = 40
)

// execNoTx runs one statement of a NoTx migration on conn: on PostgreSQL
// under lock_timeout, retried when the lock was not granted in time
// (SQLSTATE 55P03, which Classify reports as no sentinel: matched by code).
func (s *Store) execNoTx(ctx context.Context, conn *sqlx.Conn, stmt string) error {
	if s.d.Name != "postgres" {
		_, err := conn.ExecContext(ctx, stmt)
		return s.wrap(err)
	}
	timeout := "0"
	if !strings.Contains(stripComments(stmt), "CONCURRENTLY") {
		timeout = fmt.Sprintf("%dms", lockWait.Milliseconds())
	}
	if _, err := conn.ExecContext(ctx, "SET lock_timeout = '"+timeout+"'"); err != nil {
		return s.wrap(err)
	}
	pause := 100 * time.Millisecond
	for try := 1; ; try++ {
		_, err := conn.ExecContext(ctx, stmt)
		if err == nil || !lockNotAvailable(err) || try == lockTries {
			if err != nil && lockNotAvailable(err) {
				return fmt.Errorf("gave up after %d tries of %s waiting for a table lock (a long transaction holds it: "+
					"end it, then start again; the migration resumes): %w", try, lockWait, err)
			}
			return s.wrap(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// resetSession undoes execNoTx's SET lock_timeout before conn goes back
// to the pool, where the service's statements would otherwise inherit a
// half-second limit on every lock wait. A connection that cannot be reset
// is discarded instead of returned.
func resetSession(ctx context.Context, conn *sqlx.Conn) {
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), `RESET lock_timeout`); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// lockNotAvailable reports PostgreSQL's lock_not_available (55P03), what
// lock_timeout raises.
func lockNotAvailable(err error) bool {
	var coded interface{ SQLState() string }
	return errors.As(err, &coded) && coded.SQLState() == "55P03"
}

// stripComments drops "--" comment lines.
func stripComments(sql string) string {
	var b strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// SchemaVersion returns the highest migration applied to the database. An
// error means no schema was found (an empty database) or the database did
// not answer.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.get(ctx, &v, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`); err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	return v, nil
}
