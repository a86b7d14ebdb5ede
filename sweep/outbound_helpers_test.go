package sweep

import (
	"crypto/ecdsa"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/store"
)

// index writes the simulated chain's blocks, transactions and token
// Transfer logs into the store as the indexer does (blocks replaced by a
// reorg are dropped first), so that the ledger's follower and the
// merchant-paid matching have an indexed chain to read.
func (e *env) index() {
	e.t.Helper()
	head := e.head()
	signer := types.LatestSignerForChainID(big.NewInt(1337))
	for n := uint64(0); n <= head; n++ {
		blk, err := e.client.BlockByNumber(ctx, new(big.Int).SetUint64(n))
		require.NoError(e.t, err)
		if have, err := e.st.GetBlock(ctx, n); err == nil {
			if have.Hash == blk.Hash() {
				continue
			}
			_, err := e.st.DeleteBlocksFrom(ctx, n)
			require.NoError(e.t, err)
		} else {
			require.ErrorIs(e.t, err, store.ErrNotFound)
		}
		b := store.Block{Number: n, Hash: blk.Hash(), ParentHash: blk.ParentHash(), Timestamp: blk.Time(), Miner: blk.Coinbase(),
			GasLimit: blk.GasLimit(), GasUsed: blk.GasUsed(), TxCount: len(blk.Transactions()), IndexedAt: e.clock.Now()}
		if blk.BaseFee() != nil {
			bf := amountOf(blk.BaseFee())
			b.BaseFeeWei = &bf
		}
		var txs []store.Transaction
		var trs []store.TokenTransfer
		for i, tx := range blk.Transactions() {
			from, err := types.Sender(signer, tx)
			require.NoError(e.t, err)
			st := store.Transaction{Hash: tx.Hash(), BlockNumber: n, BlockHash: blk.Hash(), Index: i, From: from, To: tx.To(),
				ValueWei: amountOf(tx.Value()), Nonce: tx.Nonce(), Gas: tx.Gas(), Type: tx.Type(), Input: tx.Data()}
			txs = append(txs, st)
			r, err := e.client.TransactionReceipt(ctx, tx.Hash())
			require.NoError(e.t, err)
			for _, l := range r.Logs {
				if len(l.Topics) == 3 && l.Topics[0] == transferTopic {
					trs = append(trs, store.TokenTransfer{BlockNumber: n, BlockHash: blk.Hash(), TxHash: tx.Hash(), TxIndex: i,
						LogIndex: int(l.Index), Token: l.Address, From: common.BytesToAddress(l.Topics[1][:]),
						To: common.BytesToAddress(l.Topics[2][:]), Value: amountOf(new(big.Int).SetBytes(l.Data))})
				}
			}
		}
		require.NoError(e.t, e.st.InTx(ctx, func(tx store.Tx) error {
			if err := tx.InsertBlocks(ctx, []store.Block{b}, txs); err != nil {
				return err
			}
			return tx.InsertTokenTransfers(ctx, trs)
		}))
	}
}

// driveIndexed is drive with the chain indexed before every pass.
func (e *env) driveIndexed(maxBlocks int, done func() bool, sweepers ...*Sweeper) int {
	e.t.Helper()
	return e.driveWith(e.index, maxBlocks, done, sweepers...)
}

// payoutWallet is the merchant's payout wallet address.
func (e *env) payoutWallet() common.Address {
	e.t.Helper()
	a, err := e.wallet.PayoutAddress(e.merchant.ID)
	require.NoError(e.t, err)
	return a
}

// outbound stores an outbound of the merchant, QUEUED and service-paid
// unless mutated.
func (e *env) outbound(kind string, amount *big.Int, dest common.Address, mutate ...func(*store.Outbound)) store.Outbound {
	e.t.Helper()
	now := e.clock.Now()
	o := store.Outbound{Kind: kind, MerchantID: e.merchant.ID, Amount: amountOf(amount), Destination: &dest,
		PaidBy: store.PaidByService, Status: store.OutboundQueued, CreatedAt: now, UpdatedAt: now}
	o.SetAsset(store.NativeAsset("ETH"))
	for _, f := range mutate {
		f(&o)
	}
	require.NoError(e.t, e.st.CreateOutbound(ctx, &o))
	return o
}

func (e *env) getOutbound(id int64) store.Outbound {
	e.t.Helper()
	o, err := e.st.GetOutbound(ctx, id)
	require.NoError(e.t, err)
	return o
}

// outboundIs holds when the outbound has the status.
func (e *env) outboundIs(id int64, status string) func() bool {
	return func() bool { return e.getOutbound(id).Status == status }
}

func (e *env) outboundTxs(id int64, kind string) []store.SweepTx {
	e.t.Helper()
	txs, err := e.st.ListSweepTxsByOutbound(ctx, id)
	require.NoError(e.t, err)
	var out []store.SweepTx
	for _, t := range txs {
		if t.Kind == kind {
			out = append(out, t)
		}
	}
	return out
}

// eventTypesOf lists the types of the events with a payout's invoice id 0
// or a refund's invoice, in order.
func (e *env) eventTypesOf(invoiceID int64, prefix string) []string {
	e.t.Helper()
	evs, err := e.st.ListEventsByInvoice(ctx, invoiceID)
	require.NoError(e.t, err)
	var out []string
	for _, ev := range evs {
		if len(ev.Type) >= len(prefix) && ev.Type[:len(prefix)] == prefix {
			out = append(out, ev.Type)
		}
	}
	return out
}

// sendFrom sends value of the native coin from key to addr (mined at the
// next Commit).
func (e *env) sendFrom(key *ecdsa.PrivateKey, to common.Address, value *big.Int) common.Hash {
	e.t.Helper()
	from := crypto.PubkeyToAddress(key.PublicKey)
	nonce, err := e.client.PendingNonceAt(ctx, from)
	require.NoError(e.t, err)
	head, err := e.client.HeaderByNumber(ctx, nil)
	require.NoError(e.t, err)
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(big.NewInt(1337)), &types.DynamicFeeTx{
		ChainID: big.NewInt(1337), Nonce: nonce, GasTipCap: big.NewInt(params1Gwei),
		GasFeeCap: new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(params1Gwei)),
		Gas:       21000, To: &to, Value: value,
	})
	require.NoError(e.t, err)
	require.NoError(e.t, e.client.SendTransaction(ctx, tx))
	return tx.Hash()
}

// openInvoice creates a PENDING invoice of the asset (tok nil: the native
// coin) for amount.
func (e *env) openInvoice(tok *testtoken.Token, amount *big.Int) store.Invoice {
	e.t.Helper()
	var inv store.Invoice
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
		inv = store.Invoice{MerchantID: e.merchant.ID, Status: store.StatusPending, AmountWei: amountOf(amount), ChainID: 1337,
			DepositAddress: addr, DerivationIndex: idx, PaymentURI: "ethereum:" + addr.Hex() + "@1337", LookupTokenHash: randBytes(32),
			ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now, SweepStatus: store.SweepNone}
		if tok != nil {
			token := tok.Address
			inv.SetAsset(store.Asset{Symbol: tok.Symbol, Address: &token, Decimals: tok.Decimals})
		} else {
			inv.SetAsset(store.NativeAsset("ETH"))
		}
		return tx.CreateInvoice(ctx, &inv)
	}))
	return inv
}

// paidInvoice is openInvoice paid value (in its asset) from the payer in
// one mined block, the payment recorded as settlement would (which writes
// its ledger entry), then marked CONFIRMED and QUEUED.
func (e *env) paidInvoice(tok *testtoken.Token, amount, value *big.Int) store.Invoice {
	e.t.Helper()
	inv := e.openInvoice(tok, amount)
	e.payInvoice(inv, tok, value, false)
	now := e.clock.Now()
	inv = e.invoice(inv.ID)
	inv.Status, inv.PaidWei, inv.PaidAt, inv.ConfirmedAt = store.StatusConfirmed, amountOf(value), &now, &now
	inv.SweepStatus, inv.UpdatedAt = store.SweepQueued, now
	require.NoError(e.t, e.st.UpdateInvoice(ctx, &inv))
	return e.invoice(inv.ID)
}

// payInvoice pays the invoice's deposit value of an asset (tok nil: the
// native coin) from the payer, mines it and records the payment (wrong
// tells whether it is in another asset than the invoice's).
func (e *env) payInvoice(inv store.Invoice, tok *testtoken.Token, value *big.Int, wrong bool) store.Payment {
	e.t.Helper()
	payer := crypto.PubkeyToAddress(e.payerKey.PublicKey)
	var h common.Hash
	var token *common.Address
	if tok == nil {
		h = e.sendFrom(e.payerKey, inv.DepositAddress, value)
	} else {
		tx, err := tok.Transfer(e.payerOpts(), inv.DepositAddress, value)
		require.NoError(e.t, err)
		h, token = tx.Hash(), &tok.Address
	}
	e.sim.Commit()
	r := e.receipt(h)
	require.Equal(e.t, types.ReceiptStatusSuccessful, r.Status)
	p := store.Payment{InvoiceID: inv.ID, TxHash: h, LogIndex: store.NativeLogIndex, BlockNumber: r.BlockNumber.Uint64(),
		BlockHash: r.BlockHash, From: payer, AmountWei: amountOf(value), CreatedAt: e.clock.Now(), Token: token, WrongAsset: wrong}
	if tok != nil {
		p.LogIndex = int(r.Logs[0].Index)
	}
	require.NoError(e.t, e.st.InsertPayment(ctx, &p))
	return p
}

// reconcile compares the ledger with the chain and requires every wallet
// to agree to the wei.
func (e *env) reconcile(tokens ...common.Address) Reconciliation {
	e.t.Helper()
	r, err := NewReconciler(e.st, e.client, ReconcileConfig{Tokens: tokens})
	require.NoError(e.t, err)
	rec, err := r.Reconcile(ctx, 0)
	require.NoError(e.t, err)
	for _, w := range rec.Wallets {
		require.True(e.t, w.OK, "%s %s (token %v): ledger %s, chain %s", w.Role, w.Address, w.Token, w.Ledger, w.Chain)
	}
	require.True(e.t, rec.OK)
	return rec
}

// ledgerOf lists the ledger entries of an outbound.
func (e *env) ledgerOf(outboundID int64) []store.LedgerEntry {
	e.t.Helper()
	es, err := e.st.ListLedgerEntries(ctx, store.LedgerFilter{Limit: 10000})
	require.NoError(e.t, err)
	var out []store.LedgerEntry
	for _, en := range es {
		if en.OutboundID != nil && *en.OutboundID == outboundID {
			out = append(out, en)
		}
	}
	return out
}
