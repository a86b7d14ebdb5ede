package sweep

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func TestNew_ValidatesConfigAndKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onSQLite())
	for _, c := range []struct {
		name string
		keys Keys
		cfg  Config
		want string
	}{
		{"unknown policy", e.keys(), Config{Policy: "free"}, "unknown policy"},
		{"no deposit signer", Keys{Wallet: NewKeySigner(e.sweepKey)}, Config{}, "Keys.Deposits"},
		{"sponsor without a wallet", Keys{Deposits: e.wallet}, Config{}, "Keys.Wallet"},
		{"funder is the wallet", Keys{Deposits: e.wallet, Wallet: NewKeySigner(e.sweepKey), Funder: NewKeySigner(e.sweepKey)}, Config{}, "different accounts"},
		{"short lease", e.keys(), Config{Lease: time.Second}, "Lease"},
		{"huge batch", e.keys(), Config{BatchSize: 5000}, "BatchSize"},
		{"max fee below min", e.keys(), Config{MinGasPrice: store.NewAmount(10), MaxFeePerGas: store.NewAmount(5)}, "MaxFeePerGas"},
	} {
		_, err := New(e.st, e.client, c.keys, c.cfg)
		require.ErrorContains(t, err, c.want, c.name)
	}
	_, err := New(e.st, e.client, Keys{Deposits: e.wallet}, Config{Policy: PolicyDeduct})
	require.NoError(t, err, "deduct needs no sweep wallet")

	reg := prometheus.NewRegistry()
	_, err = New(e.st, e.client, e.keys(), Config{Registerer: reg})
	require.NoError(t, err)
	_, err = New(e.st, e.client, e.keys(), Config{Registerer: reg})
	require.ErrorContains(t, err, "already registered")
}

func TestKeySigner_NeverPrintsTheKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, onSQLite())
	k := NewKeySigner(e.sweepKey)
	secret := fmt.Sprintf("%x", e.sweepKey.D.Bytes())
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s %x %q", k, k, k, k, k, k), k.LogValue().String()} {
		require.NotContains(t, s, secret)
		require.Contains(t, s, e.sweepWallet().Hex())
	}
}

func TestRun_SweepsAsBlocksArriveAndStopsOnCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	invs := e.confirmedInvoices(3, eth(1))
	s := e.sweeper(Config{Confirmations: 2, PollInterval: 5 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()

	// The test makes the blocks; Run notices each new head.
	require.Eventually(t, func() bool {
		if e.all(ids(invs), store.SweepSwept)() {
			return true
		}
		if e.all(ids(invs), store.SweepQueued)() {
			return false // not picked up yet
		}
		e.sim.Commit()
		return false
	}, 30*time.Second, 20*time.Millisecond)
	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	for _, inv := range invs {
		got := e.invoice(inv.ID)
		require.Equal(t, store.StatusSettled, got.Status)
		require.Nil(t, got.SweepLockedUntil, "no lease left behind")
	}
}

// noChainIDAtFirst is a real chain whose node does not answer eth_chainId
// for its first calls, as a node that goes away just after payd started.
type noChainIDAtFirst struct {
	Chain
	mu    sync.Mutex
	fails int
}

func (c *noChainIDAtFirst) ChainID(ctx context.Context) (*big.Int, error) {
	c.mu.Lock()
	if c.fails > 0 {
		c.fails--
		c.mu.Unlock()
		return nil, errors.New("Post \"http://127.0.0.1:1\": EOF")
	}
	c.mu.Unlock()
	return c.Chain.ChainID(ctx)
}

// A node that does not answer when Run starts is asked again at the next
// polls; Run does not give up (it used to return, and payd serve shut
// down on it).
func TestRun_NodeWithoutChainIDAtStart_KeepsTryingThenSweeps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	invs := e.confirmedInvoices(1, eth(1))
	chain := &noChainIDAtFirst{Chain: e.client, fails: 3}
	s := e.sweeperOn(chain, Config{Confirmations: 2, PollInterval: 5 * time.Millisecond, IdleInterval: 10 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	deadline := time.Now().Add(30 * time.Second)
	for !e.all(ids(invs), store.SweepSwept)() {
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "not swept after 30 s")
		e.sim.Commit()
	}
	chain.mu.Lock()
	require.Zero(t, chain.fails, "every failing call was made")
	chain.mu.Unlock()
	stop()
	require.NoError(t, <-done)
}
