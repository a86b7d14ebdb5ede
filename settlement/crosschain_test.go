package settlement

import (
	"context"
	"encoding/json"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// A fiat invoice that accepts an asset on two chains is paid on either
// (docs/chains.md, "Paid on any quoted chain"). Two simulated chains,
// 1337 and 1338, each indexed by its own indexer into one PostgreSQL
// database and settled by its own Settler; one payer key on both, which
// deploys a USDC at the same nonce on each: the same contract address on
// both chains.

// xchain is chains 1337 (a) and 1338 (b) with a USDC of one address on
// both.
type xchain struct {
	a, b       *chainEnv
	usdcA      *testtoken.Token // on 1337
	usdcB      *testtoken.Token // on 1338, the same address
	price      store.Fiat
	ethAmount  store.Amount // 49.90 EUR at 2,000 EUR per ETH
	usdcAmount store.Amount // 49.90 EUR at 0.80 EUR per USDC
}

func newXChain(t *testing.T) *xchain {
	t.Parallel()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	// Two indexers and two settlers, each holding its lock's session, and
	// their transactions: more than pgtest's pool.
	db, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Config{MaxOpenConns: 12, MaxIdleConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	chain := func(id int64) (*simChain, *testtoken.Token) {
		balance, _ := new(big.Int).SetString("1000000000000000000000000", 10)
		b := simchain.New(t, types.GenesisAlloc{crypto.PubkeyToAddress(key.PublicKey): {Balance: balance}},
			simchain.WithChainID(uint64(id)))
		c := &simChain{t: t, b: b, client: b.Client(), key: key, signer: types.LatestSignerForChainID(big.NewInt(id)), id: id}
		opts := bind.NewKeyedTransactor(key, big.NewInt(id))
		tok, _, err := testtoken.Deploy(opts, c.client, testtoken.Stable, "Test USDC", "USDC", 6)
		require.NoError(t, err)
		c.commit(1)
		supply, _ := new(big.Int).SetString("1000000000000000000000", 10)
		_, err = tok.Mint(opts, crypto.PubkeyToAddress(key.PublicKey), supply)
		require.NoError(t, err)
		c.commit(1)
		return c, tok
	}
	env := func(c *simChain, f *fixture, tok common.Address) *chainEnv {
		runIndexer(t, c, f.st, tok)
		return &chainEnv{fixture: f, c: c}
	}
	ca, ta := chain(1337)
	cb, tb := chain(1338)
	require.Equal(t, ta.Address, tb.Address, "one deployer, one nonce: one address on both chains")
	fa := newFixture(t, db.Chain(1337))
	fb := &fixture{t: t, st: db.Chain(1338), clock: fa.clock, merchant: fa.merchant}
	x := &xchain{a: env(ca, fa, ta.Address), b: env(cb, fb, tb.Address), usdcA: ta, usdcB: tb,
		price: store.MustParseFiat("49.90", "EUR")}
	x.ethAmount = x.amount("2000", 18)
	x.usdcAmount = x.amount("0.8", 6)
	return x
}

func (x *xchain) amount(rate string, decimals uint8) store.Amount {
	a, err := store.QuoteAmount(x.price, store.MustParseDecimal(rate), decimals)
	require.NoError(x.a.t, err)
	return a
}

// quote is a locked quote of 49.90 EUR in asset at rate on chain (0: the
// invoice's, as quotes made before chains were quoted), with a payment
// URI naming the chain.
func (x *xchain) quote(a store.Asset, rate string, chain uint64) store.Quote {
	r := store.MustParseDecimal(rate)
	amount, err := store.QuoteAmount(x.price, r, a.Decimals)
	require.NoError(x.a.t, err)
	now := x.a.clock.Now()
	uri := "ethereum:pay@" + big.NewInt(int64(max(chain, 1337))).String() + "?asset=" + a.Symbol
	return store.Quote{Asset: a, ChainID: chain, Amount: amount, Price: x.price, Rate: r, CreatedAt: now,
		ExpiresAt: now.Add(15 * time.Minute), PaymentURI: uri}
}

func (x *xchain) usdc() store.Asset { return assetOf(x.usdcA) }

// fiatInvoice creates a PENDING fiat invoice of chain 1337 with these
// quotes, the first its own asset.
func (x *xchain) fiatInvoice(quotes ...store.Quote) store.Invoice {
	x.a.t.Helper()
	p := &store.Pricing{Price: x.price, Tolerance: store.Tolerance{Amount: store.Fiat{Currency: x.price.Currency}},
		Quotes: quotes}
	require.NoError(x.a.t, p.Validate())
	return x.a.invoice(quotes[0].Amount, func(inv *store.Invoice) {
		inv.SetAsset(quotes[0].Asset)
		inv.PaymentURI = quotes[0].PaymentURI
		inv.Pricing = p
	})
}

// ethOnBoth is a fiat invoice of chain 1337 quoting ETH on 1337 (a quote
// naming no chain: the invoice's) and on 1338, at the same rate.
func (x *xchain) ethOnBoth() store.Invoice {
	eth := store.NativeAsset("ETH")
	return x.fiatInvoice(x.quote(eth, "2000", 0), x.quote(eth, "2000", 1338))
}

// transfer sends units of tok on c to `to`; mined by the next commit.
func transferOn(c *simChain, tok *testtoken.Token, to common.Address, units store.Amount) common.Hash {
	c.t.Helper()
	opts := bind.NewKeyedTransactor(c.key, big.NewInt(c.id))
	n := c.nonce()
	opts.Nonce = new(big.Int).SetUint64(n)
	opts.GasLimit = 500_000
	tx, err := tok.Transfer(opts, to, units.Big())
	require.NoError(c.t, err)
	c.waitPending(n, tx.Hash())
	return tx.Hash()
}

func snapshotOf(t *testing.T, st store.Store, id int64, typ string) api.Invoice {
	t.Helper()
	evs, err := st.ListEventsByInvoice(ctx, id)
	require.NoError(t, err)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			var snap api.Invoice
			require.NoError(t, json.Unmarshal(evs[i].Data, &snap))
			return snap
		}
	}
	t.Fatalf("no %s event for invoice %d", typ, id)
	return api.Invoice{}
}

// Paid on chain 1338, which it quoted: the invoice of chain 1337 moves to
// chain 1338 in the block's transaction — its chain, asset, amount and
// payment URI are the 1338 quote's, that quote first, the quote that named
// no chain now naming 1337 — and is PAID there. Chain 1337's blocks,
// however many, do not confirm it; twelve of chain 1338's do, and its
// sweep is queued on chain 1338. A later payment on chain 1337 is a
// wrong-network payment.
func TestXChain_PaidOnAnotherQuotedChain_MovesThereAndConfirmsOnItsBlocks(t *testing.T) {
	x := newXChain(t)
	inv := x.ethOnBoth()
	sa, sb := x.a.settler(), x.b.settler()
	x.a.mustSettle(sa)

	payTx := x.b.c.pay(inv.DepositAddress, x.ethAmount)
	x.b.c.commit(1)
	x.b.mustSettle(sb)

	got := x.b.get(inv.ID)
	require.Equal(t, store.StatusPaid, got.Status)
	require.EqualValues(t, 1338, got.ChainID, "moved to the chain it was paid on")
	require.Nil(t, got.TokenAddress)
	require.Equal(t, "ETH", got.AssetSymbol)
	require.Equal(t, x.ethAmount.String(), got.AmountWei.String(), "the 1338 quote's amount")
	require.Equal(t, x.ethAmount.String(), got.PaidWei.String(), "paid in its own asset, now 1338's ETH")
	require.Equal(t, "ethereum:pay@1338?asset=ETH", got.PaymentURI, "the 1338 quote's payment URI")
	require.Equal(t, "49.90 EUR", paidValue(got))
	require.False(t, got.Underpaid || got.Overpaid || got.NeedsAttention)
	require.Len(t, got.Pricing.Quotes, 2)
	require.EqualValues(t, 1338, got.Pricing.Quotes[0].ChainID, "its own quote first")
	require.EqualValues(t, 1337, got.Pricing.Quotes[1].ChainID, "the quote that named no chain keeps chain 1337")
	require.Equal(t, inv.Version+2, got.Version, "moved, then paid")
	ps := x.b.payments(inv.ID)
	require.Len(t, ps, 1)
	require.Equal(t, payTx, ps[0].TxHash)
	require.EqualValues(t, 1338, ps[0].ChainID)
	require.True(t, ps[0].Counted())
	require.Equal(t, []string{store.EventInvoicePaid}, x.b.events(inv.ID), "no event of its own for the move")
	snap := snapshotOf(t, x.b.st, inv.ID, store.EventInvoicePaid)
	require.EqualValues(t, 1338, snap.ChainID, "the event's snapshot is on the new chain")
	require.Equal(t, x.ethAmount.String(), snap.AmountWei.String())
	require.Len(t, snap.Payments, 1)
	require.NotNil(t, snap.Payments[0].Value)
	require.Equal(t, "49.90 EUR", snap.Payments[0].Value.String())

	// Chain 1337 grows far past twelve blocks: its settlement neither
	// confirms nor expires the invoice (no longer its chain's).
	x.a.c.commit(20)
	x.a.mustSettle(sa)
	require.Equal(t, store.StatusPaid, x.a.get(inv.ID).Status)
	x.b.c.commit(11)
	x.b.mustSettle(sb)
	require.Equal(t, store.StatusPaid, x.b.get(inv.ID).Status, "eleven of chain 1338's blocks")
	x.b.c.commit(1)
	x.b.mustSettle(sb)
	got = x.b.get(inv.ID)
	require.Equal(t, store.StatusConfirmed, got.Status, "twelve of chain 1338's blocks")
	require.Equal(t, store.SweepQueued, got.SweepStatus)
	require.True(t, got.SweepAsset.IsNative())
	queued, err := x.b.st.ListInvoicesBySweepStatus(ctx, store.SweepQueued, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{inv.ID}, invoiceIDsOf(queued), "chain 1338's sweep finds it")
	queued, err = x.a.st.ListInvoicesBySweepStatus(ctx, store.SweepQueued, 0, 10)
	require.NoError(t, err)
	require.Empty(t, queued, "chain 1337's sweep does not")

	// Paid again on chain 1337, whose quote it still has: a wrong-network
	// payment now (it was paid on chain 1338).
	wrongTx := x.a.c.pay(inv.DepositAddress, x.ethAmount)
	x.a.c.commit(1)
	x.a.mustSettle(sa)
	got = x.a.get(inv.ID)
	require.Equal(t, store.StatusConfirmed, got.Status)
	require.EqualValues(t, 1338, got.ChainID)
	require.Equal(t, "49.90 EUR", paidValue(got), "not counted")
	require.True(t, got.NeedsAttention)
	for _, p := range x.a.payments(inv.ID) {
		if p.TxHash == wrongTx {
			require.EqualValues(t, 1337, p.ChainID)
			require.True(t, p.WrongNetwork)
		}
	}
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed, store.EventInvoiceWrongNetwork},
		x.a.events(inv.ID))
}

func invoiceIDsOf(invs []store.Invoice) []int64 {
	ids := []int64{}
	for _, inv := range invs {
		ids = append(ids, inv.ID)
	}
	return ids
}

// Paid (partly) on its own chain first: the invoice stays on chain 1337,
// and a full payment on chain 1338, which it quoted, is a wrong-network
// payment — an invoice is paid on one chain.
func TestXChain_PartlyPaidOnItsOwnChainFirst_StaysAndTheOtherChainIsWrongNetwork(t *testing.T) {
	x := newXChain(t)
	inv := x.fiatInvoice(x.quote(x.usdc(), "0.8", 1337), x.quote(store.NativeAsset("ETH"), "2000", 1338))
	sa, sb := x.a.settler(), x.b.settler()

	half, _ := x.usdcAmount.Sub(store.NewAmount(x.usdcAmount.Uint256().Uint64() / 2))
	transferOn(x.a.c, x.usdcA, inv.DepositAddress, half)
	x.a.c.commit(1)
	x.a.mustSettle(sa)
	got := x.a.get(inv.ID)
	require.Equal(t, store.StatusPending, got.Status)
	require.True(t, got.Underpaid)
	require.EqualValues(t, 1337, got.ChainID)

	x.b.c.pay(inv.DepositAddress, x.ethAmount)
	x.b.c.commit(1)
	x.b.mustSettle(sb)
	got = x.b.get(inv.ID)
	require.EqualValues(t, 1337, got.ChainID, "it has a counted payment on chain 1337: it stays")
	require.Equal(t, store.StatusPending, got.Status, "the 1338 payment does not count")
	require.Equal(t, half.String(), got.PaidWei.String())
	require.True(t, got.Underpaid)
	require.True(t, got.NeedsAttention)
	require.Equal(t, x.usdcA.Address, *got.TokenAddress, "its own asset is unchanged")
	var wrong []store.Payment
	for _, p := range x.b.payments(inv.ID) {
		if p.WrongNetwork {
			wrong = append(wrong, p)
		}
	}
	require.Len(t, wrong, 1)
	require.EqualValues(t, 1338, wrong[0].ChainID)
	require.Equal(t, []string{store.EventInvoiceUnderpaid, store.EventInvoiceWrongNetwork}, x.b.events(inv.ID))
}

// The same USDC contract address on both chains, quoted at a different
// rate on each: a transfer on chain 1338 is valued at the 1338 quote only
// (and moves the invoice there); on an invoice that quoted that address
// on chain 1338 only, a transfer of it on its own chain 1337 does not
// count (a wrong asset: its quote is another chain's), and one on chain
// 1338 does.
func TestXChain_SameTokenAddressOnBothChains_CountedAndValuedByTheQuoteOfItsChain(t *testing.T) {
	x := newXChain(t)
	both := x.fiatInvoice(x.quote(x.usdc(), "0.8", 1337), x.quote(x.usdc(), "0.5", 1338))
	elsewhere := x.fiatInvoice(x.quote(store.NativeAsset("ETH"), "2000", 1337), x.quote(x.usdc(), "0.5", 1338))
	sa, sb := x.a.settler(), x.b.settler()

	// 62.375 USDC on chain 1338: at its 0.50 quote 31.18 EUR (at chain
	// 1337's 0.80 it would be the whole 49.90).
	transferOn(x.b.c, x.usdcB, both.DepositAddress, x.usdcAmount)
	x.b.c.commit(1)
	x.b.mustSettle(sb)
	got := x.b.get(both.ID)
	require.EqualValues(t, 1338, got.ChainID)
	require.Equal(t, store.StatusPending, got.Status)
	require.Equal(t, "31.18 EUR", paidValue(got), "valued at the quote of the chain it arrived on")
	require.True(t, got.Underpaid)
	require.Equal(t, x.amount("0.5", 6).String(), got.AmountWei.String(), "the 1338 quote's amount")
	require.Equal(t, x.usdcAmount.String(), got.PaidWei.String())
	snap := snapshotOf(t, x.b.st, both.ID, store.EventInvoiceUnderpaid)
	require.EqualValues(t, 1338, snap.ChainID)
	require.Len(t, snap.Payments, 1)
	require.Equal(t, "31.18 EUR", snap.Payments[0].Value.String(), "the event values it at the 1338 quote")
	// The rest, on chain 1338: paid.
	rest, _ := x.amount("0.5", 6).Sub(x.usdcAmount)
	transferOn(x.b.c, x.usdcB, both.DepositAddress, rest)
	x.b.c.commit(1)
	x.b.mustSettle(sb)
	got = x.b.get(both.ID)
	require.Equal(t, store.StatusPaid, got.Status)
	require.Equal(t, "49.90 EUR", paidValue(got))
	x.b.c.commit(12)
	x.b.mustSettle(sb)
	got = x.b.get(both.ID)
	require.Equal(t, store.StatusConfirmed, got.Status)
	require.Equal(t, x.usdcB.Address, *got.SweepAsset.Address, "the lead is chain 1338's USDC")

	// USDC on chain 1337 to the invoice that quoted it on chain 1338 only:
	// a wrong asset on its own chain, not counted.
	transferOn(x.a.c, x.usdcA, elsewhere.DepositAddress, x.amount("0.5", 6))
	x.a.c.commit(1)
	x.a.mustSettle(sa)
	got = x.a.get(elsewhere.ID)
	require.EqualValues(t, 1337, got.ChainID)
	require.Equal(t, store.StatusPending, got.Status)
	require.Nil(t, got.PaidValue, "nothing counted")
	require.True(t, got.NeedsAttention)
	ps := x.a.payments(elsewhere.ID)
	require.Len(t, ps, 1)
	require.True(t, ps[0].WrongAsset)
	require.False(t, ps[0].WrongNetwork)
	// On chain 1338 it counts, and moves the invoice there.
	transferOn(x.b.c, x.usdcB, elsewhere.DepositAddress, x.amount("0.5", 6))
	x.b.c.commit(1)
	x.b.mustSettle(sb)
	got = x.b.get(elsewhere.ID)
	require.EqualValues(t, 1338, got.ChainID)
	require.Equal(t, store.StatusPaid, got.Status)
	require.Equal(t, "49.90 EUR", paidValue(got))
	require.Equal(t, []string{store.EventInvoiceWrongAsset, store.EventInvoicePaid}, x.b.events(elsewhere.ID))
}

// Both chains' settlements see a payment of the invoice in the same
// round: the first to lock the invoice in its block's transaction wins —
// the invoice is paid on its chain — and the other, which waits for the
// lock and then sees a counted payment, records a wrong-network payment.
// Either order, exactly one chain wins.
func TestXChain_BothChainsPayInTheSameRound_ExactlyOneWins(t *testing.T) {
	for _, first := range []uint64{1337, 1338} {
		t.Run(big.NewInt(int64(first)).String()+"_first", func(t *testing.T) {
			x := newXChain(t)
			inv := x.ethOnBoth()
			txs := map[uint64]common.Hash{
				1337: x.a.c.pay(inv.DepositAddress, x.ethAmount),
				1338: x.b.c.pay(inv.DepositAddress, x.ethAmount),
			}
			x.a.c.commit(1)
			x.b.c.commit(1)
			envs := map[uint64]*chainEnv{1337: x.a, 1338: x.b}
			winner, loser := envs[first], envs[2675-first]
			inTx, release, started := make(chan struct{}), make(chan struct{}), make(chan struct{})
			var once, onceStarted bool
			sw := winner.settler(func(c *Config) {
				c.afterStep = func(step string) error {
					if step == "block.payments" && !once {
						once = true
						close(inTx)
						<-release // holds the invoice's row lock
					}
					return nil
				}
			})
			sl := loser.settler(func(c *Config) {
				c.afterStep = func(step string) error {
					if step == "block.cursor" && !onceStarted {
						onceStarted = true
						close(started)
					}
					return nil
				}
			})
			done := make(chan error, 2)
			go func() { done <- winner.settle(sw) }()
			<-inTx
			go func() { done <- loser.settle(sl) }()
			<-started
			close(release)
			require.NoError(t, <-done)
			require.NoError(t, <-done)

			got := winner.get(inv.ID)
			require.Equal(t, store.StatusPaid, got.Status)
			require.Equal(t, first, got.ChainID, "paid on the chain that locked it first")
			require.Equal(t, "49.90 EUR", paidValue(got), "one payment counted")
			require.True(t, got.NeedsAttention)
			ps := winner.payments(inv.ID)
			require.Len(t, ps, 2)
			for _, p := range ps {
				require.Equal(t, txs[p.ChainID], p.TxHash)
				require.Equal(t, p.ChainID != first, p.WrongNetwork, "chain %d's payment", p.ChainID)
			}
			require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceWrongNetwork}, winner.events(inv.ID))
		})
	}
}

// A reorg of chain 1338 removes the payment that moved the invoice there:
// the invoice stays on chain 1338, PENDING (invoice.reverted), with no
// counted payment — so a later payment on chain 1337, which it still
// quotes, moves it back and pays it there, confirmed by chain 1337's
// blocks.
func TestXChain_ReorgRemovesTheMovingPayment_StaysPendingThenPaidOnTheOtherChain(t *testing.T) {
	x := newXChain(t)
	inv := x.ethOnBoth()
	sa, sb := x.a.settler(), x.b.settler()

	x.b.c.commit(2)
	parent := x.b.c.head()
	n := x.b.c.nonce()
	x.b.c.send(n, &inv.DepositAddress, x.ethAmount, 1)
	x.b.c.commit(1)
	x.b.mustSettle(sb)
	got := x.b.get(inv.ID)
	require.Equal(t, store.StatusPaid, got.Status)
	require.EqualValues(t, 1338, got.ChainID)

	// Chain 1338 reorganises: the payment is replaced (same nonce, higher
	// fee) by one elsewhere.
	require.NoError(t, x.b.c.b.Fork(parent.Hash()))
	elsewhere := randAddr()
	require.Eventually(t, func() bool {
		_, err := x.b.c.trySend(n, &elsewhere, eth(1), 3)
		return err == nil
	}, eventually, 5*time.Millisecond)
	x.b.c.commit(3)
	x.b.mustSettle(sb)
	got = x.b.get(inv.ID)
	require.Equal(t, store.StatusPending, got.Status, "the payment is gone")
	require.EqualValues(t, 1338, got.ChainID, "it stays where it moved")
	require.Nil(t, got.PaidValue)
	require.True(t, got.PaidWei.IsZero())
	require.Empty(t, x.b.payments(inv.ID))
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceReverted}, x.b.events(inv.ID))

	// Paid on chain 1337 (its first quote, which now names chain 1337):
	// it moves back and is paid and confirmed there.
	x.a.c.pay(inv.DepositAddress, x.ethAmount)
	x.a.c.commit(1)
	x.a.mustSettle(sa)
	got = x.a.get(inv.ID)
	require.Equal(t, store.StatusPaid, got.Status)
	require.EqualValues(t, 1337, got.ChainID)
	require.Equal(t, "ethereum:pay@1337?asset=ETH", got.PaymentURI)
	require.EqualValues(t, 1337, got.Pricing.Quotes[0].ChainID)
	require.Equal(t, "49.90 EUR", paidValue(got))
	x.b.c.commit(12)
	x.b.mustSettle(sb)
	require.Equal(t, store.StatusPaid, x.b.get(inv.ID).Status, "chain 1338's blocks do not confirm it")
	x.a.c.commit(12)
	x.a.mustSettle(sa)
	require.Equal(t, store.StatusConfirmed, x.a.get(inv.ID).Status)
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceReverted, store.EventInvoicePaid,
		store.EventInvoiceConfirmed}, x.a.events(inv.ID))
}
