package sweep

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"math/big"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/store"
)

// payerOpts signs as the payer, who deploys (and so owns) the test tokens.
func (e *env) payerOpts() *bind.TransactOpts {
	e.t.Helper()
	return bind.NewKeyedTransactor(e.payerKey, big.NewInt(1337))
}

// deployToken deploys a test token of kind k with the decimals and mines it.
func (e *env) deployToken(k testtoken.Kind, decimals uint8) *testtoken.Token {
	e.t.Helper()
	tok, _, err := testtoken.Deploy(e.payerOpts(), e.client, k, "Test "+k.Name, k.Name[:4], decimals)
	require.NoError(e.t, err)
	e.sim.Commit()
	code, err := e.client.CodeAt(ctx, tok.Address, nil)
	require.NoError(e.t, err)
	require.NotEmpty(e.t, code)
	return tok
}

// confirmedTokenInvoices creates n invoices for amount base units of tok,
// mints each its amount at its deposit address in one block, then marks
// them CONFIRMED and QUEUED as settlement does.
func (e *env) confirmedTokenInvoices(tok *testtoken.Token, n int, amount *big.Int) []store.Invoice {
	e.t.Helper()
	invs := make([]store.Invoice, n)
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
			token := tok.Address
			invs[i] = store.Invoice{
				MerchantID: e.merchant.ID, Status: store.StatusPending, AmountWei: amountOf(amount),
				ChainID: 1337, DepositAddress: addr, DerivationIndex: idx,
				PaymentURI:      "ethereum:" + token.Hex() + "@1337/transfer?address=" + addr.Hex() + "&uint256=" + amount.String(),
				LookupTokenHash: randBytes(32), ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now,
				SweepStatus: store.SweepNone,
			}
			invs[i].SetAsset(store.Asset{Symbol: tok.Symbol, Address: &token, Decimals: tok.Decimals})
			return tx.CreateInvoice(ctx, &invs[i])
		}))
	}
	// Explicit nonces: the node's pending nonce may lag its pool.
	opts := e.payerOpts()
	nonce, err := e.client.PendingNonceAt(ctx, opts.From)
	require.NoError(e.t, err)
	for i, inv := range invs {
		opts.Nonce = new(big.Int).SetUint64(nonce + uint64(i))
		_, err := tok.Mint(opts, inv.DepositAddress, amount)
		require.NoError(e.t, err)
	}
	// Many mints may take more than one block's gas.
	for range 10 {
		e.sim.Commit()
		if e.tokenBalance(tok, invs[len(invs)-1].DepositAddress).Cmp(amount) == 0 {
			break
		}
	}
	for i := range invs {
		require.Equal(e.t, 0, e.tokenBalance(tok, invs[i].DepositAddress).Cmp(amount))
		now := e.clock.Now()
		invs[i].Status, invs[i].PaidWei, invs[i].PaidAt, invs[i].ConfirmedAt = store.StatusConfirmed, amountOf(amount), &now, &now
		invs[i].SweepStatus, invs[i].UpdatedAt = store.SweepQueued, now
		require.NoError(e.t, e.st.UpdateInvoice(ctx, &invs[i]))
	}
	return invs
}

func (e *env) tokenBalance(tok *testtoken.Token, who common.Address) *big.Int {
	e.t.Helper()
	b, err := tok.BalanceOf(ctx, who)
	require.NoError(e.t, err)
	return b
}

func (e *env) receipt(h common.Hash) *types.Receipt {
	e.t.Helper()
	r, err := e.client.TransactionReceipt(ctx, h)
	require.NoError(e.t, err)
	return r
}

// oneOf returns the single stored transaction of kind for the invoice.
func (e *env) oneOf(invoiceID int64, kind string) store.SweepTx {
	e.t.Helper()
	txs := e.sweepTxs(invoiceID, kind)
	require.Len(e.t, txs, 1, "one %s transaction", kind)
	return txs[0]
}

// receiptWatch is the real node; whenever a deposit address broadcasts, it
// checks that the deposit's funding was already mined (its receipt at or
// below the head) and counts the broadcasts that came before it.
type receiptWatch struct {
	Chain
	st         store.Store
	early      atomic.Int32
	depositTxs atomic.Int32
	deposits   map[common.Address]int64 // deposit address → invoice id
}

func (w *receiptWatch) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	from, err := types.Sender(types.LatestSignerForChainID(big.NewInt(1337)), tx)
	if err == nil {
		if id, ok := w.deposits[from]; ok {
			w.depositTxs.Add(1)
			if !w.fundingMined(ctx, id) {
				w.early.Add(1)
			}
		}
	}
	return w.Chain.SendTransaction(ctx, tx)
}

func (w *receiptWatch) fundingMined(ctx context.Context, invoiceID int64) bool {
	txs, err := w.st.ListSweepTxsByInvoice(ctx, invoiceID)
	if err != nil {
		return false
	}
	head, err := w.Chain.BlockNumber(ctx)
	if err != nil {
		return false
	}
	for _, t := range txs {
		if t.Kind != store.SweepTxFunding {
			continue
		}
		r, err := w.Chain.TransactionReceipt(ctx, t.TxHash)
		if err == nil && r.Status == types.ReceiptStatusSuccessful && r.BlockNumber.Uint64() <= head {
			return true
		}
	}
	return false
}

// frontRunner is the real node; when the sweep wallet broadcasts a permit,
// someone else (the payer's key) submits the same signed permit first —
// it is public once broadcast — with a higher tip, so that theirs is mined
// first and the wallet's permit reverts.
type frontRunner struct {
	Chain
	key   *ecdsa.PrivateKey
	rival atomic.Pointer[common.Hash]
}

func (f *frontRunner) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	if data := permitCallOf(tx); data != nil && f.rival.Load() == nil {
		from := crypto.PubkeyToAddress(f.key.PublicKey)
		nonce, err := f.Chain.PendingNonceAt(ctx, from)
		if err != nil {
			return err
		}
		rival, err := types.SignNewTx(f.key, types.LatestSignerForChainID(big.NewInt(1337)), &types.DynamicFeeTx{
			ChainID: big.NewInt(1337), Nonce: nonce, To: tx.To(), Data: data, Gas: tx.Gas(),
			GasTipCap: new(big.Int).Mul(tx.GasTipCap(), big.NewInt(10)),
			GasFeeCap: new(big.Int).Add(tx.GasFeeCap(), new(big.Int).Mul(tx.GasTipCap(), big.NewInt(10))),
		})
		if err != nil {
			return err
		}
		if err := f.Chain.SendTransaction(ctx, rival); err != nil {
			return err
		}
		h := rival.Hash()
		f.rival.Store(&h)
	}
	return f.Chain.SendTransaction(ctx, tx)
}

// permitCallOf returns the call data of a permit transaction, or nil.
func permitCallOf(tx *types.Transaction) []byte {
	if len(tx.Data()) < 4 || !bytes.Equal(tx.Data()[:4], erc20.Methods["permit"].ID) {
		return nil
	}
	return tx.Data()
}
