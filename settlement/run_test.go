package settlement

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

const eventually = 20 * time.Second

func openPG(t *testing.T, url string) *postgres.Store {
	st, err := postgres.Open(ctx, url, postgres.Config{MaxOpenConns: 5, LockCheckInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st.Chain(pgtest.ChainID).(*postgres.Store)
}

// runSettler runs s until the returned stop is called; stop returns Run's
// error.
func runSettler(t *testing.T, s *Settler) (stop func() error) {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func processedBlocks(t *testing.T, logs *logBuffer) []uint64 {
	var out []uint64
	for _, l := range logs.lines(t) {
		if l["msg"] == "settlement: block processed" {
			out = append(out, uint64(l["block"].(float64)))
		}
	}
	return out
}

func TestRun_PaysInvoicesAndStopsOnCancel(t *testing.T) {
	f := newFixture(t, pgStore(t))
	inv := f.invoice(eth(1000))
	s := f.settler()
	stop := runSettler(t, s)
	f.mine()
	f.mine(pay(inv.DepositAddress, eth(1000)))
	require.Eventually(t, func() bool { return f.get(inv.ID).Status == store.StatusPaid }, eventually, 5*time.Millisecond)
	f.mineN(12)
	require.Eventually(t, func() bool { return f.get(inv.ID).Status == store.StatusConfirmed }, eventually, 5*time.Millisecond)
	require.NoError(t, stop(), "Run returns nil when cancelled")

	// The lock was released: another Settler can take it at once.
	require.NoError(t, f.settler().Sync(ctx))
}

// One progress line per processed block, at DEBUG: at INFO a block a
// second would bury everything else an operator reads (the banner of
// `payd dev` scrolled away); the metrics carry the progress.
func TestRun_ProgressLog_OneDebugLinePerBlock(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	inv := f.invoice(eth(1000))
	var logs logBuffer
	s := f.settler(func(c *Config) { c.Logger = jsonLogger(&logs) })
	f.mine()
	f.mine(pay(inv.DepositAddress, eth(400)), pay(inv.DepositAddress, eth(100)))
	f.mineN(3)
	f.sync(s)
	f.sync(s) // nothing new: no line
	var lines []map[string]any
	for _, l := range logs.lines(t) {
		if l["msg"] == "settlement: block processed" {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 5, "one line per block")
	for i, l := range lines {
		require.EqualValues(t, i, l["block"])
		require.EqualValues(t, 4-i, l["lag"], "lag behind the indexed head")
		require.Equal(t, "DEBUG", l["level"])
		require.NotEmpty(t, l["block_hash"])
	}
	require.EqualValues(t, 0, lines[0]["payments"])
	require.EqualValues(t, 2, lines[1]["payments"])

	// At INFO, nothing per block.
	var info logBuffer
	s = f.settler(func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&info, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	f.mineN(3)
	f.sync(s)
	for _, l := range info.lines(t) {
		require.NotEqual(t, "settlement: block processed", l["msg"])
	}
}

func TestRun_Metrics(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	inv := f.invoice(eth(1000))
	reg := prometheus.NewRegistry()
	s := f.settler(func(c *Config) { c.Registerer = reg })
	require.Equal(t, prometheus.Gatherer(reg), s.Gatherer())
	f.mine(pay(inv.DepositAddress, eth(1000)))
	f.mineN(14)
	f.sync(s)
	require.EqualValues(t, 1, metricValue(t, s.m.payments))
	require.EqualValues(t, 14, metricValue(t, s.m.processed))
	require.EqualValues(t, 0, metricValue(t, s.m.lag))
	require.EqualValues(t, 1, metricValue(t, s.m.transitions.WithLabelValues(store.StatusPending, store.StatusPaid)))
	require.EqualValues(t, 1, metricValue(t, s.m.transitions.WithLabelValues(store.StatusPaid, store.StatusConfirmed)))
	require.EqualValues(t, 1, metricValue(t, s.m.events.WithLabelValues(store.EventInvoiceConfirmed)))
	families, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range families {
		names[mf.GetName()] = true
	}
	require.True(t, names["settlement_block_seconds"])
	require.True(t, names["settlement_lag_blocks"])

	_, err = New(f.st, Config{Registerer: reg})
	require.Error(t, err, "registering twice fails at New")
}

// Two Settlers (two connection pools, as two processes) on one PostgreSQL
// database: one advances the cursor, the other waits, then takes over.
func TestRun_TwoSettlersOnOneDatabase_OneAdvancesOtherTakesOver(t *testing.T) {
	url := pgtest.URL(t)
	st1, st2 := openPG(t, url), openPG(t, url)
	f := newFixture(t, st1)
	invs := make([]store.Invoice, 6)
	for i := range invs {
		invs[i] = f.invoice(eth(1000))
	}
	var logs1, logs2 logBuffer
	cfg := func(logs *logBuffer) Config {
		return Config{Now: f.clock.Now, PollInterval: 5 * time.Millisecond, LockRetryInterval: 5 * time.Millisecond,
			RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond, Logger: jsonLogger(logs)}
	}
	s1, err := New(st1, cfg(&logs1))
	require.NoError(t, err)
	s2, err := New(st2, cfg(&logs2))
	require.NoError(t, err)
	stop1 := runSettler(t, s1)
	stop2 := runSettler(t, s2) // started second, but either may win the lock

	for _, inv := range invs[:3] {
		f.mine(pay(inv.DepositAddress, eth(1000)))
	}
	require.Eventually(t, func() bool {
		for _, inv := range invs[:3] {
			if f.get(inv.ID).Status != store.StatusPaid {
				return false
			}
		}
		return true
	}, eventually, 5*time.Millisecond)
	b1, b2 := processedBlocks(t, &logs1), processedBlocks(t, &logs2)
	require.True(t, len(b1) == 0 || len(b2) == 0, "only the lock holder processes blocks: %v / %v", b1, b2)

	// The holder stops; the other takes over.
	holder, stopHolder, otherLogs := &logs1, stop1, &logs2
	if len(b1) == 0 {
		holder, stopHolder, otherLogs = &logs2, stop2, &logs1
	}
	_ = holder
	require.NoError(t, stopHolder())
	for _, inv := range invs[3:] {
		f.mine(pay(inv.DepositAddress, eth(1000)))
	}
	require.Eventually(t, func() bool {
		for _, inv := range invs {
			if f.get(inv.ID).Status != store.StatusPaid {
				return false
			}
		}
		return true
	}, eventually, 5*time.Millisecond)
	require.NotEmpty(t, processedBlocks(t, otherLogs), "the waiting settler took over")

	for _, inv := range invs {
		require.Len(t, f.payments(inv.ID), 1)
		require.Equal(t, []string{store.EventInvoicePaid}, f.events(inv.ID))
	}
	require.Equal(t, f.head.Hash, f.cursor().BlockHash)
}

// Even without the lock (a bug, or a lock wrongly believed held), the
// cursor's compare-and-set lets only one writer settle a block.
func TestSync_WithoutTheLock_CursorCompareAndSetKeepsOneWriter(t *testing.T) {
	url := pgtest.URL(t)
	st1, st2 := openPG(t, url), openPG(t, url)
	f := newFixture(t, st1)
	invs := make([]store.Invoice, 20)
	for i := range invs {
		invs[i] = f.invoice(eth(1000))
	}
	f.mine()
	for i, inv := range invs {
		if i%2 == 0 {
			f.mine(pay(inv.DepositAddress, eth(400)), pay(inv.DepositAddress, eth(600)))
		} else {
			f.mine(pay(inv.DepositAddress, eth(1000)))
		}
	}
	s1, s2 := f.settler(), func() *Settler {
		s, err := New(st2, Config{Now: f.clock.Now})
		require.NoError(t, err)
		return s
	}()
	var wg sync.WaitGroup
	conflicts := make(chan error, 200)
	for _, s := range []*Settler{s1, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				if err := s.sync(ctx, nil); err != nil {
					conflicts <- err
				}
			}
		}()
	}
	wg.Wait()
	close(conflicts)
	t.Logf("%d rounds lost a race", len(conflicts))
	for err := range conflicts {
		require.ErrorIs(t, err, store.ErrConflict, "the loser of a race sees a conflict, nothing else")
	}
	require.NoError(t, s1.sync(ctx, nil))
	for i, inv := range invs {
		switch f.get(inv.ID).Status {
		case store.StatusPaid:
			require.Equal(t, []string{store.EventInvoicePaid}, f.events(inv.ID), "one event per transition")
		case store.StatusConfirmed:
			require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed}, f.events(inv.ID),
				"one event per transition")
		default:
			t.Fatalf("invoice %d: %s", inv.ID, f.get(inv.ID).Status)
		}
		require.Len(t, f.payments(inv.ID), 2-i%2)
	}
	require.Equal(t, f.head.Number, f.cursor().BlockNumber)
}

func TestSync_LockHeldElsewhere_ErrLocked(t *testing.T) {
	f := newFixture(t, pgStore(t))
	l, err := f.st.TryLock(ctx, LockName)
	require.NoError(t, err)
	defer l.Unlock()
	require.ErrorIs(t, f.settler().Sync(ctx), store.ErrLocked)
}

// When the database session holding the lock dies, the Settler stops
// settling and takes the lock again.
func TestRun_LockLost_Reacquired(t *testing.T) {
	url := pgtest.URL(t)
	st := openPG(t, url)
	f := newFixture(t, st)
	inv := f.invoice(eth(1000))
	var logs logBuffer
	s := f.settler(func(c *Config) { c.Logger = jsonLogger(&logs) })
	runSettler(t, s)
	f.mine()
	require.Eventually(t, func() bool { return len(processedBlocks(t, &logs)) == 1 }, eventually, 5*time.Millisecond)

	// Kill the session that holds the advisory lock.
	admin := openPG(t, url)
	var killed bool
	require.NoError(t, admin.DB().GetContext(ctx, &killed, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`))
	require.True(t, killed)
	require.Eventually(t, func() bool {
		for _, l := range logs.lines(t) {
			if l["msg"] == "settlement: lock lost; trying to take it again" {
				return true
			}
		}
		return false
	}, eventually, 10*time.Millisecond)

	f.mine(pay(inv.DepositAddress, eth(1000)))
	require.Eventually(t, func() bool { return f.get(inv.ID).Status == store.StatusPaid }, eventually, 5*time.Millisecond)
	acquired := 0
	for _, l := range logs.lines(t) {
		if l["msg"] == "settlement: lock acquired" {
			acquired++
		}
	}
	require.Equal(t, 2, acquired)
}

func TestRun_InjectedCrash_ReturnsError(t *testing.T) {
	f := newFixture(t, sqliteStore(t))
	s := f.settler(func(c *Config) { c.afterStep = func(string) error { return errInjected } })
	f.mine()
	err := s.Run(ctx)
	require.True(t, errors.Is(err, errInjected))
	_, err = f.st.GetCursor(ctx, store.CursorSettlement)
	require.ErrorIs(t, err, store.ErrNotFound, "the block rolled back")
}

// metricValue reads a counter or gauge.
func metricValue(t *testing.T, c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	require.NoError(t, (<-ch).Write(&m))
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}
