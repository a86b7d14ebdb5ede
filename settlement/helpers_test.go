package settlement

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/store/sqlite/sqlitetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var ctx = context.Background()

// t0 is the tests' start time, at microsecond precision (what both stores
// keep).
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is an injected, manually advanced clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func randAddr() common.Address {
	var a common.Address
	_, _ = rand.Read(a[:])
	return a
}

func randHash() common.Hash {
	var h common.Hash
	_, _ = rand.Read(h[:])
	return h
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func eth(milli uint64) store.Amount {
	a, ok := store.NewAmount(milli).Mul(store.NewAmount(1e15))
	if !ok {
		panic("overflow")
	}
	return a
}

// sqliteStore opens a fresh SQLite store.
func sqliteStore(t testing.TB) store.Store { return sqlitetest.New(t) }

// stores runs fn against PostgreSQL and SQLite.
func stores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, pgtest.New(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, sqliteStore(t))
	})
}

// fixture is a store filled the way the indexer and the invoice API would:
// blocks and transactions through ChainStore, invoices through
// InvoiceStore.
type fixture struct {
	t        testing.TB
	st       store.Store
	clock    *clock
	merchant store.Merchant
	head     store.Block // last inserted block
	hasHead  bool
}

func newFixture(t testing.TB, st store.Store) *fixture {
	f := &fixture{t: t, st: st, clock: newClock()}
	f.merchant = store.Merchant{Name: "shop", APIKeyDigest: randBytes(32), APIKeyHash: "x",
		APIKeyPrefix: "sk_test", WebhookSecretCiphertext: randBytes(60), SettlementAddress: randAddr(),
		CreatedAt: t0, UpdatedAt: t0}
	require.NoError(t, st.CreateMerchant(ctx, &f.merchant))
	return f
}

// invoice creates a PENDING invoice for amount wei expiring in 15 minutes.
func (f *fixture) invoice(amount store.Amount, mutate ...func(*store.Invoice)) store.Invoice {
	f.t.Helper()
	var inv store.Invoice
	require.NoError(f.t, f.st.InTx(ctx, func(tx store.Tx) error {
		idx, err := tx.NextDerivationIndex(ctx)
		if err != nil {
			return err
		}
		inv = store.Invoice{MerchantID: f.merchant.ID, Status: store.StatusPending, AmountWei: amount,
			ChainID: 1337, DepositAddress: randAddr(), DerivationIndex: idx, PaymentURI: "ethereum:x",
			LookupTokenHash: randBytes(32), ExpiresAt: f.clock.Now().Add(15 * time.Minute),
			CreatedAt: f.clock.Now(), UpdatedAt: f.clock.Now(), SweepStatus: store.SweepNone}
		for _, m := range mutate {
			m(&inv)
		}
		return tx.CreateInvoice(ctx, &inv)
	}))
	return inv
}

// tx is a transaction for a block of the fixture.
func pay(to common.Address, wei store.Amount) store.Transaction {
	return store.Transaction{Hash: randHash(), From: randAddr(), To: &to, ValueWei: wei, Gas: 21000,
		Type: 2, Input: []byte{}}
}

// mine appends a block holding txs on top of the fixture's head.
func (f *fixture) mine(txs ...store.Transaction) store.Block {
	f.t.Helper()
	b := store.Block{Hash: randHash(), Timestamp: uint64(f.clock.Now().Unix()), Miner: randAddr(),
		GasLimit: 30_000_000, TxCount: len(txs), IndexedAt: f.clock.Now()}
	if f.hasHead {
		b.Number, b.ParentHash = f.head.Number+1, f.head.Hash
	}
	for i := range txs {
		txs[i].BlockNumber, txs[i].BlockHash, txs[i].Index, txs[i].Nonce = b.Number, b.Hash, i, uint64(i)
	}
	require.NoError(f.t, f.st.InsertBlocks(ctx, []store.Block{b}, txs))
	f.head, f.hasHead = b, true
	return b
}

// mineN appends n empty blocks.
func (f *fixture) mineN(n int) {
	f.t.Helper()
	for i := 0; i < n; i++ {
		f.mine()
	}
}

// fork removes the indexed blocks from number on, as the indexer does on a
// reorg; the next mine builds on number−1.
func (f *fixture) fork(number uint64) {
	f.t.Helper()
	_, err := f.st.DeleteBlocksFrom(ctx, number)
	require.NoError(f.t, err)
	parent, err := f.st.GetBlock(ctx, number-1)
	require.NoError(f.t, err)
	f.head = parent
}

func (f *fixture) get(id int64) store.Invoice {
	f.t.Helper()
	inv, err := f.st.GetInvoice(ctx, id)
	require.NoError(f.t, err)
	return inv
}

func (f *fixture) payments(id int64) []store.Payment {
	f.t.Helper()
	ps, err := f.st.ListPaymentsByInvoice(ctx, id)
	require.NoError(f.t, err)
	return ps
}

// events returns the invoice's event types, oldest first.
func (f *fixture) events(id int64) []string {
	f.t.Helper()
	evs, err := f.st.ListEventsByInvoice(ctx, id)
	require.NoError(f.t, err)
	types := []string{}
	for _, e := range evs {
		types = append(types, e.Type)
	}
	return types
}

// lastEvent returns the invoice snapshot of the invoice's newest event.
func (f *fixture) lastEvent(id int64) (string, api.Invoice) {
	f.t.Helper()
	evs, err := f.st.ListEventsByInvoice(ctx, id)
	require.NoError(f.t, err)
	require.NotEmpty(f.t, evs)
	e := evs[len(evs)-1]
	var snap api.Invoice
	require.NoError(f.t, json.Unmarshal(e.Data, &snap))
	return e.Type, snap
}

func (f *fixture) cursor() store.Cursor {
	f.t.Helper()
	c, err := f.st.GetCursor(ctx, store.CursorSettlement)
	require.NoError(f.t, err)
	return c
}

// settler returns a Settler on the fixture's store and clock.
func (f *fixture) settler(mutate ...func(*Config)) *Settler {
	f.t.Helper()
	cfg := Config{Now: f.clock.Now, PollInterval: 5 * time.Millisecond, RetryMin: time.Millisecond,
		RetryMax: 10 * time.Millisecond, LockRetryInterval: 5 * time.Millisecond}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := New(f.st, cfg)
	require.NoError(f.t, err)
	return s
}

// sync runs one settlement round and fails the test on error.
func (f *fixture) sync(s *Settler) {
	f.t.Helper()
	require.NoError(f.t, s.Sync(ctx))
}

// logBuffer collects JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) lines(t testing.TB) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b.buf.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m))
		out = append(out, m)
	}
	return out
}

func jsonLogger(w *logBuffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func pgStore(t testing.TB) store.Store { return pgtest.New(t) }

var errInjected = errors.New("injected crash")
