package settlement

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evmpay/evmpay/store"
)

// LockName is the named lock (store.Locker) a Settler holds while it
// advances the settlement cursor.
const LockName = "settlement"

// Store is what a Settler needs from the shared database. store.Store
// (store/postgres, store/sqlite) satisfies it.
type Store interface {
	// InTx runs fn in one database transaction.
	InTx(ctx context.Context, fn func(tx store.Tx) error) error
	store.Locker
	LatestBlock(ctx context.Context) (store.Block, error)
	GetBlock(ctx context.Context, number uint64) (store.Block, error)
	EarliestBlock(ctx context.Context) (store.Block, error)
	ListBlockHashes(ctx context.Context, from, to uint64) (map[uint64]common.Hash, error)
	// FinalizedBlock is the finalized block the indexer recorded, read
	// under finality "tag".
	FinalizedBlock(ctx context.Context) (number uint64, ok bool, err error)
	GetCursor(ctx context.Context, name string) (store.Cursor, error)
	ListSettledBlockHashes(ctx context.Context, from, to uint64) (map[uint64]common.Hash, error)
	ListConfirmable(ctx context.Context, maxBlock uint64, limit int) ([]int64, error)
	ListConfirmableSince(ctx context.Context, after, maxBlock uint64, limit int) ([]int64, error)
	ListExpiring(ctx context.Context, now time.Time, limit int) ([]store.Invoice, error)
}

var _ Store = store.Store(nil)

// Valuer tells what an amount of an asset is worth now in a currency,
// rounded down to its minor unit (invoice/pricing's Pricer.CurrentValue).
type Valuer interface {
	CurrentValue(ctx context.Context, asset store.Asset, amount store.Amount, currency string) (store.Fiat, error)
}

// Config tunes a Settler. The zero value is usable: every field documents
// its default.
type Config struct {
	// Confirmations is how many blocks must be built on top of a payment's
	// block before it counts as confirmed: a payment in block b is
	// confirmed when the highest indexed block h has h − b ≥
	// Confirmations. Defaults to 12 (none under FinalityInstant and
	// FinalityTag, which refuse a count).
	Confirmations int
	// Finality is the chain's finality mode: store.FinalityDepth
	// (Confirmations), store.FinalityInstant (a payment is confirmed once
	// its block is indexed) or store.FinalityTag (a payment is confirmed
	// once its block is at or below the finalized block the indexer
	// recorded, store.FinalityStore; none while none is recorded: the
	// indexer must run with the same Finality). Defaults to
	// store.FinalityDepth.
	Finality string
	// PollInterval is how often the database is asked for new indexed
	// blocks once settlement has caught up. Defaults to 1.5 s.
	PollInterval time.Duration
	// LateWindow is how long after its expiry an EXPIRED invoice still
	// takes payments the normal way (PAID with paid_late, then CONFIRMED
	// and swept). A payment after the window is still recorded, but only
	// flags the invoice for an operator (needs_attention, event
	// invoice.late_payment). Defaults to 24 h.
	LateWindow time.Duration
	// MaxReorgDepth is the deepest reorg settlement can undo: it keeps the
	// hashes of that many processed blocks to find the common ancestor.
	// Keep it at least the indexer's own limit. Defaults to 256.
	MaxReorgDepth int
	// BatchSize caps how many invoices one database transaction of the
	// confirmation or expiry pass changes. Defaults to 200.
	BatchSize int
	// RetryMin and RetryMax bound the wait after a database failure: it
	// starts at RetryMin, doubles up to RetryMax and resets after a
	// success. Defaults to 250 ms and 30 s.
	RetryMin, RetryMax time.Duration
	// LockRetryInterval is how often a Settler that finds the settlement
	// lock held by another process tries to take it. Defaults to 5 s.
	LockRetryInterval time.Duration
	// Assets are the assets payments may arrive in (the native coin and
	// the configured tokens): an invoice.wrong_asset event names the asset
	// that arrived by its symbol and formats the amount with its decimals.
	// A token not listed is named by its address alone. Defaults to none.
	Assets []store.Asset
	// Valuer values money that arrives at an invoice priced in a fiat
	// currency after its late window at the rates of the moment, beside
	// its locked quotes (the invoice's late_valuation, docs/pricing.md).
	// *pricing.Pricer satisfies it. Defaults to nil: only the locked
	// valuation is recorded.
	Valuer Valuer
	// Registerer receives the Prometheus collectors: processed block, lag,
	// payments matched, invoice transitions, events, reorgs. Defaults to a
	// new private registry, available from Settler.Gatherer.
	Registerer prometheus.Registerer
	// Logger receives one progress line per processed block (debug), reorgs
	// and retried failures (warn), transitions (debug). Defaults to a
	// logger that discards everything.
	Logger *slog.Logger
	// Now is the clock for expiry, the late window and timestamps.
	// Defaults to time.Now.
	Now func() time.Time

	// afterStep, when set (tests only), runs after each named step of the
	// work; an error from it aborts the work there as a crash would: the
	// open database transaction rolls back and Run returns the error.
	afterStep func(step string) error
}

const (
	defaultConfirmations = 12
	defaultPollInterval  = 1500 * time.Millisecond
	defaultLateWindow    = 24 * time.Hour
	defaultMaxReorgDepth = 256
	defaultBatchSize     = 200
	defaultRetryMin      = 250 * time.Millisecond
	defaultRetryMax      = 30 * time.Second
	defaultLockRetry     = 5 * time.Second
)

func (c Config) withDefaults() Config {
	if store.FinalityCountsConfirmations(c.Finality) {
		c.Confirmations = cmp.Or(c.Confirmations, defaultConfirmations)
	}
	c.PollInterval = cmp.Or(c.PollInterval, defaultPollInterval)
	c.LateWindow = cmp.Or(c.LateWindow, defaultLateWindow)
	c.MaxReorgDepth = cmp.Or(c.MaxReorgDepth, defaultMaxReorgDepth)
	c.BatchSize = cmp.Or(c.BatchSize, defaultBatchSize)
	c.RetryMin = cmp.Or(c.RetryMin, defaultRetryMin)
	c.RetryMax = cmp.Or(c.RetryMax, defaultRetryMax)
	c.LockRetryInterval = cmp.Or(c.LockRetryInterval, defaultLockRetry)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	if err := store.CheckFinality(c.Finality, c.Confirmations); err != nil {
		return fmt.Errorf("settlement: %w", err)
	}
	switch {
	case c.Confirmations < 0:
		return errors.New("settlement: Confirmations must not be negative")
	case c.PollInterval < 0 || c.LockRetryInterval < 0:
		return errors.New("settlement: intervals must not be negative")
	case c.LateWindow < 0:
		return errors.New("settlement: LateWindow must not be negative")
	case c.MaxReorgDepth < 0:
		return errors.New("settlement: MaxReorgDepth must not be negative")
	case c.BatchSize < 0 || c.BatchSize > 10000:
		return errors.New("settlement: BatchSize must be within 1..10000")
	case c.RetryMin < 0 || c.RetryMax < 0:
		return errors.New("settlement: RetryMin and RetryMax must not be negative")
	case c.RetryMin > c.RetryMax:
		return errors.New("settlement: RetryMin must not exceed RetryMax")
	}
	return nil
}

// Settler follows the indexed chain from its own cursor and turns
// transactions to deposit addresses into payments and invoice transitions.
type Settler struct {
	st       Store
	cfg      Config
	log      *slog.Logger
	m        *metrics
	gatherer prometheus.Gatherer

	// confirmed is 1 + the maxBlock of the last confirmation pass that
	// confirmed every candidate, 0 when unknown; passes counts passes.
	// See confirmPass.
	confirmed, passes atomic.Uint64

	// last is the settlement cursor the last round ended at, when
	// lastKnown (see cursor). Only the sync goroutine touches them.
	last      *store.Cursor
	lastKnown bool

	// deposits is the Bloom filter of deposit addresses (deposits.go);
	// depositsReady whether the last block could use it. Only the sync
	// goroutine touches them.
	deposits      *depositFilter
	depositsReady bool
}

// New returns a Settler reading and writing st. It checks cfg and
// registers the metrics; it does not touch the database.
func New(st Store, cfg Config) (*Settler, error) {
	if st == nil {
		return nil, errors.New("settlement: nil store")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Settler{st: st, cfg: cfg, log: cfg.Logger, deposits: newDepositFilter(0)}
	reg := cfg.Registerer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg, s.gatherer = r, r
	} else if g, ok := reg.(prometheus.Gatherer); ok {
		s.gatherer = g
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("settlement: register metrics: %w", err)
	}
	s.m = m
	return s, nil
}

// Gatherer returns the registry holding the Settler's metrics when it
// created its own (Config.Registerer unset) or was given one that also
// gathers; nil otherwise.
func (s *Settler) Gatherer() prometheus.Gatherer { return s.gatherer }

// errLockLost stops the locked work when the lock's session died.
var errLockLost = errors.New("settlement: lock lost")

// errCrash wraps an error injected by Config.afterStep.
type errCrash struct{ err error }

func (e errCrash) Error() string { return "settlement: injected failure: " + e.err.Error() }
func (e errCrash) Unwrap() error { return e.err }

func (s *Settler) step(name string) error {
	if s.cfg.afterStep == nil {
		return nil
	}
	if err := s.cfg.afterStep(name); err != nil {
		return errCrash{err}
	}
	return nil
}

func isCrash(err error) bool {
	var c errCrash
	return errors.As(err, &c)
}

// Run settles until ctx is cancelled, then returns nil after finishing the
// block or batch in flight. Several Settlers may run against one database:
// the one holding the settlement lock advances the cursor, the others wait
// and take over when it stops or its database session dies. Database
// failures are logged and retried with backoff.
func (s *Settler) Run(ctx context.Context) error {
	for {
		lock, err := s.st.TryLock(ctx, LockName)
		switch {
		case err == nil:
			s.log.InfoContext(ctx, "settlement: lock acquired")
			s.forget() // another process may have settled meanwhile
			err = s.runLocked(ctx, lock)
			_ = lock.Unlock()
			if ctx.Err() != nil {
				return nil
			}
			if isCrash(err) {
				return err
			}
			s.log.WarnContext(ctx, "settlement: lock lost; trying to take it again", slog.Any("error", err))
			if !sleep(ctx, s.cfg.RetryMin) {
				return nil
			}
		case errors.Is(err, store.ErrLocked):
			if !sleep(ctx, s.cfg.LockRetryInterval) {
				return nil
			}
		default:
			if ctx.Err() != nil {
				return nil
			}
			s.log.WarnContext(ctx, "settlement: cannot take the lock", slog.Any("error", err))
			if !sleep(ctx, s.cfg.RetryMin) {
				return nil
			}
		}
	}
}

// runLocked settles while the lock is held; it returns errLockLost when
// the lock is lost, and nil when ctx is cancelled.
func (s *Settler) runLocked(ctx context.Context, lock store.Lock) error {
	backoff := s.cfg.RetryMin
	for {
		err := s.sync(ctx, lock.Lost())
		wait := s.cfg.PollInterval
		switch {
		case err == nil:
			backoff = s.cfg.RetryMin
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errLockLost), isCrash(err):
			return err
		default:
			s.m.errors.Inc()
			s.log.WarnContext(ctx, "settlement: failed; retrying", slog.Any("error", err),
				slog.Duration("retry_in", backoff))
			wait = backoff
			backoff = min(2*backoff, s.cfg.RetryMax)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-lock.Lost():
			t.Stop()
			return errLockLost
		case <-t.C:
		}
	}
}

// Sync settles once: it processes every indexed block not yet processed,
// then confirms the PAID invoices deep enough and expires the overdue
// PENDING ones. It takes the settlement lock for its duration and returns
// an error wrapping store.ErrLocked when another process holds it. Run
// calls the same work every PollInterval; Sync is for hosts that schedule
// it themselves, and for tests.
func (s *Settler) Sync(ctx context.Context) error {
	lock, err := s.st.TryLock(ctx, LockName)
	if err != nil {
		return fmt.Errorf("settlement: %w", err)
	}
	defer lock.Unlock()
	s.forget()
	return s.sync(ctx, lock.Lost())
}

// forget drops what the Settler remembers of its last rounds, for a lock
// just taken: another process may have settled meanwhile.
func (s *Settler) forget() {
	s.confirmed.Store(0)
	s.lastKnown = false
}

// sleep waits d or until ctx is done; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
