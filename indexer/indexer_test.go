package indexer_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/store/sqlite/sqlitetest"
)

func TestFollow_IndexesEveryNewBlockWithItsTransactions(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(2, 0)
	start(t, c.source(), st, indexer.Config{Backfill: true})
	waitIndexed(t, st, c)
	for range 5 {
		c.mine(1, 3)
		waitIndexed(t, st, c)
	}
	requireCanonical(t, st, c, 0)
}

func TestFollow_NoCursorNoBackfill_StartsAtTheHead(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(20, 0)
	tip := c.head()
	start(t, c.source(), st, indexer.Config{})
	waitIndexed(t, st, c)
	c.mine(3, 1)
	waitIndexed(t, st, c)
	requireCanonical(t, st, c, tip)
}

func TestRestart_ResumesFromTheCursor(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(5, 1)
	first := start(t, c.source(), st, indexer.Config{Backfill: true})
	waitIndexed(t, st, c)
	require.NoError(t, first.stop(t), "Run returns nil when its context is cancelled")

	// Blocks made while no indexer runs are indexed by the next one, even
	// without Backfill: the cursor wins over "start at the head".
	c.mine(7, 2)
	start(t, c.source(), st, indexer.Config{})
	waitIndexed(t, st, c)
	requireCanonical(t, st, c, 0)
}

func TestBackfill_ThenFollow_NoGapNoDuplicate(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	for range 30 {
		c.mine(9, 0)
		c.mine(1, 4)
	}
	ix := start(t, c.source(), st, indexer.Config{Backfill: true, BatchSize: 16, Concurrency: 3})
	waitIndexed(t, st, c)
	// Blocks keep coming while it runs; some arrive during the handover.
	for range 10 {
		c.mine(1, 2)
	}
	waitIndexed(t, st, c)
	c.mine(3, 1)
	waitIndexed(t, st, c)
	requireCanonical(t, st, c, 0)

	head := float64(c.head())
	require.Equal(t, head, metricValue(t, ix.ix, "indexer_indexed_block"))
	require.Eventually(t, func() bool {
		return metricValue(t, ix.ix, "indexer_head_block") == head && metricValue(t, ix.ix, "indexer_lag_blocks") == 0 &&
			metricValue(t, ix.ix, "indexer_backfill_blocks_per_second") == 0
	}, waitFor, 5*time.Millisecond, "head, no lag, backfill rate back to 0 once following")
	require.Zero(t, metricValue(t, ix.ix, "indexer_reorgs_total"))
	require.Positive(t, metricValue(t, ix.ix, "indexer_transactions_indexed_total"))
}

func TestBackfill_StartBlock(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(40, 0)
	start(t, c.source(), st, indexer.Config{Backfill: true, StartBlock: 25, BatchSize: 4})
	waitIndexed(t, st, c)
	requireCanonical(t, st, c, 25)
}

func TestUpstream_FailingIntermittently_NoBlockSkipped(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	for range 15 {
		c.mine(9, 0)
		c.mine(1, 3)
	}
	src := &flakySource{Source: c.source(), errEvery: 3, hangEvery: 7, shortEvery: 5}
	start(t, src, st, indexer.Config{Backfill: true, BatchSize: 8, Concurrency: 3,
		RPCTimeout: 100 * time.Millisecond})
	waitIndexed(t, st, c)
	for range 5 {
		c.mine(1, 2)
		waitIndexed(t, st, c)
	}
	requireCanonical(t, st, c, 0)
	require.Positive(t, src.failed.Load())
}

func TestReorg_Depth1_LeavesTheCanonicalChain(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(5, 1)
	ix := start(t, c.source(), st, indexer.Config{Backfill: true})
	waitIndexed(t, st, c)
	old := c.block(c.head())

	c.fork(1)
	c.commit(1) // a different block at the same height
	require.NotEqual(t, old.Hash(), c.block(c.head()).Hash())
	waitIndexed(t, st, c)
	requireCanonical(t, st, c, 0)

	reorgs, err := st.ListReorgs(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Len(t, reorgs, 1)
	r := reorgs[0]
	require.Equal(t, old.NumberU64(), r.ForkBlock)
	require.Equal(t, 1, r.Depth)
	require.Equal(t, store.HashList{old.Hash()}, r.OldHashes)
	require.Equal(t, store.HashList{c.block(old.NumberU64()).Hash()}, r.NewHashes)
	require.Equal(t, 1.0, metricValue(t, ix.ix, "indexer_reorgs_total"))
}

func TestReorg_Depth5_LeavesTheCanonicalChain(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(10, 2)
	start(t, c.source(), st, indexer.Config{Backfill: true})
	waitIndexed(t, st, c)
	head := c.head()
	var old []any
	for n := head - 4; n <= head; n++ {
		old = append(old, c.block(n).Hash())
	}

	c.fork(5)
	c.commit(6)
	require.Equal(t, head+1, c.head())
	waitIndexed(t, st, c)
	requireCanonical(t, st, c, 0)

	reorgs, err := st.ListReorgs(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Len(t, reorgs, 1)
	r := reorgs[0]
	require.Equal(t, head-4, r.ForkBlock)
	require.Equal(t, 5, r.Depth)
	require.Len(t, r.OldHashes, 5)
	for i, h := range r.OldHashes {
		require.Equal(t, old[i], h)
	}
	require.NotEmpty(t, r.NewHashes)
	for i, h := range r.NewHashes {
		require.Equal(t, c.block(head-4+uint64(i)).Hash(), h, "new hashes are the new branch, oldest first")
	}
}

func TestReorg_DeeperThanMax_StopsWithError(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(10, 1)
	ix := start(t, c.source(), st, indexer.Config{Backfill: true, MaxReorgDepth: 3})
	waitIndexed(t, st, c)
	head := c.head()
	before, err := st.ListBlockHashes(context.Background(), 0, head)
	require.NoError(t, err)

	c.fork(5)
	c.commit(6)
	err = ix.wait(t)
	require.ErrorIs(t, err, store.ErrReorgTooDeep)
	require.Contains(t, err.Error(), "MaxReorgDepth 3")

	after, err := st.ListBlockHashes(context.Background(), 0, head+10)
	require.NoError(t, err)
	require.Equal(t, before, after, "history is left as it was")
	reorgs, err := st.ListReorgs(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Empty(t, reorgs)
}

func TestWrongChain_StopsWithError(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	ix := start(t, c.source(), st, indexer.Config{ChainID: 1})
	err := ix.wait(t)
	require.ErrorIs(t, err, indexer.ErrWrongChain)
	require.Contains(t, err.Error(), "1337")
}

func TestLock_OneIndexerWritesAndAnotherTakesOverWhenItStops(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(3, 1)
	first := start(t, c.source(), st, indexer.Config{Backfill: true})
	waitIndexed(t, st, c)

	waiting := &countingSource{Source: c.source()}
	start(t, waiting, st, indexer.Config{Backfill: true})
	c.mine(2, 1)
	waitIndexed(t, st, c)
	require.Zero(t, waiting.count(), "the second indexer does not read while the first holds the lock")

	require.NoError(t, first.stop(t))
	c.mine(2, 1)
	waitIndexed(t, st, c)
	require.Positive(t, waiting.count())
	requireCanonical(t, st, c, 0)
}

func TestLock_LostLock_StopsWritingAndTakesItAgain(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(3, 1)
	start(t, c.source(), st, indexer.Config{Backfill: true})
	waitIndexed(t, st, c)

	// Kill the database session that holds the advisory lock.
	ctx := context.Background()
	var killed bool
	require.NoError(t, st.DB().GetContext(ctx, &killed, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`))
	require.True(t, killed)
	// The indexer notices (LockCheckInterval), takes the lock again and
	// carries on.
	require.Eventually(t, func() bool {
		var n int
		err := st.DB().GetContext(ctx, &n, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
		return err == nil && n == 1
	}, waitFor, 20*time.Millisecond)
	c.mine(3, 1)
	waitIndexed(t, st, c)
	requireCanonical(t, st, c, 0)
}

func TestSQLite_FollowAndReorg(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := sqlitetest.New(t)
	c.mine(30, 1)
	start(t, c.source(), st, indexer.Config{Backfill: true, BatchSize: 7})
	waitIndexed(t, st, c)
	c.fork(2)
	c.commit(3)
	c.mine(1, 2)
	waitIndexed(t, st, c)
	hashes, err := st.ListBlockHashes(context.Background(), 0, c.head()+5)
	require.NoError(t, err)
	require.Len(t, hashes, int(c.head())+1)
	for n, h := range hashes {
		require.Equal(t, c.block(n).Hash(), h)
	}
	reorgs, err := st.ListReorgs(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Len(t, reorgs, 1)
	require.Equal(t, 2, reorgs[0].Depth)
}

func TestNew_RejectsBadConfig(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	for _, cfg := range []indexer.Config{
		{BatchSize: -1},
		{BatchSize: 5000},
		{PollInterval: -time.Second},
		{RetryMin: time.Minute, RetryMax: time.Second},
	} {
		_, err := indexer.New(c.source(), st, cfg)
		require.Error(t, err, "%+v", cfg)
	}
	_, err := indexer.New(nil, st, indexer.Config{})
	require.Error(t, err)
}

func TestBackfill_LogsProgressWithRateAndETA(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(60, 0)
	// A clock that moves a second each time it is read: every batch is
	// "a ProgressInterval later".
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
	logs := &recordingHandler{}
	start(t, c.source(), st, indexer.Config{Backfill: true, BatchSize: 10, Concurrency: 2,
		ProgressInterval: time.Second, Now: clock, Logger: slog.New(logs)})
	waitIndexed(t, st, c)
	require.Eventually(t, func() bool { return logs.find("indexer: caught up; following the head") != nil },
		waitFor, 5*time.Millisecond)

	progress := logs.all("indexer: catching up")
	require.Greater(t, len(progress), 2, "one line when it starts, then one per interval")
	first := progress[0]
	require.EqualValues(t, 60, first["head"])
	require.EqualValues(t, 61, first["blocks"])
	mid := progress[2]
	for _, key := range []string{"block", "head", "blocks_per_second", "transactions_per_second", "eta"} {
		require.Contains(t, mid, key)
	}
	require.NotEqual(t, "0", mid["blocks_per_second"])
	require.NotZero(t, mid["eta"])
	require.Less(t, len(progress), 10, "not a line per block")
}

// recordingHandler keeps log records' messages and attributes.
type recordingHandler struct {
	mu      sync.Mutex
	records []map[string]any
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.Any()
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, m)
	h.mu.Unlock()
	return nil
}

func (h *recordingHandler) all(msg string) []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for _, r := range h.records {
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

func (h *recordingHandler) find(msg string) map[string]any {
	if all := h.all(msg); len(all) > 0 {
		return all[0]
	}
	return nil
}

func TestReorg_BelowTheFirstIndexedBlock_ReplacesWhatWasIndexed(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(20, 1)
	first := c.head()
	start(t, c.source(), st, indexer.Config{})
	waitIndexed(t, st, c)
	c.mine(2, 1)
	waitIndexed(t, st, c)

	// The fork point is below the first block this indexer ever wrote.
	c.fork(5)
	c.commit(7)
	waitIndexed(t, st, c)
	requireCanonical(t, st, c, first)
	reorgs, err := st.ListReorgs(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Len(t, reorgs, 1)
	require.Equal(t, first, reorgs[0].ForkBlock, "nothing below the first indexed block is compared")
	require.Equal(t, 3, reorgs[0].Depth)
}

// Sync indexes what the node has now and returns — no polling, no
// retrying — following a reorg it finds; it refuses while another
// process holds the lock, and while Run is running in this one.
func TestSync_IndexesWhatTheNodeHasNow_ThenReturns(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	c.mine(3, 2)
	ix, err := indexer.New(c.source(), st, indexer.Config{Backfill: true, Logger: testLogger(t)})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, ix.Sync(ctx))
	requireCanonical(t, st, c, 0) // every block up to the head, at once

	c.mine(2, 1)
	require.NoError(t, ix.Sync(ctx))
	requireCanonical(t, st, c, 0)

	c.fork(2) // the last two blocks orphaned; the new branch is longer
	c.mine(3, 1)
	require.NoError(t, ix.Sync(ctx))
	requireCanonical(t, st, c, 0)
	reorgs, err := st.ListReorgs(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, reorgs, 1)

	lock, err := st.TryLock(ctx, indexer.LockName)
	require.NoError(t, err)
	require.ErrorIs(t, ix.Sync(ctx), store.ErrLocked)
	require.NoError(t, lock.Unlock())

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ix.Run(runCtx) }()
	require.Eventually(t, func() bool { // Run holds the lock
		l, err := st.TryLock(ctx, indexer.LockName)
		if err == nil {
			_ = l.Unlock()
		}
		return errors.Is(err, store.ErrLocked)
	}, waitFor, 5*time.Millisecond)
	require.ErrorContains(t, ix.Sync(ctx), "Sync called while Run or Sync is running")
	stop()
	require.NoError(t, <-done)
}
