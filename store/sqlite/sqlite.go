// Package sqlite is the embedded default store: one file, no server, no
// cgo (modernc.org/sqlite). It runs the same conformance suite as the
// PostgreSQL store.
//
// The database runs in WAL mode with a busy timeout, and every transaction
// begins IMMEDIATE (takes the write lock up front), so goroutines sharing the
// file serialise their writes instead of failing. One process should own the
// file: named locks are held in process memory.
//
//	st, err := sqlite.Open(ctx, "evmpay.db", sqlite.Config{}) // creates and migrates
//	if err != nil { … }
//	defer st.Close()
package sqlite

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Config tunes the database file.
type Config struct {
	// BusyTimeout is how long a writer waits for the write lock before
	// failing. Defaults to 10 s.
	BusyTimeout time.Duration
	// MaxOpenConns caps open connections (readers run in parallel under
	// WAL; writers take turns). Defaults to 8.
	MaxOpenConns int
}

// Store is the SQLite store. It implements store.Store: its methods are
// those of the store package's interfaces (MerchantStore, InvoiceStore,
// ChainStore, …), documented there — go doc shows them on the interfaces,
// not here, because they come from the one SQL implementation both stores
// share (store/internal/sqlstore).
type Store struct {
	*sqlstore.Store
	path string
}

var _ store.Store = (*Store)(nil)

var dialect = &sqlstore.Dialect{
	Name:     "sqlite",
	BindType: sqlx.QUESTION,
	Classify: classify,
}

// Open opens (creating if needed) the database file at path and applies the
// embedded migrations.
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	cfg.BusyTimeout = cmp.Or(cfg.BusyTimeout, 10*time.Second)
	cfg.MaxOpenConns = cmp.Or(cfg.MaxOpenConns, 8)
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	q.Set("_time_integer_format", "unix_micro")
	q.Set("_inttotime", "1")
	// A file: URI, so that the pragmas can ride along: SQLite reads its
	// path up to the first '?' or '#' and decodes %XX in it, so the path
	// is escaped as a URI path (without that, a directory named "a#1" or
	// "b?c" opened a different, shared file cut off at that character).
	db, err := sqlx.Open("sqlite", "file:"+(&url.URL{Path: abs}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	db.SetMaxOpenConns(cfg.MaxOpenConns)
	db.SetMaxIdleConns(cfg.MaxOpenConns)
	s := &Store{Store: sqlstore.New(db, dialect), path: abs}
	if err := s.Ping(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	ms, err := sqlstore.LoadMigrations(migrations, "migrations")
	if err == nil {
		_, err = s.Store.Migrate(ctx, ms, "")
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: migrate %s: %w", abs, err)
	}
	return s, nil
}

// Chain implements store.Store: a handle on the same file whose
// chain-scoped records are chain id's (a *Store).
func (s *Store) Chain(id uint64) store.Store {
	return &Store{Store: sqlstore.OnChain(s.Store, id), path: s.path}
}

// Migrate is a no-op kept for symmetry with the PostgreSQL store: Open
// already migrated.
func (s *Store) Migrate(context.Context) error { return nil }

func classify(err error) error {
	var e *sqlite3.Error
	if !errors.As(err, &e) {
		return nil
	}
	switch e.Code() {
	case sqlite3lib.SQLITE_CONSTRAINT_UNIQUE, sqlite3lib.SQLITE_CONSTRAINT_PRIMARYKEY:
		return store.ErrConflict
	case sqlite3lib.SQLITE_CONSTRAINT_CHECK, sqlite3lib.SQLITE_CONSTRAINT_TRIGGER:
		return store.ErrInvariant
	}
	switch e.Code() & 0xff {
	case sqlite3lib.SQLITE_FULL, sqlite3lib.SQLITE_IOERR, sqlite3lib.SQLITE_CANTOPEN,
		sqlite3lib.SQLITE_READONLY, sqlite3lib.SQLITE_BUSY, sqlite3lib.SQLITE_LOCKED,
		sqlite3lib.SQLITE_CORRUPT, sqlite3lib.SQLITE_NOTADB:
		return store.ErrUnavailable
	}
	return nil
}

// Named locks live in process memory, per database file.
var (
	locksMu sync.Mutex
	locks   = map[string]*memLock{}
)

// TryLock implements store.Locker within this process.
func (s *Store) TryLock(ctx context.Context, name string) (store.Lock, error) {
	name = sqlstore.LockName(s.Store, name) // the chain's, on a chain-bound handle
	key := s.path + "\x00" + name
	locksMu.Lock()
	defer locksMu.Unlock()
	if _, held := locks[key]; held {
		return nil, fmt.Errorf("%w: %s", store.ErrLocked, name)
	}
	l := &memLock{key: key, lost: make(chan struct{})}
	locks[key] = l
	return l, nil
}

type memLock struct {
	key  string
	lost chan struct{}
	once sync.Once
}

func (l *memLock) Lost() <-chan struct{} { return l.lost }

func (l *memLock) Unlock() error {
	l.once.Do(func() {
		locksMu.Lock()
		delete(locks, l.key)
		locksMu.Unlock()
	})
	return nil
}
