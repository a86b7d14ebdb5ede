package settlement

import (
	"encoding/json"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/store"
)

// These tests pay token invoices with real ERC-20 transfers on the
// simulated chain, indexed by the real indexer into PostgreSQL.

// tokenEnv is a chainEnv whose chain has three tokens, all indexed: USDC
// (6 decimals, permit), USDT (6 decimals, no bool returns) and DAI (18
// decimals); the payer holds plenty of each.
type tokenEnv struct {
	*chainEnv
	usdc, usdt, dai *testtoken.Token
}

func newTokenEnv(t *testing.T) *tokenEnv {
	t.Parallel()
	c := newSimChain(t)
	opts := bind.NewKeyedTransactor(c.key, big.NewInt(1337))
	deploy := func(k testtoken.Kind, symbol string, decimals uint8) *testtoken.Token {
		tok, _, err := testtoken.Deploy(opts, c.client, k, "Test "+symbol, symbol, decimals)
		require.NoError(t, err)
		c.commit(1)
		supply, _ := new(big.Int).SetString("1000000000000000000000000000", 10)
		_, err = tok.Mint(opts, crypto.PubkeyToAddress(c.key.PublicKey), supply)
		require.NoError(t, err)
		c.commit(1)
		return tok
	}
	e := &tokenEnv{usdc: deploy(testtoken.Stable, "USDC", 6), usdt: deploy(testtoken.Tether, "USDT", 6),
		dai: deploy(testtoken.Stable, "DAI", 18)}
	e.chainEnv = startChainEnv(t, c, e.usdc.Address, e.usdt.Address, e.dai.Address)
	return e
}

func assetOf(tok *testtoken.Token) store.Asset {
	a := tok.Address
	return store.Asset{Symbol: tok.Symbol, Address: &a, Decimals: tok.Decimals}
}

// tokenInvoice creates a PENDING invoice for amount (a decimal string of
// whole units) of tok.
func (e *tokenEnv) tokenInvoice(tok *testtoken.Token, amount string) store.Invoice {
	e.t.Helper()
	a := assetOf(tok)
	units, err := a.Parse(amount)
	require.NoError(e.t, err)
	return e.invoice(units, func(inv *store.Invoice) { inv.SetAsset(a) })
}

// transfer sends units (base units) of tok to `to`; mined by the next
// commit.
func (e *tokenEnv) transfer(tok *testtoken.Token, to common.Address, units string) common.Hash {
	e.t.Helper()
	return e.transferAt(e.c.nonce(), tok, to, units)
}

func (e *tokenEnv) transferAt(nonce uint64, tok *testtoken.Token, to common.Address, units string) common.Hash {
	e.t.Helper()
	v, ok := new(big.Int).SetString(units, 10)
	require.True(e.t, ok)
	opts := bind.NewKeyedTransactor(e.c.key, big.NewInt(1337))
	opts.Nonce = new(big.Int).SetUint64(nonce)
	opts.GasLimit = 500_000
	tx, err := tok.Transfer(opts, to, v)
	require.NoError(e.t, err)
	e.c.waitPending(nonce, tx.Hash())
	return tx.Hash()
}

func TestChainTokens_ExactAmountAt6Decimals_PaidThenConfirmedAt12(t *testing.T) {
	e := newTokenEnv(t)
	inv := e.tokenInvoice(e.usdc, "12.5")
	require.Equal(t, "12500000", inv.AmountWei.String())
	s := e.settler()
	h := e.transfer(e.usdc, inv.DepositAddress, "12500000")
	e.c.commit(1)
	paidIn := e.c.head()
	e.mustSettle(s)

	got := e.get(inv.ID)
	require.Equal(t, store.StatusPaid, got.Status)
	require.Equal(t, "12500000", got.PaidWei.String())
	require.False(t, got.Underpaid || got.Overpaid || got.NeedsAttention)
	ps := e.payments(inv.ID)
	require.Len(t, ps, 1)
	require.Equal(t, h, ps[0].TxHash)
	require.Equal(t, e.usdc.Address, *ps[0].Token)
	require.False(t, ps[0].WrongAsset)
	require.GreaterOrEqual(t, ps[0].LogIndex, 0)
	require.Equal(t, paidIn.Hash(), ps[0].BlockHash)

	e.c.commit(11)
	e.mustSettle(s)
	require.Equal(t, store.StatusPaid, e.get(inv.ID).Status, "11 confirmations are not enough")
	e.c.commit(1)
	e.mustSettle(s)
	got = e.get(inv.ID)
	require.Equal(t, store.StatusConfirmed, got.Status)
	require.Equal(t, store.SweepQueued, got.SweepStatus)
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceConfirmed}, e.events(inv.ID))

	// The events carry the asset and both forms of the amounts.
	evs, err := e.st.ListEventsByInvoice(ctx, inv.ID)
	require.NoError(t, err)
	var data map[string]any
	require.NoError(t, json.Unmarshal(evs[0].Data, &data))
	require.Equal(t, map[string]any{"symbol": "USDC", "address": e.usdc.Address.Hex(), "decimals": float64(6)}, data["asset"])
	require.Equal(t, "12500000", data["amount"])
	require.Equal(t, "12.5", data["amount_formatted"])
	require.Equal(t, "12.5", data["paid_formatted"])
}

func TestChainTokens_ExactAmountAt18Decimals_SeveralTransfersSummed(t *testing.T) {
	e := newTokenEnv(t)
	inv := e.tokenInvoice(e.dai, "1.000000000000000003")
	s := e.settler()
	n := e.c.nonce()
	e.transferAt(n, e.dai, inv.DepositAddress, "1000000000000000000")
	e.transferAt(n+1, e.dai, inv.DepositAddress, "1")
	e.c.commit(1)
	e.mustSettle(s)
	got := e.get(inv.ID)
	require.Equal(t, store.StatusPending, got.Status)
	require.True(t, got.Underpaid)
	require.Equal(t, "1000000000000000001", got.PaidWei.String())
	require.Equal(t, "1.000000000000000001", got.Asset().Format(got.PaidWei))

	e.transfer(e.dai, inv.DepositAddress, "2")
	e.c.commit(1)
	e.mustSettle(s)
	got = e.get(inv.ID)
	require.Equal(t, store.StatusPaid, got.Status)
	require.False(t, got.Underpaid || got.Overpaid)
	require.Equal(t, inv.AmountWei, got.PaidWei, "exact to the last base unit")
	require.Len(t, e.payments(inv.ID), 3)
	require.Equal(t, []string{store.EventInvoiceUnderpaid, store.EventInvoicePaid}, e.events(inv.ID))
}

func TestChainTokens_UnderOverAndLate_SameRulesAsNative(t *testing.T) {
	e := newTokenEnv(t)
	under := e.tokenInvoice(e.usdt, "10")
	over := e.tokenInvoice(e.usdt, "10")
	late := e.tokenInvoice(e.usdc, "5")
	s := e.settler()
	n := e.c.nonce()
	e.transferAt(n, e.usdt, under.DepositAddress, "9999999")
	e.transferAt(n+1, e.usdt, over.DepositAddress, "10000001")
	e.c.commit(1)
	e.mustSettle(s)
	got := e.get(under.ID)
	require.Equal(t, store.StatusPending, got.Status)
	require.True(t, got.Underpaid)
	got = e.get(over.ID)
	require.Equal(t, store.StatusPaid, got.Status, "a USDT-shaped transfer (no bool) counts")
	require.True(t, got.Overpaid)
	require.Equal(t, "10000001", got.PaidWei.String())

	e.clock.Advance(16 * time.Minute)
	e.mustSettle(s)
	require.Equal(t, store.StatusExpired, e.get(late.ID).Status)
	e.transfer(e.usdc, late.DepositAddress, "5000000")
	e.c.commit(1)
	e.mustSettle(s)
	got = e.get(late.ID)
	require.Equal(t, store.StatusPaid, got.Status)
	require.True(t, got.PaidLate)
	require.True(t, e.payments(late.ID)[0].Late)
	require.Equal(t, []string{store.EventInvoiceExpired, store.EventInvoicePaid}, e.events(late.ID))
}

func TestChainTokens_WrongAsset_RecordedNotCountedFlagged(t *testing.T) {
	e := newTokenEnv(t)
	nativeToToken := e.tokenInvoice(e.usdc, "10")
	otherToken := e.tokenInvoice(e.usdc, "10")
	tokenToNative := e.invoice(eth(1000))
	both := e.tokenInvoice(e.usdc, "10")
	s := e.settler()
	n := e.c.nonce()
	e.c.send(n, &nativeToToken.DepositAddress, eth(1000), 1)
	e.transferAt(n+1, e.usdt, otherToken.DepositAddress, "10000000")
	e.transferAt(n+2, e.usdc, tokenToNative.DepositAddress, "10000000")
	e.transferAt(n+3, e.usdc, both.DepositAddress, "10000000")
	e.transferAt(n+4, e.dai, both.DepositAddress, "10000000")
	e.c.commit(1)
	e.mustSettle(s)

	for _, tc := range []struct {
		inv   store.Invoice
		token *common.Address
	}{
		{nativeToToken, nil}, {otherToken, &e.usdt.Address}, {tokenToNative, &e.usdc.Address},
	} {
		got := e.get(tc.inv.ID)
		require.Equal(t, tc.inv.Status, got.Status, "status untouched")
		require.True(t, got.PaidWei.IsZero(), "never counted")
		require.False(t, got.Underpaid)
		require.True(t, got.NeedsAttention)
		ps := e.payments(tc.inv.ID)
		require.Len(t, ps, 1, "recorded")
		require.True(t, ps[0].WrongAsset)
		require.Equal(t, tc.token, ps[0].Token)
		require.Equal(t, []string{store.EventInvoiceWrongAsset}, e.events(tc.inv.ID))
	}
	got := e.get(both.ID)
	require.Equal(t, store.StatusPaid, got.Status, "the right asset counts beside the wrong one")
	require.Equal(t, "10000000", got.PaidWei.String())
	require.True(t, got.NeedsAttention)
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceWrongAsset}, e.events(both.ID))

	// A wrong-asset payment never holds back confirmation.
	e.c.commit(12)
	e.mustSettle(s)
	require.Equal(t, store.StatusConfirmed, e.get(both.ID).Status)
	require.Equal(t, store.StatusPending, e.get(otherToken.ID).Status)
}

// paidThenReorgedOut pays inv amount base units of USDC, settles it PAID,
// then forks the chain below the payment onto a branch where the payer's
// nonce went elsewhere, and settles again.
func (e *tokenEnv) paidThenReorgedOut(inv store.Invoice, amount string) {
	e.t.Helper()
	t := e.t
	s := e.settler()
	e.c.commit(2)
	parent := e.c.head()
	n := e.c.nonce()
	e.transferAt(n, e.usdc, inv.DepositAddress, amount)
	e.c.commit(1)
	e.mustSettle(s)
	require.Equal(t, store.StatusPaid, e.get(inv.ID).Status)

	require.NoError(t, e.c.b.Fork(parent.Hash()))
	elsewhere := randAddr()
	require.Eventually(t, func() bool {
		_, err := e.c.trySend(n, &elsewhere, eth(1), 3)
		return err == nil
	}, eventually, 5*time.Millisecond)
	e.c.commit(3)
	e.mustSettle(s)
}

// The chain reorganises under a token payment and the new branch does not
// contain it: the payment is removed and the invoice goes back to PENDING.
func TestChainTokens_PaymentReorgedOut_Reverted(t *testing.T) {
	e := newTokenEnv(t)
	inv := e.tokenInvoice(e.usdc, "7")
	e.paidThenReorgedOut(inv, "7000000")
	got := e.get(inv.ID)
	require.Equal(t, store.StatusPending, got.Status)
	require.True(t, got.PaidWei.IsZero())
	require.Empty(t, e.payments(inv.ID))
	require.Equal(t, []string{store.EventInvoicePaid, store.EventInvoiceReverted}, e.events(inv.ID))
	var left int
	require.NoError(t, e.st.InTx(ctx, func(tx store.Tx) error {
		ts, err := tx.ListTokenTransfersByAddress(ctx, inv.DepositAddress, 0, 0, 10)
		left = len(ts)
		return err
	}))
	require.Zero(t, left, "the indexer removed the orphaned transfer")
}
