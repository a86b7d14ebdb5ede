package sweep

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
	"github.com/evmpay/evmpay/store/sqlite/sqlitetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// go-ethereum's clients are Chains as they are.
var (
	_ Chain = (*ethclient.Client)(nil)
	_ Chain = simulated.Client(nil)
)

const testMnemonic = "test test test test test test test test test test test junk"

var (
	ether = new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)
	ctx   = context.Background()
)

func eth(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), ether) }

// testClock advances by a millisecond on every reading, so consecutive
// passes never share a time, and jumps on Advance.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock {
	return &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a simulated chain, a store, the deposit wallet, the sweep wallet,
// a gas funder and a payer, and one merchant.
type env struct {
	t         testing.TB
	sim       *simchain.Backend // Commit returns once the pool is at the new head
	client    simulated.Client
	st        store.Store
	wallet    *hdwallet.Wallet
	sweepKey  *ecdsa.PrivateKey
	funderKey *ecdsa.PrivateKey
	payerKey  *ecdsa.PrivateKey
	merchant  store.Merchant
	clock     *testClock
}

type envOption func(*envOptions)

type envOptions struct {
	sqlite      bool
	sweepWallet *big.Int
}

// onSQLite runs the environment on an SQLite file instead of PostgreSQL.
func onSQLite() envOption { return func(o *envOptions) { o.sqlite = true } }

// sweepWalletBalance sets the sweep wallet's genesis balance (default 10 ETH).
func sweepWalletBalance(b *big.Int) envOption { return func(o *envOptions) { o.sweepWallet = b } }

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	o := envOptions{sweepWallet: eth(10)}
	for _, f := range opts {
		f(&o)
	}
	m, err := hdwallet.ParseMnemonic(testMnemonic)
	require.NoError(t, err)
	w, err := hdwallet.NewWallet(m, "")
	require.NoError(t, err)
	sweepKey, err := w.SweepKey()
	require.NoError(t, err)
	funderKey, err := crypto.GenerateKey()
	require.NoError(t, err)
	payerKey, err := crypto.GenerateKey()
	require.NoError(t, err)

	alloc := types.GenesisAlloc{
		crypto.PubkeyToAddress(payerKey.PublicKey):  {Balance: eth(1_000_000)},
		crypto.PubkeyToAddress(funderKey.PublicKey): {Balance: eth(1_000)},
	}
	if o.sweepWallet.Sign() > 0 {
		alloc[crypto.PubkeyToAddress(sweepKey.PublicKey)] = types.Account{Balance: o.sweepWallet}
	}
	sim := simchain.New(t, alloc)

	var st store.Store
	if o.sqlite {
		st = sqlitetest.New(t)
	} else {
		st = pgtest.New(t)
	}
	e := &env{t: t, sim: sim, client: sim.Client(), st: st, wallet: w, sweepKey: sweepKey,
		funderKey: funderKey, payerKey: payerKey, clock: newTestClock()}
	e.merchant = store.Merchant{
		Name: "shop", APIKeyDigest: randBytes(32), APIKeyHash: "x", APIKeyPrefix: "sk_test",
		WebhookURL: "https://example.com/hook", WebhookSecretCiphertext: randBytes(40),
		SettlementAddress: randAddr(), CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now(),
	}
	require.NoError(t, st.CreateMerchant(ctx, &e.merchant))
	return e
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func randAddr() common.Address { return common.BytesToAddress(randBytes(20)) }

// keys returns the sweeper's keys: the deposit wallet, the sweep wallet and
// the gas funder.
func (e *env) keys() Keys {
	return Keys{Deposits: e.wallet, Wallet: NewKeySigner(e.sweepKey), Funder: NewKeySigner(e.funderKey), Payouts: e.wallet}
}

func (e *env) sweeper(cfg Config) *Sweeper {
	return e.sweeperOn(e.client, cfg)
}

func (e *env) sweeperOn(chain Chain, cfg Config) *Sweeper {
	e.t.Helper()
	cfg.Now = e.clock.Now
	s, err := New(e.st, chain, e.keys(), cfg)
	require.NoError(e.t, err)
	return s
}

func (e *env) sweepWallet() common.Address { return crypto.PubkeyToAddress(e.sweepKey.PublicKey) }

func (e *env) funder() common.Address { return crypto.PubkeyToAddress(e.funderKey.PublicKey) }

// pay sends value from the payer to each address (nonces in order), without
// committing a block.
func (e *env) pay(to []common.Address, value *big.Int) {
	e.t.Helper()
	payer := crypto.PubkeyToAddress(e.payerKey.PublicKey)
	nonce, err := e.client.PendingNonceAt(ctx, payer)
	require.NoError(e.t, err)
	head, err := e.client.HeaderByNumber(ctx, nil)
	require.NoError(e.t, err)
	feeCap := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(params1Gwei))
	for i, addr := range to {
		tx, err := types.SignNewTx(e.payerKey, types.LatestSignerForChainID(big.NewInt(1337)), &types.DynamicFeeTx{
			ChainID: big.NewInt(1337), Nonce: nonce + uint64(i), GasTipCap: big.NewInt(params1Gwei),
			GasFeeCap: feeCap, Gas: 21000, To: &addr, Value: value,
		})
		require.NoError(e.t, err)
		require.NoError(e.t, e.client.SendTransaction(ctx, tx))
	}
}

const params1Gwei = 1_000_000_000

// confirmedInvoices creates n invoices paid (each with value) in one block,
// then marks them CONFIRMED and QUEUED as settlement does.
func (e *env) confirmedInvoices(n int, value *big.Int) []store.Invoice {
	e.t.Helper()
	invs := make([]store.Invoice, n)
	addrs := make([]common.Address, n)
	for i := range invs {
		require.NoError(e.t, e.st.InTx(ctx, func(tx store.Tx) error {
			idx, err := tx.NextDerivationIndex(ctx)
			if err != nil {
				return err
			}
			addr, err := e.wallet.Address(idx)
			if err != nil {
				return err
			}
			now := e.clock.Now()
			invs[i] = store.Invoice{
				MerchantID: e.merchant.ID, Status: store.StatusPending, AmountWei: amountOf(value),
				ChainID: 1337, DepositAddress: addr, DerivationIndex: idx,
				PaymentURI: "ethereum:" + addr.Hex() + "@1337?value=" + value.String(), LookupTokenHash: randBytes(32),
				ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now, SweepStatus: store.SweepNone,
			}
			return tx.CreateInvoice(ctx, &invs[i])
		}))
		addrs[i] = invs[i].DepositAddress
	}
	e.pay(addrs, value)
	e.sim.Commit()
	for i := range invs {
		now := e.clock.Now()
		invs[i].Status, invs[i].PaidWei, invs[i].PaidAt, invs[i].ConfirmedAt = store.StatusConfirmed, amountOf(value), &now, &now
		invs[i].SweepStatus, invs[i].UpdatedAt = store.SweepQueued, now
		require.NoError(e.t, e.st.UpdateInvoice(ctx, &invs[i]))
	}
	return invs
}

func (e *env) invoice(id int64) store.Invoice {
	e.t.Helper()
	inv, err := e.st.GetInvoice(ctx, id)
	require.NoError(e.t, err)
	return inv
}

func (e *env) balance(addr common.Address) *big.Int {
	e.t.Helper()
	b, err := e.client.BalanceAt(ctx, addr, nil)
	require.NoError(e.t, err)
	return b
}

func (e *env) nonce(addr common.Address) uint64 {
	e.t.Helper()
	n, err := e.client.NonceAt(ctx, addr, nil)
	require.NoError(e.t, err)
	return n
}

func (e *env) head() uint64 {
	e.t.Helper()
	n, err := e.client.BlockNumber(ctx)
	require.NoError(e.t, err)
	return n
}

// drive makes a pass of every sweeper (concurrently), then a block, until
// done holds after a pass; it fails after maxBlocks blocks and returns the
// number of blocks it committed.
func (e *env) drive(maxBlocks int, done func() bool, sweepers ...*Sweeper) int {
	e.t.Helper()
	return e.driveWith(nil, maxBlocks, done, sweepers...)
}

// driveWith is drive with before run ahead of every pass (nil: nothing).
func (e *env) driveWith(before func(), maxBlocks int, done func() bool, sweepers ...*Sweeper) int {
	e.t.Helper()
	for blocks := 0; ; blocks++ {
		if before != nil {
			before()
		}
		var wg sync.WaitGroup
		errs := make([]error, len(sweepers))
		for i, s := range sweepers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.RunOnce(ctx)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(e.t, err)
		}
		if done() {
			return blocks
		}
		require.Less(e.t, blocks, maxBlocks, "not done after %d blocks", maxBlocks)
		e.sim.Commit()
	}
}

// status returns a condition that holds when every invoice has the sweep
// status.
func (e *env) all(ids []int64, sweepStatus string) func() bool {
	return func() bool {
		for _, id := range ids {
			if e.invoice(id).SweepStatus != sweepStatus {
				return false
			}
		}
		return true
	}
}

func ids(invs []store.Invoice) []int64 {
	out := make([]int64, len(invs))
	for i := range invs {
		out[i] = invs[i].ID
	}
	return out
}

func (e *env) sweepTxs(invoiceID int64, kind string) []store.SweepTx {
	e.t.Helper()
	txs, err := e.st.ListSweepTxsByInvoice(ctx, invoiceID)
	require.NoError(e.t, err)
	var out []store.SweepTx
	for _, t := range txs {
		if t.Kind == kind {
			out = append(out, t)
		}
	}
	return out
}

func (e *env) events(invoiceID int64) []string {
	e.t.Helper()
	evs, err := e.st.ListEventsByInvoice(ctx, invoiceID)
	require.NoError(e.t, err)
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	return types
}

func randHash() common.Hash { return common.BytesToHash(randBytes(32)) }

func big0() *big.Int { return new(big.Int) }
