package sweep

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// final and finalIndexed under each finality mode: depth counts blocks on
// top of the pass's head; tag compares with the finalized block recorded
// when the pass started, and nothing is final while none is recorded.
func TestFinal_ByFinalityMode(t *testing.T) {
	t.Parallel()
	depth := &Sweeper{cfg: Config{Confirmations: 12}.withDefaults()}
	instant := &Sweeper{cfg: Config{Finality: store.FinalityInstant}.withDefaults()}
	tag := &Sweeper{cfg: Config{Finality: store.FinalityTag}.withDefaults()}
	require.Zero(t, tag.cfg.Confirmations, "tag takes no confirmations, none defaulted")

	p := &pass{number: 100}
	require.True(t, depth.final(p, 88))
	require.False(t, depth.final(p, 89))
	require.True(t, instant.final(p, 100))
	require.False(t, instant.final(p, 101), "a block above the pass's head waits")

	require.False(t, tag.final(p, 1), "no finalized block recorded")
	_, ok := tag.finalIndexed(p, 100)
	require.False(t, ok)

	p.finalized, p.hasFinalized = 60, true
	require.True(t, tag.final(p, 59))
	require.True(t, tag.final(p, 60), "at the finalized block")
	require.False(t, tag.final(p, 61), "above it, whatever the blocks on top")
	final, ok := tag.finalIndexed(p, 100)
	require.True(t, ok)
	require.EqualValues(t, 60, final)
	final, ok = tag.finalIndexed(p, 55)
	require.True(t, ok)
	require.EqualValues(t, 55, final, "at most the indexed head")

	p.number = 58 // a node behind the finalized block: its head bounds what it proved mined
	require.False(t, tag.final(p, 59))

	final, ok = depth.finalIndexed(p, 100)
	require.True(t, ok)
	require.EqualValues(t, 88, final)
	_, ok = depth.finalIndexed(p, 11)
	require.False(t, ok)
}

// Under tag finality a sweep is SETTLED once its block is at or below the
// finalized block the indexer recorded: not while none is recorded
// (however many blocks are on top), not while its block is above it.
func TestSweep_TagFinality_SettledOnceTheSweepIsAtOrBelowTheFinalizedBlock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	inv := e.confirmedInvoices(1, eth(1))[0]
	s := e.sweeper(Config{Finality: store.FinalityTag})

	require.NoError(t, s.RunOnce(ctx))
	require.Equal(t, store.SweepFunding, e.invoice(inv.ID).SweepStatus)
	e.sim.Commit()
	require.NoError(t, s.RunOnce(ctx))
	require.Equal(t, store.SweepSent, e.invoice(inv.ID).SweepStatus)
	e.sim.Commit()
	sweptAt := e.head()

	for range 20 { // under depth (12) it would be settled
		require.NoError(t, s.RunOnce(ctx))
		e.sim.Commit()
	}
	require.NoError(t, s.RunOnce(ctx))
	require.Equal(t, store.SweepSent, e.invoice(inv.ID).SweepStatus, "no finalized block recorded")

	require.NoError(t, e.st.SetFinalizedBlock(ctx, sweptAt-1))
	require.NoError(t, s.RunOnce(ctx))
	require.Equal(t, store.SweepSent, e.invoice(inv.ID).SweepStatus, "the sweep's block is above the finalized block")

	require.NoError(t, e.st.SetFinalizedBlock(ctx, sweptAt))
	require.NoError(t, s.RunOnce(ctx))
	got := e.invoice(inv.ID)
	require.Equal(t, store.SweepSwept, got.SweepStatus, "the sweep's block is the finalized block")
	require.Equal(t, store.StatusSettled, got.Status)
	require.Equal(t, []string{store.EventInvoiceSettled}, e.events(inv.ID))

	_, err := New(e.st, e.client, e.keys(), Config{Finality: store.FinalityTag, Confirmations: 12})
	require.ErrorContains(t, err, "takes no confirmations")
}
