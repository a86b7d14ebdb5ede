package settlement

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// These tests run settlement on what the real indexer writes from the
// simulated go-ethereum chain (a real EVM) into a real PostgreSQL.

// simChain is a simulated chain with a funded payer.
type simChain struct {
	t      *testing.T
	b      *simchain.Backend
	client simulated.Client
	key    *ecdsa.PrivateKey
	signer types.Signer
	id     int64 // the chain id
}

func newSimChain(t *testing.T) *simChain { return newSimChainID(t, 1337) }

// newSimChainID is a simulated chain with chain id id.
func newSimChainID(t *testing.T, id int64) *simChain {
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	balance, _ := new(big.Int).SetString("1000000000000000000000000", 10)
	b := simchain.New(t, types.GenesisAlloc{crypto.PubkeyToAddress(key.PublicKey): {Balance: balance}},
		simchain.WithChainID(uint64(id)))
	return &simChain{t: t, b: b, client: b.Client(), key: key, signer: types.LatestSignerForChainID(big.NewInt(id)), id: id}
}

func (c *simChain) nonce() uint64 {
	n, err := c.client.PendingNonceAt(context.Background(), crypto.PubkeyToAddress(c.key.PublicKey))
	require.NoError(c.t, err)
	return n
}

// send signs and sends a transaction (to nil: a contract creation); it is
// mined by the next commit.
func (c *simChain) send(nonce uint64, to *common.Address, wei store.Amount, tip int64) common.Hash {
	c.t.Helper()
	h, err := c.trySend(nonce, to, wei, tip)
	require.NoError(c.t, err)
	c.waitPending(nonce, h)
	return h
}

// waitPending waits until the transaction h with this nonce is pending.
// The pool admits a transaction asynchronously after a block (its
// promotion from the queue runs in the background): waiting makes the next
// commit mine it. A loaded machine otherwise splits a test's block.
func (c *simChain) waitPending(nonce uint64, h common.Hash) {
	c.t.Helper()
	from := crypto.PubkeyToAddress(c.key.PublicKey)
	require.Eventually(c.t, func() bool {
		next, err := c.client.PendingNonceAt(context.Background(), from)
		return err == nil && next > nonce
	}, 10*time.Second, 5*time.Millisecond, "transaction %s never pending", h)
}

func (c *simChain) trySend(nonce uint64, to *common.Address, wei store.Amount, tip int64) (common.Hash, error) {
	c.t.Helper()
	data := &types.DynamicFeeTx{ChainID: big.NewInt(c.id), Nonce: nonce, To: to, Value: wei.Big(), Gas: 60000,
		GasTipCap: big.NewInt(tip * params.GWei), GasFeeCap: big.NewInt(10 * tip * params.GWei)}
	if to == nil {
		data.Data = []byte{0x60, 0x00, 0x60, 0x00, 0xf3}
	}
	tx, err := types.SignNewTx(c.key, c.signer, data)
	require.NoError(c.t, err)
	return tx.Hash(), c.client.SendTransaction(context.Background(), tx)
}

// pay sends wei to addr.
func (c *simChain) pay(addr common.Address, wei store.Amount) common.Hash {
	return c.send(c.nonce(), &addr, wei, 1)
}

func (c *simChain) commit(n int) {
	for range n {
		c.b.Commit()
	}
}

func (c *simChain) head() *types.Block {
	c.t.Helper()
	b, err := c.client.BlockByNumber(context.Background(), nil)
	require.NoError(c.t, err)
	return b
}

// chainEnv is the simulated chain, the indexer writing it into PostgreSQL,
// and a fixture for invoices and the clock.
type chainEnv struct {
	*fixture
	c *simChain
}

func newChainEnv(t *testing.T) *chainEnv {
	t.Parallel()
	return startChainEnv(t, newSimChain(t))
}

// startChainEnv starts the indexer on c, indexing the Transfer logs of
// tokens.
func startChainEnv(t *testing.T, c *simChain, tokens ...common.Address) *chainEnv {
	st := pgtest.New(t)
	runIndexer(t, c, st, tokens...)
	return &chainEnv{fixture: newFixture(t, st), c: c}
}

// runIndexer runs an indexer of chain c into st (bound to c's chain), the
// Transfer logs of tokens included, until the test ends.
func runIndexer(t *testing.T, c *simChain, st store.Store, tokens ...common.Address) {
	ix, err := indexer.New(indexer.NewClientSource(c.client), st, indexer.Config{Backfill: true, ChainID: uint64(c.id), Tokens: tokens,
		PollInterval: 5 * time.Millisecond, RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	require.NoError(t, err)
	ictx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ix.Run(ictx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// settle waits until the indexer has the chain's head, then runs one
// settlement round.
func (e *chainEnv) settle(s *Settler) error {
	e.t.Helper()
	want := e.c.head()
	require.Eventually(e.t, func() bool {
		b, err := e.st.LatestBlock(ctx)
		return err == nil && b.Number == want.NumberU64() && b.Hash == want.Hash()
	}, eventually, 2*time.Millisecond, "indexer did not reach block %d", want.NumberU64())
	return s.Sync(ctx)
}

func (e *chainEnv) mustSettle(s *Settler) {
	e.t.Helper()
	require.NoError(e.t, e.settle(s))
}

func TestChain_ExactPayment_ConfirmedAt12Not11(t *testing.T) {
	e := newChainEnv(t)
	inv := e.invoice(eth(1000))
	s := e.settler()
	e.c.commit(2)
	txHash := e.c.pay(inv.DepositAddress, eth(1000))
	e.c.commit(1)
	paidIn := e.c.head()
	e.mustSettle(s)
	got := e.get(inv.ID)
	require.Equal(t, store.StatusPaid, got.Status)
	ps := e.payments(inv.ID)
	require.Len(t, ps, 1)
	require.Equal(t, txHash, ps[0].TxHash)
	require.Equal(t, paidIn.Hash(), ps[0].BlockHash, "the hash the node reported")
	require.Equal(t, paidIn.NumberU64(), ps[0].BlockNumber)
	require.Equal(t, crypto.PubkeyToAddress(e.c.key.PublicKey), ps[0].From)

	e.c.commit(11)
	e.mustSettle(s)
	require.EqualValues(t, 11, e.c.head().NumberU64()-paidIn.NumberU64())
	require.Equal(t, store.StatusPaid, e.get(inv.ID).Status, "11 confirmations are not enough")
	e.c.commit(1)
	e.mustSettle(s)
	got = e.get(inv.ID)
	require.Equal(t, store.StatusConfirmed, got.Status, "12 are")
	require.Equal(t, store.SweepQueued, got.SweepStatus)
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed}, e.events(inv.ID))
}

func TestChain_TwoPartialPayments(t *testing.T) {
	e := newChainEnv(t)
	inv := e.invoice(eth(1000))
	s := e.settler()
	e.c.pay(inv.DepositAddress, eth(250))
	e.c.commit(1)
	e.mustSettle(s)
	got := e.get(inv.ID)
	require.Equal(t, store.StatusPending, got.Status)
	require.True(t, got.Underpaid)
	e.c.pay(inv.DepositAddress, eth(750))
	e.c.commit(1)
	e.mustSettle(s)
	got = e.get(inv.ID)
	require.Equal(t, store.StatusPaid, got.Status)
	require.False(t, got.Underpaid)
	require.Equal(t, eth(1000), got.PaidWei)
	require.Equal(t, []string{store.EventInvoiceUnderpaid, store.EventInvoicePaid}, e.events(inv.ID))
}

func TestChain_Overpayment(t *testing.T) {
	e := newChainEnv(t)
	inv := e.invoice(eth(1000))
	s := e.settler()
	e.c.pay(inv.DepositAddress, eth(1200))
	e.c.commit(13)
	e.mustSettle(s)
	got := e.get(inv.ID)
	require.Equal(t, store.StatusConfirmed, got.Status)
	require.True(t, got.Overpaid)
	require.Equal(t, eth(1200), got.PaidWei)
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed}, e.events(inv.ID))
}

func TestChain_PaymentAfterExpiry_PaidLate(t *testing.T) {
	e := newChainEnv(t)
	inv := e.invoice(eth(1000))
	s := e.settler()
	e.c.commit(1)
	e.clock.Advance(16 * time.Minute)
	e.mustSettle(s)
	require.Equal(t, store.StatusExpired, e.get(inv.ID).Status)
	e.c.pay(inv.DepositAddress, eth(1000))
	e.c.commit(1)
	e.mustSettle(s)
	got := e.get(inv.ID)
	require.Equal(t, store.StatusPaid, got.Status)
	require.True(t, got.PaidLate)
	require.True(t, e.payments(inv.ID)[0].Late)
	require.Equal(t, []string{store.EventInvoiceExpired, store.EventInvoicePaid}, e.events(inv.ID))
}

func TestChain_ZeroValueAndUnrelatedTransactionsIgnored(t *testing.T) {
	e := newChainEnv(t)
	inv := e.invoice(eth(1000))
	s := e.settler()
	n := e.c.nonce()
	e.c.send(n, &inv.DepositAddress, store.Amount{}, 1) // zero value to the deposit address
	other := randAddr()
	e.c.send(n+1, &other, eth(1000), 1)   // unrelated recipient
	e.c.send(n+2, nil, store.Amount{}, 1) // contract creation
	e.c.commit(1)
	require.Len(t, e.c.head().Transactions(), 3)
	e.mustSettle(s)
	got := e.get(inv.ID)
	require.Equal(t, store.StatusPending, got.Status)
	require.True(t, got.PaidWei.IsZero())
	require.Empty(t, e.payments(inv.ID))
	require.Empty(t, e.events(inv.ID))
}

// The chain reorganises under a payment and the new branch does not
// contain it (the payer replaced it with another transaction of the same
// nonce): the payment is removed and the invoice goes back to PENDING.
func TestChain_PaymentReorgedOut_Reverted(t *testing.T) {
	e := newChainEnv(t)
	inv := e.invoice(eth(1000))
	s := e.settler()
	e.c.commit(3)
	parent := e.c.head()
	n := e.c.nonce()
	e.c.send(n, &inv.DepositAddress, eth(1000), 1)
	e.c.commit(1)
	e.mustSettle(s)
	require.Equal(t, store.StatusPaid, e.get(inv.ID).Status)

	require.NoError(t, e.c.b.Fork(parent.Hash()))
	elsewhere := randAddr()
	// Same nonce, higher fee. The pool learns of the fork asynchronously:
	// until it does, the nonce is "too low".
	var replacement common.Hash
	require.Eventually(t, func() bool {
		h, err := e.c.trySend(n, &elsewhere, eth(1), 3)
		replacement = h
		return err == nil
	}, eventually, 5*time.Millisecond)
	e.c.commit(3)
	included := false
	for num := parent.NumberU64() + 1; num <= e.c.head().NumberU64(); num++ {
		b, err := e.c.client.BlockByNumber(ctx, new(big.Int).SetUint64(num))
		require.NoError(t, err)
		for _, tx := range b.Transactions() {
			require.NotEqual(t, inv.DepositAddress, *tx.To(), "the payment is not in the new branch")
			included = included || tx.Hash() == replacement
		}
	}
	require.True(t, included)

	e.mustSettle(s)
	got := e.get(inv.ID)
	require.Equal(t, store.StatusPending, got.Status)
	require.True(t, got.PaidWei.IsZero())
	require.Empty(t, e.payments(inv.ID))
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceReverted}, e.events(inv.ID))
	reorgs, err := e.st.ListReorgs(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, reorgs, 1, "the indexer recorded the reorg settlement followed")

	e.c.commit(12)
	e.mustSettle(s)
	require.Equal(t, store.StatusPending, e.get(inv.ID).Status)
}

// The reorged payment comes back in a block of the new branch: it is
// recorded once, against the new block.
func TestChain_PaymentReincludedAfterReorg_CountedOnce(t *testing.T) {
	e := newChainEnv(t)
	inv := e.invoice(eth(1000))
	s := e.settler()
	e.c.commit(2)
	parent := e.c.head()
	txHash := e.c.pay(inv.DepositAddress, eth(1000))
	e.c.commit(1)
	orphan := e.c.head()
	e.mustSettle(s)

	require.NoError(t, e.c.b.Fork(parent.Hash()))
	// The orphaned transaction goes back to the pool (asynchronously), and
	// into the new branch.
	require.Eventually(t, func() bool {
		_, pending, err := e.c.client.TransactionByHash(ctx, txHash)
		return err == nil && pending
	}, eventually, 5*time.Millisecond)
	e.c.commit(2)
	e.mustSettle(s)
	ps := e.payments(inv.ID)
	require.Len(t, ps, 1)
	require.Equal(t, txHash, ps[0].TxHash)
	require.NotEqual(t, orphan.Hash(), ps[0].BlockHash)
	b, err := e.c.client.BlockByNumber(ctx, new(big.Int).SetUint64(ps[0].BlockNumber))
	require.NoError(t, err)
	require.Equal(t, b.Hash(), ps[0].BlockHash)
	require.Equal(t, store.StatusPaid, e.get(inv.ID).Status)
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceReverted, store.EventInvoicePaid}, e.events(inv.ID))
}

// A crash in the middle of a block (after some of its invoices were
// written, before commit) and a restart: every payment counted once, every
// event once.
func TestChain_CrashInTheMiddleOfABlock_RestartCountsOnce(t *testing.T) {
	for _, step := range []string{"block.payments", "block.invoice", "block.events", "block.commit", "block.committed"} {
		t.Run(step, func(t *testing.T) {
			e := newChainEnv(t)
			a, b := e.invoice(eth(1000)), e.invoice(eth(1000))
			e.c.commit(1)
			n := e.c.nonce()
			e.c.send(n, &a.DepositAddress, eth(1000), 1)
			e.c.send(n+1, &b.DepositAddress, eth(400), 1)
			e.c.send(n+2, &b.DepositAddress, eth(600), 1)
			e.c.commit(1)
			require.Len(t, e.c.head().Transactions(), 3, "the three payments are in one block")
			crashed := false
			s := e.settler(func(c *Config) {
				c.afterStep = func(got string) error {
					if got == step && !crashed {
						cur, err := e.st.GetCursor(ctx, store.CursorSettlement)
						// Crash in the block with the payments (the cursor
						// row is already updated in the open transaction,
						// but not visible here until it commits).
						if step == "block.committed" && err == nil && cur.BlockNumber == 2 ||
							step != "block.committed" && err == nil && cur.BlockNumber == 1 {
							crashed = true
							return errInjected
						}
					}
					return nil
				}
			})
			require.ErrorIs(t, e.settle(s), errInjected)
			require.True(t, crashed)
			e.mustSettle(e.settler()) // the restarted process
			e.mustSettle(e.settler())
			for _, inv := range []store.Invoice{a, b} {
				got := e.get(inv.ID)
				require.Equal(t, store.StatusPaid, got.Status, "invoice %d: %+v, payments %+v", inv.ID, got, e.payments(inv.ID))
				require.Equal(t, eth(1000), got.PaidWei)
				require.Equal(t, []string{store.EventInvoicePaid}, e.events(inv.ID))
			}
			require.Len(t, e.payments(a.ID), 1)
			require.Len(t, e.payments(b.ID), 2)
		})
	}
}
