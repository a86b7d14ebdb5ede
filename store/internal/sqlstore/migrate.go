package sqlstore

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
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
	var applied []int
	for _, m := range ms {
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
			var n int
			if err := t.get(ctx, &n, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version); err != nil {
				return err
			}
			if n > 0 {
				return nil
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
	}
	var n int
	if err := conn.GetContext(ctx, &n, s.qc.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), m.Version); err != nil {
		return false, s.wrap(err)
	}
	if n > 0 {
		return false, nil
	}
	for _, stmt := range strings.Split(m.SQL, ";\n") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return false, s.wrap(err)
		}
	}
	_, err = conn.ExecContext(ctx, s.qc.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
		m.Version, m.Name, time.Now().UTC())
	return err == nil, s.wrap(err)
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
