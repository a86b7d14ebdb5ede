package settlement

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// crashHook fails the failAt-th step (1-based) once, as a crash there
// would, and counts every step.
type crashHook struct {
	mu     sync.Mutex
	calls  int
	failAt int
	failed string
}

func (h *crashHook) afterStep(step string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.calls == h.failAt {
		h.failed = step
		return fmt.Errorf("%w at %s", errInjected, step)
	}
	return nil
}

// invoiceSummary is what must come out the same with or without a crash.
type invoiceSummary struct {
	Status, Sweep                string
	Paid                         string
	Under, Over, Late, Attention bool
	Events                       []string
	Payments                     []string // block:amount:late
}

// crashScenario drives settlement through payments, a reorg,
// confirmations, expiry and a late payment. Whenever a round fails with
// the injected crash, it restarts a fresh Settler on the same database,
// as a restarted process would.
func crashScenario(t *testing.T, st store.Store, hook *crashHook) (map[string]invoiceSummary, uint64) {
	f := newFixture(t, st)
	cfg := func(c *Config) {
		c.Confirmations = 3
		// One invoice per batch: the head block's transaction confirms
		// one, a confirmation pass of its own the others.
		c.BatchSize = 1
		c.afterStep = hook.afterStep
	}
	s := f.settler(cfg)
	round := func() {
		t.Helper()
		err := s.Sync(ctx)
		if errors.Is(err, errInjected) {
			s = f.settler(cfg) // the process restarts
			err = s.Sync(ctx)
		}
		require.NoError(t, err)
	}
	inv := map[string]store.Invoice{
		"split":     f.invoice(eth(1000)),
		"exact":     f.invoice(eth(1000)),
		"reorged":   f.invoice(eth(1000)),
		"late":      f.invoice(eth(1000)),
		"untouched": f.invoice(eth(1000)),
	}
	f.mine()
	f.mine(pay(inv["split"].DepositAddress, eth(400)), pay(randAddr(), eth(5)),
		pay(inv["exact"].DepositAddress, eth(1000)), pay(inv["split"].DepositAddress, eth(600)))
	round()
	fork := f.mine(pay(inv["reorged"].DepositAddress, eth(1000)))
	f.mine()
	round()
	f.fork(fork.Number)
	f.mine()
	f.mine(pay(inv["reorged"].DepositAddress, eth(500)))
	round()
	f.mineN(3)
	round()
	f.clock.Advance(16 * time.Minute)
	round()
	f.mine(pay(inv["late"].DepositAddress, eth(1000)))
	round()
	f.mineN(3)
	round()

	out := map[string]invoiceSummary{}
	for name, i := range inv {
		got := f.get(i.ID)
		sum := invoiceSummary{Status: got.Status, Sweep: got.SweepStatus, Paid: got.PaidWei.String(),
			Under: got.Underpaid, Over: got.Overpaid, Late: got.PaidLate, Attention: got.NeedsAttention,
			Events: f.events(i.ID), Payments: []string{}}
		for _, p := range f.payments(i.ID) {
			sum.Payments = append(sum.Payments, fmt.Sprintf("%d:%s:%t", p.BlockNumber, p.AmountWei, p.Late))
		}
		out[name] = sum
	}
	return out, f.cursor().BlockNumber
}

func TestCrashScenario_WithoutCrash_ExpectedOutcome(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		ref := &crashHook{}
		want, _ := crashScenario(t, st, ref)
		// The reference run itself is right.
		require.Equal(t, store.StatusConfirmed, want["split"].Status)
		require.Equal(t, []string{"1:400000000000000000:false", "1:600000000000000000:false"}, want["split"].Payments)
		require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed}, want["split"].Events)
		require.Equal(t, store.StatusConfirmed, want["exact"].Status)
		require.Equal(t, store.StatusExpired, want["reorged"].Status)
		require.True(t, want["reorged"].Under)
		require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceReverted, store.EventInvoiceUnderpaid,
			store.EventInvoiceExpired}, want["reorged"].Events)
		require.Equal(t, store.StatusConfirmed, want["late"].Status)
		require.True(t, want["late"].Late)
		require.Equal(t, []string{store.EventInvoiceExpired, store.EventInvoicePaid, store.EventInvoiceConfirmed},
			want["late"].Events)
		require.Equal(t, []string{store.EventInvoiceExpired}, want["untouched"].Events)
		t.Logf("%d steps in the scenario", ref.calls)
	})
}

// The scenario runs once per step, crashing there, on a fresh database
// each time; the outcome must equal the run without crashes.
func TestCrash_AtEveryStep_RestartCountsEachPaymentAndEventOnce(t *testing.T) {
	for _, backend := range []struct {
		name string
		open func(testing.TB) store.Store
	}{{"postgres", pgStore}, {"sqlite", sqliteStore}} {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			ref := &crashHook{}
			want, wantCursor := crashScenario(t, backend.open(t), ref)
			steps := map[string]bool{}
			for k := 1; k <= ref.calls; k++ {
				// A subtest per step: its database and connections are
				// closed before the next step opens its own.
				t.Run(fmt.Sprintf("step %d", k), func(t *testing.T) {
					hook := &crashHook{failAt: k}
					got, cursor := crashScenario(t, backend.open(t), hook)
					require.NotEmpty(t, hook.failed, "step %d was reached", k)
					steps[hook.failed] = true
					require.Equal(t, want, got, "crash at step %d (%s)", k, hook.failed)
					require.Equal(t, wantCursor, cursor, "crash at step %d (%s)", k, hook.failed)
				})
			}
			for _, s := range []string{"block.cursor", "block.payments", "block.invoice", "block.events",
				"block.commit", "block.committed", "revert.cursor", "revert.payments", "revert.invoice",
				"revert.events", "revert.commit", "confirm.invoice", "confirm.events", "confirm.commit",
				"expire.invoice", "expire.events", "expire.commit"} {
				require.True(t, steps[s], "a crash was injected at %s", s)
			}
		})
	}
}
