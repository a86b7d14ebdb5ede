// Package sqlstore is the SQL shared by store/postgres and store/sqlite.
//
// Queries are written once, with ? placeholders rebound per dialect. What
// differs between the databases (row locks, bulk insert, error codes, named
// locks) comes from the Dialect.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/evmpay/evmpay/store"
)

// Dialect is what differs between database engines.
type Dialect struct {
	// Name is "postgres" or "sqlite".
	Name string
	// BindType is sqlx.DOLLAR or sqlx.QUESTION.
	BindType int
	// ForUpdate is appended to a SELECT to lock its rows until the
	// transaction ends ("" where the engine has one writer at a time).
	ForUpdate string
	// SkipLocked is appended to a claiming SELECT so that concurrent
	// claimers skip each other's rows.
	SkipLocked string
	// Classify maps a driver error to a store sentinel (ErrConflict,
	// ErrUnavailable), or returns nil when it is none of them.
	Classify func(error) error
	// CopyIn inserts rows in bulk inside tx; nil means row-by-row inserts
	// with a prepared statement.
	CopyIn func(ctx context.Context, tx *sqlx.Tx, table string, columns []string, rows [][]any) error
	// Array turns a slice into an array parameter (nil pointers become
	// NULL elements); nil where the engine has no arrays.
	Array func(slice any) any
}

// Store implements store.Tx over an sqlx handle; Store.InTx hands out a
// transaction-bound copy.
type Store struct {
	db *sqlx.DB
	q  sqlx.ExtContext // db, or the transaction
	tx *sqlx.Tx        // set inside InTx
	d  *Dialect
	qc *queryCache
	// chain is the EIP-155 chain id that the chain-scoped methods read
	// and write (store.Store.Chain); 0 until OnChain binds one, and those
	// methods refuse.
	chain int64
}

// New returns a Store using db.
func New(db *sqlx.DB, d *Dialect) *Store {
	return &Store{db: db, q: db, d: d, qc: &queryCache{bind: d.BindType}}
}

// OnChain returns a copy of s whose chain-scoped methods read and write
// chain id's rows. The copy shares the database handle. (A function, not
// a method: sqlite.Store and postgres.Store embed *Store, and their own
// Chain is the API.)
func OnChain(s *Store, id uint64) *Store {
	c := *s
	c.chain = int64(min(id, math.MaxInt64))
	return &c
}

// ChainID returns the chain the store is bound to (0: none).
func (s *Store) ChainID() uint64 { return uint64(s.chain) }

// chainID returns the bound chain, or store.ErrNoChain.
func (s *Store) chainID() (int64, error) {
	if s.chain <= 0 {
		return 0, store.ErrNoChain
	}
	return s.chain, nil
}

// LockName is the name under which s takes a named lock (store.Locker):
// on a chain-bound handle, the chain's ("indexer@1337"), so that each
// chain's single-runner work (its indexer, settlement, sweep) has a runner
// of its own; on an unbound handle, name itself. (A function for the same
// reason as OnChain.)
func LockName(s *Store, name string) string {
	if s.chain <= 0 {
		return name
	}
	return name + "@" + strconv.FormatInt(s.chain, 10)
}

// DB returns the underlying handle.
func (s *Store) DB() *sqlx.DB { return s.db }

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return s.wrap(err)
	}
	return nil
}

// Close closes the database handle.
func (s *Store) Close() error { return s.db.Close() }

// InTx runs fn in one transaction, committing on nil and rolling back on an
// error or a panic.
func (s *Store) InTx(ctx context.Context, fn func(store.Tx) error) (err error) {
	if s.tx != nil {
		return errors.New("store: InTx called inside a transaction")
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return s.wrap(err)
	}
	inner := &Store{db: s.db, q: tx, tx: tx, d: s.d, qc: s.qc, chain: s.chain}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
	}()
	if err := fn(inner); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return s.wrap(err)
	}
	return nil
}

// withTx runs fn in the current transaction, or in a new one when s is not
// inside one (for methods that need several statements to be atomic).
func (s *Store) withTx(ctx context.Context, fn func(*Store) error) error {
	if s.tx != nil {
		return fn(s)
	}
	return s.InTx(ctx, func(t store.Tx) error { return fn(t.(*Store)) })
}

// wrap classifies a driver error: sql.ErrNoRows becomes store.ErrNotFound,
// unique violations store.ErrConflict, lost connections store.ErrUnavailable.
func (s *Store) wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if sentinel := s.d.Classify(err); sentinel != nil {
		return fmt.Errorf("%w: %v", sentinel, err)
	}
	return err
}

func (s *Store) get(ctx context.Context, dest any, q string, args ...any) error {
	return s.wrap(sqlx.GetContext(ctx, s.q, dest, s.qc.rebind(q), args...))
}

func (s *Store) sel(ctx context.Context, dest any, q string, args ...any) error {
	return s.wrap(sqlx.SelectContext(ctx, s.q, dest, s.qc.rebind(q), args...))
}

func (s *Store) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	res, err := s.q.ExecContext(ctx, s.qc.rebind(q), args...)
	return res, s.wrap(err)
}

// namedGet runs a query with :name parameters bound from arg's db tags and
// scans one row into dest.
func (s *Store) namedGet(ctx context.Context, dest any, q string, arg any) error {
	nq, args, err := sqlx.Named(q, arg)
	if err != nil {
		return err
	}
	return s.get(ctx, dest, nq, args...)
}

func (s *Store) namedExec(ctx context.Context, q string, arg any) (sql.Result, error) {
	nq, args, err := sqlx.Named(q, arg)
	if err != nil {
		return nil, err
	}
	return s.exec(ctx, nq, args...)
}

// selIn expands slice arguments of a query with IN (?) and selects.
func (s *Store) selIn(ctx context.Context, dest any, q string, args ...any) error {
	eq, eargs, err := sqlx.In(q, args...)
	if err != nil {
		return err
	}
	return s.wrap(sqlx.SelectContext(ctx, s.q, dest, sqlx.Rebind(s.d.BindType, eq), eargs...))
}

// selIDs is selIn for a query whose one "IN (?)" matches ids: on
// PostgreSQL it runs as "= ANY(?)" with one array parameter through a
// prepared statement (one text whatever the number of ids, parsed and
// planned once per connection); elsewhere the list is expanded.
func (s *Store) selIDs(ctx context.Context, dest any, q string, ids []int64) error {
	if s.d.Array == nil {
		return s.selIn(ctx, dest, q, ids)
	}
	return s.selPrepared(ctx, dest, anyIDs(q), s.d.Array(ids))
}

// anyIDs rewrites q's "IN (?)" to "= ANY(?::bigint[])", once per text.
func anyIDs(q string) string {
	if v, ok := anyIDsCache.Load(q); ok {
		return v.(string)
	}
	r := strings.Replace(q, " IN (?)", " = ANY(?::bigint[])", 1)
	anyIDsCache.Store(q, r)
	return r
}

var anyIDsCache sync.Map // string → string

func (s *Store) execIn(ctx context.Context, q string, args ...any) (sql.Result, error) {
	eq, eargs, err := sqlx.In(q, args...)
	if err != nil {
		return nil, err
	}
	res, err := s.q.ExecContext(ctx, sqlx.Rebind(s.d.BindType, eq), eargs...)
	return res, s.wrap(err)
}

// queryCache remembers rebound queries: the text is static, so each is
// rebound once.
type queryCache struct {
	bind int
	m    sync.Map // string → string
}

func (c *queryCache) rebind(q string) string {
	if c.bind == sqlx.QUESTION {
		return q
	}
	if v, ok := c.m.Load(q); ok {
		return v.(string)
	}
	r := sqlx.Rebind(c.bind, q)
	c.m.Store(q, r)
	return r
}

// limit returns n, or def when n is not positive, capped at max.
func limit(n, def, max int) int {
	if n <= 0 {
		return def
	}
	if n > max {
		return max
	}
	return n
}

// mustAffect turns "no row updated" into ErrNotFound.
func mustAffect(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// Prepared statements, for hot-path queries (the invoice API's: authenticate,
// take the key, take an index, insert the invoice, complete the key).
//
// PostgreSQL parses and plans every unnamed statement lib/pq sends, and lib/pq
// spends an extra round trip describing it; a statement prepared once per
// connection skips both, which doubles what the database sustains for
// invoice creation. A statement is prepared on the pool in the background on
// its first use (so that a transaction never waits for a second connection
// while holding one), the calls before that run unprepared, and inside a
// transaction the prepared statement is bound to the transaction's
// connection. The statements live in the Store's query cache under their
// own key type, so they go away with the Store. Only a bounded set of query
// texts belongs here: each distinct text is prepared once per connection.

type preparedKey string

type namedPreparedKey string

// preparing marks a statement whose preparation is under way.
type preparing struct{}

const prepareTimeout = 30 * time.Second

// preparedStmt returns q prepared (bound to the transaction when s is in
// one), or nil when it is not prepared yet.
func (s *Store) preparedStmt(ctx context.Context, q string) *sqlx.Stmt {
	v, ok := s.qc.m.Load(preparedKey(q))
	if st, ready := v.(*sqlx.Stmt); ready {
		if s.tx != nil {
			return s.tx.StmtxContext(ctx, st)
		}
		return st
	}
	if !ok {
		if _, loaded := s.qc.m.LoadOrStore(preparedKey(q), preparing{}); !loaded {
			go s.prepare(preparedKey(q), func(ctx context.Context) (any, error) {
				return s.db.PreparexContext(ctx, s.qc.rebind(q))
			})
		}
	}
	return nil
}

func (s *Store) namedPreparedStmt(ctx context.Context, q string) *sqlx.NamedStmt {
	v, ok := s.qc.m.Load(namedPreparedKey(q))
	if st, ready := v.(*sqlx.NamedStmt); ready {
		if s.tx != nil {
			return s.tx.NamedStmtContext(ctx, st)
		}
		return st
	}
	if !ok {
		if _, loaded := s.qc.m.LoadOrStore(namedPreparedKey(q), preparing{}); !loaded {
			go s.prepare(namedPreparedKey(q), func(ctx context.Context) (any, error) {
				return s.db.PrepareNamedContext(ctx, q)
			})
		}
	}
	return nil
}

// prepare runs in the background; on failure the key is forgotten, so the
// next use tries again.
func (s *Store) prepare(key any, fn func(context.Context) (any, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), prepareTimeout)
	defer cancel()
	st, err := fn(ctx)
	if err != nil {
		s.qc.m.Delete(key)
		return
	}
	s.qc.m.Store(key, st)
}

// getPrepared is get through a prepared statement when there is one.
func (s *Store) getPrepared(ctx context.Context, dest any, q string, args ...any) error {
	if st := s.preparedStmt(ctx, q); st != nil {
		return s.wrap(st.GetContext(ctx, dest, args...))
	}
	return s.get(ctx, dest, q, args...)
}

// selPrepared is sel through a prepared statement when there is one.
func (s *Store) selPrepared(ctx context.Context, dest any, q string, args ...any) error {
	if st := s.preparedStmt(ctx, q); st != nil {
		return s.wrap(st.SelectContext(ctx, dest, args...))
	}
	return s.sel(ctx, dest, q, args...)
}

// execPrepared is exec through a prepared statement when there is one.
func (s *Store) execPrepared(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := s.preparedStmt(ctx, q); st != nil {
		res, err := st.ExecContext(ctx, args...)
		return res, s.wrap(err)
	}
	return s.exec(ctx, q, args...)
}

// namedGetPrepared is namedGet through a prepared statement when there is
// one.
func (s *Store) namedGetPrepared(ctx context.Context, dest any, q string, arg any) error {
	if st := s.namedPreparedStmt(ctx, q); st != nil {
		return s.wrap(st.GetContext(ctx, dest, arg))
	}
	return s.namedGet(ctx, dest, q, arg)
}
