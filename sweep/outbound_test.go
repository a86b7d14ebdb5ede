package sweep

import (
	"context"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/store"
)

// A payout from the merchant's payout wallet: the sweep wallet funds
// exactly its gas, the payout wallet sends exactly the amount once, the
// events follow its states, and the ledger of the run reconciles with the
// chain to the wei.
func TestOutbound_PayoutFromPayoutWallet_ExactAmountOnceAndTheLedgerReconciles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.sweeper(Config{Confirmations: 2})
	e.index()
	require.NoError(t, s.RunOnce(ctx)) // records the wallets, starts the ledger
	w, err := e.st.GetPayoutWallet(ctx, e.merchant.ID)
	require.NoError(t, err)
	require.Equal(t, e.payoutWallet(), w.Address, "the payout wallet is m/44'/60'/2'/0/<merchant id>")

	// The merchant funds its payout wallet from outside.
	e.sendFrom(e.payerKey, e.payoutWallet(), eth(5))
	e.sim.Commit()
	dest := randAddr()
	amount := new(big.Int).Add(eth(1), big.NewInt(7)) // 1 coin and 7 wei
	o := e.outbound(store.OutboundPayout, amount, dest)

	e.driveIndexed(20, e.outboundIs(o.ID, store.OutboundConfirmed), s)
	got := e.getOutbound(o.ID)
	require.Equal(t, 0, e.balance(dest).Cmp(amount), "exactly the amount arrived")
	require.Equal(t, store.SourcePayoutWallet, got.Source)
	require.Equal(t, e.payoutWallet(), *got.FromAddress)
	require.NotNil(t, got.TxHash)
	require.NotNil(t, got.ConfirmedAt)
	require.Empty(t, got.Error)
	sends := e.outboundTxs(o.ID, store.SweepTxOutbound)
	require.Len(t, sends, 1, "one send, signed once")
	require.Equal(t, *got.TxHash, sends[0].TxHash)
	fundings := e.outboundTxs(o.ID, store.SweepTxFunding)
	require.Len(t, fundings, 1, "the sweep wallet funded its gas")
	require.Equal(t, e.sweepWallet(), fundings[0].From)
	require.Equal(t, 0, fundings[0].ValueWei.Cmp(amountOf(gasCost(transferGas, sends[0].MaxFeeWei.Big()))),
		"exactly the send's gas at the fee cap it is priced at")
	require.Equal(t, []string{"payout.broadcast", "payout.confirmed"}, e.eventTypesOf(0, "payout."))

	// The ledger: the payout, the gas funding, both fees.
	kinds := map[string]int{}
	for _, en := range e.ledgerOf(o.ID) {
		kinds[en.Kind]++
		if en.Kind == store.LedgerPayout {
			require.Equal(t, amount.String(), en.Amount.String())
			require.Equal(t, dest, *en.To)
			require.Equal(t, e.merchant.ID, *en.MerchantID)
		}
	}
	require.Equal(t, map[string]int{store.LedgerPayout: 1, store.LedgerGasFunding: 1, store.LedgerGasFee: 2}, kinds)

	// The follower catches up with the confirmations; then every wallet's
	// ledger balance is the chain's.
	for range 3 {
		e.sim.Commit()
		e.index()
		require.NoError(t, s.RunOnce(ctx))
	}
	rec := e.reconcile()
	roles := map[string]bool{}
	for _, wb := range rec.Wallets {
		roles[wb.Role] = true
	}
	require.True(t, roles[store.WalletPayout] && roles[store.WalletSweep] && roles[store.WalletFunder], "%v", rec.Wallets)
}

// A token payout: the payout wallet holds only the token; the sweep wallet
// funds the transfer's gas (the fund path of token sweeps), the token's
// Transfer event is the proof, and the ledger's token entry has its log.
func TestOutbound_TokenPayout_PayoutWalletHoldsOnlyTheToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.deployToken(testtoken.Stable, 6)
	s := e.sweeper(Config{Confirmations: 2, Tokens: []common.Address{tok.Address}})
	e.index()
	require.NoError(t, s.RunOnce(ctx))
	_, err := tok.Mint(e.payerOpts(), e.payoutWallet(), big.NewInt(50_000_000))
	require.NoError(t, err)
	e.sim.Commit()
	require.Zero(t, e.balance(e.payoutWallet()).Sign(), "no native coin in the payout wallet")

	dest := randAddr()
	o := e.outbound(store.OutboundPayout, big.NewInt(12_500_001), dest, func(o *store.Outbound) {
		token := tok.Address
		o.SetAsset(store.Asset{Symbol: tok.Symbol, Address: &token, Decimals: 6})
	})
	e.driveIndexed(20, e.outboundIs(o.ID, store.OutboundConfirmed), s)
	require.Equal(t, "12500001", e.tokenBalance(tok, dest).String())
	require.Equal(t, "37499999", e.tokenBalance(tok, e.payoutWallet()).String())
	var tokenEntry *store.LedgerEntry
	for _, en := range e.ledgerOf(o.ID) {
		if en.Kind == store.LedgerPayout {
			tokenEntry = &en
		}
	}
	require.NotNil(t, tokenEntry)
	require.Equal(t, tok.Address, *tokenEntry.Token)
	require.NotNil(t, tokenEntry.LogIndex, "a token movement names its Transfer log")
	for range 3 {
		e.sim.Commit()
		e.index()
		require.NoError(t, s.RunOnce(ctx))
	}
	e.reconcile(tok.Address)
}

// A payout wallet short of the amount: nothing is signed (no gas funded
// either); the payout waits, says why, and goes once the wallet is funded.
func TestOutbound_PayoutWalletTooLow_WaitsWithTheReasonThenSends(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.sweeper(Config{Confirmations: 1, RetryBackoff: time.Second})
	require.NoError(t, s.RunOnce(ctx))
	o := e.outbound(store.OutboundPayout, eth(2), randAddr())
	for range 3 {
		require.NoError(t, s.RunOnce(ctx))
		e.sim.Commit()
		e.clock.Advance(2 * time.Second)
	}
	got := e.getOutbound(o.ID)
	require.Equal(t, store.OutboundQueued, got.Status)
	require.Equal(t, ReasonSenderLow, got.Error)
	require.Empty(t, e.outboundTxs(o.ID, store.SweepTxFunding), "no gas is funded for a send that cannot be made")

	e.sendFrom(e.payerKey, e.payoutWallet(), eth(3))
	e.sim.Commit()
	e.clock.Advance(2 * time.Second)
	e.drive(10, e.outboundIs(o.ID, store.OutboundConfirmed), s)
	require.Equal(t, 0, e.balance(*o.Destination).Cmp(eth(2)))
	require.Empty(t, e.getOutbound(o.ID).Error)
}

// A refund of an overpayment while the money is still at the deposit
// address: it leaves from there (its gas funded), the invoice's sweep waits
// for it and then sweeps the rest from the deposit's next nonce; the
// merchant gets the invoice's amount, the payer the overpaid part, and the
// ledger reconciles.
func TestOutbound_RefundOverpaymentFromTheDeposit_BeforeTheSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.sweeper(Config{Confirmations: 2})
	e.index()
	require.NoError(t, s.RunOnce(ctx))
	inv := e.paidInvoice(nil, eth(3), eth(4)) // overpaid by one coin
	payer := randAddr()
	o := e.outbound(store.OutboundRefund, eth(1), payer, func(o *store.Outbound) {
		o.InvoiceID, o.Reason = &inv.ID, store.RefundOverpayment
	})
	e.driveIndexed(30, func() bool {
		return e.getOutbound(o.ID).Status == store.OutboundConfirmed && e.invoice(inv.ID).SweepStatus == store.SweepSwept
	}, s)
	got := e.getOutbound(o.ID)
	require.Equal(t, store.SourceDeposit, got.Source)
	require.Equal(t, inv.DepositAddress, *got.FromAddress)
	require.Equal(t, 0, e.balance(payer).Cmp(eth(1)), "the payer got the overpaid part back")
	swept := e.invoice(inv.ID)
	require.Equal(t, store.StatusSettled, swept.Status)
	require.Equal(t, 0, swept.SweptWei.Cmp(amountOf(e.balance(e.merchant.SettlementAddress))))
	require.Equal(t, eth(3).String(), e.balance(e.merchant.SettlementAddress).String(),
		"the merchant got exactly what the payer paid less the refund: none of the refund's gas money")
	require.Equal(t, 0, swept.DustWei.Cmp(amountOf(e.balance(inv.DepositAddress))), "the unspent gas stays at the deposit, as its dust")
	require.EqualValues(t, 2, e.nonce(inv.DepositAddress), "the refund, then the sweep from the next nonce")
	sweep := e.oneOf(inv.ID, store.SweepTxSweep)
	require.EqualValues(t, 1, sweep.Nonce)
	require.Equal(t, []string{"refund.broadcast", "refund.confirmed"}, e.eventTypesOf(inv.ID, "refund."))
	for range 3 {
		e.sim.Commit()
		e.index()
		require.NoError(t, s.RunOnce(ctx))
	}
	e.reconcile()
}

// A token paid to a native invoice that stays PENDING (never swept): its
// refund leaves straight from the deposit address, the sweep wallet
// funding the transfer's gas.
func TestOutbound_RefundWrongAssetTokenFromTheDeposit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.deployToken(testtoken.Stable, 6)
	s := e.sweeper(Config{Confirmations: 2, Tokens: []common.Address{tok.Address}})
	_, err := tok.Mint(e.payerOpts(), crypto.PubkeyToAddress(e.payerKey.PublicKey), big.NewInt(1_000_000_000))
	require.NoError(t, err)
	e.sim.Commit()
	e.index()
	require.NoError(t, s.RunOnce(ctx))
	inv := e.openInvoice(nil, eth(1))
	e.payInvoice(inv, tok, big.NewInt(9_990_000), true)
	dest := randAddr()
	o := e.outbound(store.OutboundRefund, big.NewInt(9_990_000), dest, func(o *store.Outbound) {
		token := tok.Address
		o.InvoiceID, o.Reason = &inv.ID, store.RefundWrongAsset
		o.SetAsset(store.Asset{Symbol: tok.Symbol, Address: &token, Decimals: 6})
	})
	e.driveIndexed(20, e.outboundIs(o.ID, store.OutboundConfirmed), s)
	require.Equal(t, "9990000", e.tokenBalance(tok, dest).String())
	require.Zero(t, e.tokenBalance(tok, inv.DepositAddress).Sign())
	got := e.getOutbound(o.ID)
	require.Equal(t, store.SourceDeposit, got.Source)
	require.Len(t, e.outboundTxs(o.ID, store.SweepTxFunding), 1)
	require.Equal(t, store.StatusPending, e.invoice(inv.ID).Status, "the invoice itself is untouched")
	for range 3 {
		e.sim.Commit()
		e.index()
		require.NoError(t, s.RunOnce(ctx))
	}
	rec := e.reconcile(tok.Address)
	// The deposit's token balance came back to 0: still compared (every
	// asset a wallet moved), not left out as nothing.
	var compared bool
	for _, w := range rec.Wallets {
		if common.Address(w.Address) == inv.DepositAddress && w.Token != nil && common.Address(*w.Token) == tok.Address {
			compared = w.Ledger == "0" && w.Chain == "0" && w.OK
		}
	}
	require.True(t, compared, "%+v", rec.Wallets)
}

// The process dies right after broadcasting a payout's send: the next
// process re-broadcasts the stored bytes; exactly one send, the
// destination paid once.
func TestOutbound_CrashAfterBroadcast_NothingSentTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s0 := e.sweeper(Config{Confirmations: 2})
	require.NoError(t, s0.RunOnce(ctx))
	e.sendFrom(e.payerKey, e.payoutWallet(), eth(5))
	e.sim.Commit()
	o := e.outbound(store.OutboundPayout, eth(2), randAddr())

	crashCtx, crash := context.WithCancel(ctx)
	defer crash()
	cc := &crashingChain{Chain: e.client, cancel: crash, match: sentBy(e.payoutWallet())}
	s1 := e.sweeperOn(cc, Config{Confirmations: 2})
	require.NoError(t, s1.RunOnce(crashCtx)) // the funding
	e.sim.Commit()
	require.ErrorIs(t, s1.RunOnce(crashCtx), context.Canceled, "dies right after broadcasting the send")
	sends := e.outboundTxs(o.ID, store.SweepTxOutbound)
	require.Len(t, sends, 1)
	require.Equal(t, store.SweepTxSigned, sends[0].Status)
	require.Equal(t, store.OutboundBroadcast, e.getOutbound(o.ID).Status, "stored with its state, before the broadcast")
	e.sim.Commit()

	s2 := e.sweeper(Config{Confirmations: 2})
	e.clock.Advance(2 * time.Minute) // the dead process's lease ends
	e.drive(10, e.outboundIs(o.ID, store.OutboundConfirmed), s2)
	require.Len(t, e.outboundTxs(o.ID, store.SweepTxOutbound), 1, "never a second signature")
	require.Equal(t, 0, e.balance(*o.Destination).Cmp(eth(2)), "paid once")
	require.EqualValues(t, 1, e.nonce(e.payoutWallet()))
}

// A reorg drops the mined send: the same signed transaction is
// re-broadcast and mined again, never a second payment; its ledger entries
// are reversed and written again, and the ledger still reconciles.
func TestOutbound_ReorgOfTheSend_SameTransactionAgainLedgerReversedAndRewritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.sweeper(Config{Confirmations: 3})
	e.index()
	require.NoError(t, s.RunOnce(ctx))
	e.sendFrom(e.payerKey, e.payoutWallet(), eth(5))
	e.sim.Commit()
	o := e.outbound(store.OutboundPayout, eth(1), randAddr())
	e.driveIndexed(10, func() bool { return len(e.outboundTxs(o.ID, store.SweepTxOutbound)) == 1 }, s)
	parent, err := e.client.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	e.sim.Commit() // the send is mined
	e.index()
	require.NoError(t, s.RunOnce(ctx))
	send := e.outboundTxs(o.ID, store.SweepTxOutbound)[0]
	require.Equal(t, store.SweepTxMined, send.Status)
	before := len(e.ledgerOf(o.ID))

	e.sim.Rollback()
	require.NoError(t, e.sim.Fork(parent.Hash()))
	e.sim.Rollback()
	e.sim.Commit()
	e.driveIndexed(15, e.outboundIs(o.ID, store.OutboundConfirmed), s)
	sends := e.outboundTxs(o.ID, store.SweepTxOutbound)
	require.Len(t, sends, 1, "re-broadcast, not signed again")
	require.Equal(t, send.TxHash, sends[0].TxHash)
	require.Equal(t, 0, e.balance(*o.Destination).Cmp(eth(1)))
	var reversals int
	for _, en := range e.ledgerOf(o.ID) {
		if en.Reverses != nil {
			reversals++
		}
	}
	require.Equal(t, 2, reversals, "the send's payout and fee were reversed")
	require.Equal(t, before+4, len(e.ledgerOf(o.ID)), "and written again at the new block")
	for range 4 {
		e.sim.Commit()
		e.index()
		require.NoError(t, s.RunOnce(ctx))
	}
	e.reconcile()
}

// A merchant-paid refund: the merchant's transfer of exactly the amount to
// the destination, from one of its paying wallets, after the request, is
// recognised and confirmed; a transfer before the request, or of another
// amount, or from anyone else, is not; one transfer settles one outbound.
func TestOutbound_MerchantPaid_RecognisedOnChainOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.sweeper(Config{Confirmations: 2})
	dest := randAddr()
	e.sendFrom(e.payerKey, dest, eth(1)) // before the request: not it
	e.sim.Commit()
	e.index()
	head := e.head()
	mk := func() store.Outbound {
		return e.outbound(store.OutboundPayout, eth(1), dest, func(o *store.Outbound) {
			o.PaidBy, o.Status, o.CreatedBlock = store.PaidByMerchant, store.OutboundAwaitingPayment, head
		})
	}
	a, b := mk(), mk()
	merchantWallet, err := crypto.GenerateKey()
	require.NoError(t, err)
	e.payingWallets(e.merchant.ID, crypto.PubkeyToAddress(merchantWallet.PublicKey))
	e.sendFrom(e.payerKey, crypto.PubkeyToAddress(merchantWallet.PublicKey), eth(5))
	e.sim.Commit()
	e.sendFrom(e.payerKey, dest, eth(1))     // not the merchant's wallet
	e.sendFrom(merchantWallet, dest, eth(2)) // another amount
	e.sim.Commit()
	h := e.sendFrom(merchantWallet, dest, eth(1))
	oneOf := func() bool {
		return e.getOutbound(a.ID).Status == store.OutboundConfirmed || e.getOutbound(b.ID).Status == store.OutboundConfirmed
	}
	e.driveIndexed(10, oneOf, s)
	first, second := e.getOutbound(a.ID), e.getOutbound(b.ID)
	if first.Status != store.OutboundConfirmed {
		first, second = second, first
	}
	require.Equal(t, h, *first.TxHash)
	require.Equal(t, crypto.PubkeyToAddress(merchantWallet.PublicKey), *first.FromAddress)
	require.Equal(t, store.OutboundAwaitingPayment, second.Status, "one transfer settles one outbound")
	es := e.ledgerOf(first.ID)
	require.Len(t, es, 1)
	require.Equal(t, store.LedgerPayout, es[0].Kind)
	require.Equal(t, h, *es[0].TxHash)
	require.Empty(t, e.outboundTxs(first.ID, store.SweepTxFunding), "the service sent nothing")

	h2 := e.sendFrom(merchantWallet, dest, eth(1))
	e.driveIndexed(10, e.outboundIs(second.ID, store.OutboundConfirmed), s)
	require.Equal(t, h2, *e.getOutbound(second.ID).TxHash)
}

// cancelOnCode is the real node; the first time the engine reads the
// destination's code right before signing a send (the funding mined), the
// outbound is cancelled, as a merchant's concurrent request would.
type cancelOnCode struct {
	Chain
	e    *env
	id   int64
	dest common.Address
	done bool
}

func (c *cancelOnCode) CodeAt(ctx context.Context, a common.Address, n *big.Int) ([]byte, error) {
	if a == c.dest && !c.done && len(c.e.outboundTxs(c.id, store.SweepTxFunding)) > 0 {
		c.done = true
		o := c.e.getOutbound(c.id)
		o.Status = store.OutboundCancelled
		require.NoError(c.e.t, c.e.st.UpdateOutbound(ctx, &o))
	}
	return c.Chain.CodeAt(ctx, a, n)
}

// An outbound cancelled after the engine read it, right before its send
// is signed, is never signed: its row is locked and its state checked in
// the transaction that would store the send.
func TestOutbound_CancelledMeanwhile_NothingSigned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s0 := e.sweeper(Config{Confirmations: 1})
	require.NoError(t, s0.RunOnce(ctx))
	e.sendFrom(e.payerKey, e.payoutWallet(), eth(5))
	e.sim.Commit()
	o := e.outbound(store.OutboundPayout, eth(1), randAddr())
	cc := &cancelOnCode{Chain: e.client, e: e, id: o.ID, dest: *o.Destination}
	s := e.sweeperOn(cc, Config{Confirmations: 1})
	for range 4 {
		require.NoError(t, s.RunOnce(ctx))
		e.sim.Commit()
	}
	require.True(t, cc.done, "the cancellation raced the signing")
	require.Len(t, e.outboundTxs(o.ID, store.SweepTxFunding), 1)
	require.Empty(t, e.outboundTxs(o.ID, store.SweepTxOutbound), "no send was signed")
	require.Zero(t, e.balance(*o.Destination).Sign())
	require.Equal(t, store.OutboundCancelled, e.getOutbound(o.ID).Status)
}

// The ledger starts after the service already moved money: a top-up of the
// sweep wallet is mined and written into the ledger before the follower
// takes the wallets' opening balances at a later block, which already hold
// it. A wallet's ledger balance is its opening balance plus the movements
// of later blocks, so the top-up is not counted twice.
func TestLedger_StartsAfterAMinedTopUp_TheOpeningBalanceHoldsItOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sweepWalletBalance(new(big.Int)))
	s := e.sweeper(Config{Confirmations: 2})
	// Nothing indexed yet: the ledger cannot start, the funder tops up.
	require.NoError(t, s.RunOnce(ctx))
	topUps, err := e.st.ListUnminedSweepTxs(ctx, e.funder())
	require.NoError(t, err)
	require.Len(t, topUps, 1)
	e.sim.Commit()
	require.NoError(t, s.RunOnce(ctx)) // the top-up is mined: its entries are written
	es, err := e.st.ListLedgerEntries(ctx, store.LedgerFilter{Limit: 100})
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, en := range es {
		kinds[en.Kind]++
	}
	require.Equal(t, map[string]int{store.LedgerTopUp: 1, store.LedgerGasFee: 1}, kinds)

	// Later blocks; the ledger starts at head − 2, after the top-up.
	for range 4 {
		e.sim.Commit()
	}
	e.index()
	require.NoError(t, s.RunOnce(ctx))
	cur, err := e.st.GetCursor(ctx, LedgerCursor)
	require.NoError(t, err)
	r := e.receipt(topUps[0].TxHash)
	require.Less(t, r.BlockNumber.Uint64(), cur.BlockNumber, "the opening balances already hold the top-up")
	ws, err := e.st.ListServiceWallets(ctx)
	require.NoError(t, err)
	for _, w := range ws {
		require.NotNil(t, w.LedgerFromBlock, w.Role)
		require.Equal(t, cur.BlockNumber, *w.LedgerFromBlock, w.Role)
	}
	e.reconcile()
}

// A refund created as soon as its payment was recorded, while the node the
// sweep reads is a block behind the indexer's: at the sweep's head the
// deposit does not hold the money yet. The refund's source is decided
// only once the sweep's head has reached the payment — from the deposit,
// where the money is — never the payout wallet for good (which, empty,
// left a wrong-network refund QUEUED forever in a two-chain payd test).
func TestOutbound_RefundOfAPaymentAboveTheSweepsHead_WaitsThenLeavesFromTheDeposit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.sweeper(Config{Confirmations: 2})
	e.index()
	require.NoError(t, s.RunOnce(ctx))
	inv := e.openInvoice(nil, eth(3))
	// Sent, not yet mined at the sweep's head; recorded in the block it
	// goes into, as an indexer reading a node a block ahead would.
	payer := crypto.PubkeyToAddress(e.payerKey.PublicKey)
	h := e.sendFrom(e.payerKey, inv.DepositAddress, eth(3))
	p := store.Payment{InvoiceID: inv.ID, TxHash: h, LogIndex: store.NativeLogIndex, BlockNumber: e.head() + 1,
		BlockHash: common.Hash{1}, From: payer, AmountWei: amountOf(eth(3)), CreatedAt: e.clock.Now()}
	require.NoError(t, e.st.InsertPayment(ctx, &p))
	dest := randAddr()
	o := e.outbound(store.OutboundRefund, eth(1), dest, func(o *store.Outbound) {
		o.InvoiceID, o.Reason = &inv.ID, store.RefundOverpayment
	})

	require.NoError(t, s.RunOnce(ctx))
	require.Empty(t, e.getOutbound(o.ID).Source, "not decided below the payment's block")
	require.Equal(t, store.OutboundQueued, e.getOutbound(o.ID).Status)

	e.driveIndexed(20, func() bool { return e.getOutbound(o.ID).Status == store.OutboundConfirmed }, s)
	got := e.getOutbound(o.ID)
	require.Equal(t, store.SourceDeposit, got.Source)
	require.Equal(t, inv.DepositAddress, *got.FromAddress)
	require.Equal(t, 0, e.balance(dest).Cmp(eth(1)))
	e.reconcile() // the waiting pass wrote nothing the ledger lacks
}

// hiddenReceipts is the node with no receipt for the transactions match
// selects while hide is set, as geth answers while it is still indexing
// transactions, or a proxy's lagging node: the chain's state (the
// sender's nonce) shows them mined, their receipts do not.
type hiddenReceipts struct {
	Chain
	hide  atomic.Bool
	match func(common.Hash) bool
}

func (c *hiddenReceipts) TransactionReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error) {
	if c.hide.Load() && c.match(hash) {
		return nil, ethereum.NotFound
	}
	return c.Chain.TransactionReceipt(ctx, hash)
}

// A payout whose receipt the node withholds for blocks after it was mined
// is not failed while the index holds it — FAILED would free the amount
// to be paid again — and is confirmed, once, when the receipt comes.
func TestOutbound_ReceiptLagsTheNonce_NotFailedWhileTheIndexHoldsTheSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var sends sync.Map // hashes of the payout wallet's transactions
	hc := &hiddenReceipts{Chain: e.client, match: func(h common.Hash) bool { _, ok := sends.Load(h); return ok }}
	s := e.sweeperOn(hc, Config{Confirmations: 2})
	e.index()
	require.NoError(t, s.RunOnce(ctx))
	e.sendFrom(e.payerKey, e.payoutWallet(), eth(5))
	e.sim.Commit()
	dest := randAddr()
	o := e.outbound(store.OutboundPayout, eth(1), dest)
	hc.hide.Store(true)

	// Until the send is mined, the receipts are there to be missed.
	e.driveIndexed(10, func() bool {
		for _, t := range e.outboundTxs(o.ID, store.SweepTxOutbound) {
			sends.Store(t.TxHash, true)
		}
		return e.balance(dest).Sign() > 0
	}, s)
	for range 6 {
		e.sim.Commit()
		e.index()
		require.NoError(t, s.RunOnce(ctx))
		got := e.getOutbound(o.ID)
		require.Equal(t, store.OutboundBroadcast, got.Status, "mined without a receipt: not failed")
		require.Len(t, e.outboundTxs(o.ID, store.SweepTxOutbound), 1, "nothing signed again")
	}

	hc.hide.Store(false)
	e.driveIndexed(10, e.outboundIs(o.ID, store.OutboundConfirmed), s)
	require.Equal(t, 0, e.balance(dest).Cmp(eth(1)), "paid once")
	payouts := 0
	for _, en := range e.ledgerOf(o.ID) {
		if en.Kind == store.LedgerPayout {
			payouts++
		}
	}
	require.Equal(t, 1, payouts)
}
