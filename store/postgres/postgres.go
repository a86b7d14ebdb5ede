// Package postgres is the production store: PostgreSQL through sqlx and
// lib/pq, with the schema as embedded, numbered migrations.
//
// Several processes may share one database: work rows are claimed with
// FOR UPDATE SKIP LOCKED, bulk inserts use COPY, and single-runner work
// (the indexer, settlement's cursor) takes session advisory locks.
//
//	st, err := postgres.Open(ctx, "postgres://evmpay@localhost/evmpay?sslmode=disable", postgres.Config{})
//	if err != nil { … }
//	defer st.Close()
//	if err := st.Migrate(ctx); err != nil { … }
package postgres

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"database/sql/driver"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Config tunes the connection pool.
type Config struct {
	// MaxOpenConns caps open connections. Defaults to 20.
	MaxOpenConns int
	// MaxIdleConns caps idle connections kept for reuse. Defaults to
	// MaxOpenConns.
	MaxIdleConns int
	// ConnMaxLifetime recycles connections. Defaults to 30 minutes.
	ConnMaxLifetime time.Duration
	// LockCheckInterval is how often a held advisory lock checks that its
	// session is alive (a ping, which times out after the interval or
	// lockPingTimeout, whichever is longer). Defaults to 2 s.
	LockCheckInterval time.Duration
}

// Store is the PostgreSQL store. It implements store.Store: its methods are
// those of the store package's interfaces (MerchantStore, InvoiceStore,
// ChainStore, …), documented there — go doc shows them on the interfaces,
// not here, because they come from the one SQL implementation both stores
// share (store/internal/sqlstore).
type Store struct {
	*sqlstore.Store
	cfg Config
}

var _ store.Store = (*Store)(nil)

var dialect = &sqlstore.Dialect{
	Name:       "postgres",
	BindType:   sqlx.DOLLAR,
	ForUpdate:  " FOR UPDATE",
	SkipLocked: " FOR UPDATE SKIP LOCKED",
	Classify:   classify,
	CopyIn:     copyIn,
	Array:      func(slice any) any { return pq.Array(slice) },
}

// Open connects to the database at url (a postgres:// URL or a key=value
// DSN) and checks that it answers. It does not migrate: call Migrate.
func Open(ctx context.Context, url string, cfg Config) (*Store, error) {
	cfg.MaxOpenConns = cmp.Or(cfg.MaxOpenConns, 20)
	cfg.MaxIdleConns = cmp.Or(cfg.MaxIdleConns, cfg.MaxOpenConns)
	cfg.ConnMaxLifetime = cmp.Or(cfg.ConnMaxLifetime, 30*time.Minute)
	cfg.LockCheckInterval = cmp.Or(cfg.LockCheckInterval, 2*time.Second)
	db, err := sqlx.Open("postgres", withUTC(url))
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	db.SetMaxOpenConns(cfg.MaxOpenConns)
	db.SetMaxIdleConns(cfg.MaxIdleConns)
	db.SetConnMaxLifetime(cfg.ConnMaxLifetime)
	s := &Store{Store: sqlstore.New(db, dialect), cfg: cfg}
	if err := s.Ping(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: cannot reach the database (is it running, and is DATABASE_URL right?): %w", err)
	}
	return s, nil
}

// Chain implements store.Store: a handle on the same pool whose
// chain-scoped records are chain id's (a *Store).
func (s *Store) Chain(id uint64) store.Store {
	return &Store{Store: sqlstore.OnChain(s.Store, id), cfg: s.cfg}
}

// withUTC makes the session time zone UTC so that times read back are UTC.
func withUTC(url string) string {
	if strings.Contains(url, "timezone=") {
		return url
	}
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		if strings.Contains(url, "?") {
			return url + "&timezone=UTC"
		}
		return url + "?timezone=UTC"
	}
	return url + " timezone=UTC"
}

// Migrate applies the embedded migrations that the database lacks. Several
// processes may call it at once: an advisory lock serialises them. Each
// file runs in a transaction, except one whose first line is
// "-- evmpay:no-transaction" (CREATE INDEX CONCURRENTLY on a big table):
// see docs/scale.md, "Migrations on big tables".
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := sqlstore.LoadMigrations(migrations, "migrations")
	if err != nil {
		return err
	}
	_, err = s.Store.Migrate(ctx, ms, `SELECT pg_advisory_xact_lock(7042017)`)
	return err
}

// MigrateTo applies the embedded migrations up to and including version,
// for a staged upgrade (and the tests of one migration: a database left
// at the version before it, with rows, then Migrate).
func (s *Store) MigrateTo(ctx context.Context, version int) error {
	ms, err := sqlstore.LoadMigrations(migrations, "migrations")
	if err != nil {
		return err
	}
	n := 0
	for n < len(ms) && ms[n].Version <= version {
		n++
	}
	_, err = s.Store.Migrate(ctx, ms[:n], `SELECT pg_advisory_xact_lock(7042017)`)
	return err
}

func classify(err error) error {
	if e := pq.As(err, pqerror.UniqueViolation); e != nil {
		return store.ErrConflict
	}
	if e := pq.As(err, pqerror.CheckViolation); e != nil {
		return store.ErrInvariant
	}
	if e := pq.As(err); e != nil {
		switch {
		case e.Code.Class() == pqerror.ClassConnectionException,
			e.Code.Class() == pqerror.ClassInsufficientResources,
			e.Code == pqerror.AdminShutdown, e.Code == pqerror.CannotConnectNow,
			e.Code == pqerror.ReadOnlySQLTransaction:
			return store.ErrUnavailable
		}
		return nil
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) {
		return store.ErrUnavailable
	}
	return nil
}

func copyIn(ctx context.Context, tx *sqlx.Tx, table string, columns []string, rows [][]any) error {
	stmt, err := tx.PrepareContext(ctx, pq.CopyIn(table, columns...))
	if err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := stmt.ExecContext(ctx, r...); err != nil {
			stmt.Close()
			return err
		}
	}
	if _, err := stmt.ExecContext(ctx); err != nil {
		stmt.Close()
		return err
	}
	return stmt.Close()
}

// TryLock implements store.Locker with a session advisory lock held on a
// dedicated connection. The lock is lost when that session dies.
func (s *Store) TryLock(ctx context.Context, name string) (store.Lock, error) {
	conn, err := s.DB().Connx(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	name = sqlstore.LockName(s.Store, name) // the chain's, on a chain-bound handle
	key := lockKey(name)
	var ok bool
	if err := conn.GetContext(ctx, &ok, `SELECT pg_try_advisory_lock($1)`, key); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("%w: %s", store.ErrLocked, name)
	}
	l := &advisoryLock{conn: conn, key: key, lost: make(chan struct{}), stop: make(chan struct{})}
	l.done.Add(1)
	go l.watch(s.cfg.LockCheckInterval)
	return l, nil
}

func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("evmpay:" + name))
	return int64(h.Sum64())
}

type advisoryLock struct {
	conn     *sqlx.Conn
	key      int64
	lost     chan struct{}
	stop     chan struct{}
	once     sync.Once
	lostOnce sync.Once
	done     sync.WaitGroup
}

func (l *advisoryLock) watch(every time.Duration) {
	defer l.done.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			// A dead session fails the ping at once; the timeout is for a
			// hung one, and is not shorter than a loaded server's slow
			// answer (a ping of 50 ms timed out on a busy test machine
			// and dropped a lock that was still held).
			ctx, cancel := context.WithTimeout(context.Background(), max(every, lockPingTimeout))
			err := l.conn.PingContext(ctx)
			cancel()
			if err != nil {
				l.lostOnce.Do(func() { close(l.lost) })
				return
			}
		}
	}
}

// lockPingTimeout is the shortest time a held lock's session may take to
// answer its check before the lock counts as lost.
const lockPingTimeout = time.Second

func (l *advisoryLock) Lost() <-chan struct{} { return l.lost }

func (l *advisoryLock) Unlock() error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		l.done.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err = l.conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, l.key); err != nil {
			// Discard the session instead of returning it to the pool:
			// its end releases the lock.
			_ = l.conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		err = errors.Join(err, l.conn.Close())
	})
	return err
}
