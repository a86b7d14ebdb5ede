package sweep

import (
	"crypto/ecdsa"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// Which transfer pays a merchant-paid request (docs/refunds.md): one the
// merchant vouched for — from one of its paying wallets, or the
// transaction it named — never one the service sent, and one transfer pays
// at most one outbound. Issue #32: a service-paid payout's transaction
// confirmed a merchant-paid request of the same amount to the same
// destination, within one merchant and across two.

// otherMerchant adds a second merchant to the environment.
func (e *env) otherMerchant() store.Merchant {
	e.t.Helper()
	m := store.Merchant{Name: "other shop", APIKeyDigest: randBytes(32), APIKeyHash: "x", APIKeyPrefix: "sk_test",
		WebhookURL: "https://example.com/other", WebhookSecretCiphertext: randBytes(40), SettlementAddress: randAddr(),
		CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now()}
	require.NoError(e.t, e.st.CreateMerchant(ctx, &m))
	return m
}

// payingWallets sets a merchant's paying wallets, straight in the store
// (the API refuses the service's own addresses; a test that puts one
// there shows what the engine and the database do on their own).
func (e *env) payingWallets(merchantID int64, ws ...common.Address) {
	e.t.Helper()
	require.NoError(e.t, e.st.PutPayoutPolicy(ctx, store.PayoutPolicy{MerchantID: merchantID, PayingWallets: ws,
		UpdatedAt: e.clock.Now()}))
}

// fundedKey is a new key holding value of the native coin (mined).
func (e *env) fundedKey(value *big.Int) *ecdsa.PrivateKey {
	e.t.Helper()
	k, err := crypto.GenerateKey()
	require.NoError(e.t, err)
	e.sendFrom(e.payerKey, crypto.PubkeyToAddress(k.PublicKey), value)
	e.sim.Commit()
	return k
}

func TestOutbound_MerchantPaid_NeverSettledByAServicePaidTransfer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// merchantPaidFirst: the merchant-paid request is made before the
		// service-paid one (else after it, before its send is mined).
		merchantPaidFirst bool
		// acrossMerchants: the merchant-paid request is another merchant's.
		acrossMerchants bool
	}{
		{"merchant-paid first, one merchant", true, false},
		{"service-paid first, one merchant", false, false},
		{"merchant-paid first, two merchants", true, true},
		{"service-paid first, two merchants", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			s := e.sweeper(Config{Confirmations: 2})
			e.index()
			require.NoError(t, s.RunOnce(ctx)) // records the payout wallets, starts the ledger
			requester := e.merchant
			if tc.acrossMerchants {
				requester = e.otherMerchant()
				require.NoError(t, s.RunOnce(ctx))
			}
			// The worst case: the service's payout wallet listed as the
			// requester's paying wallet (the API refuses it). The engine's
			// check and the database must hold on their own.
			e.payingWallets(requester.ID, e.payoutWallet())
			e.sendFrom(e.payerKey, e.payoutWallet(), eth(5))
			e.sim.Commit()
			e.index()

			dest := randAddr()
			amount := big.NewInt(7_700_000_000_000_000) // 0.0077 coin, as in the report
			var merchantPaid, servicePaid store.Outbound
			mkMerchantPaid := func() {
				head := e.head()
				merchantPaid = e.outbound(store.OutboundPayout, amount, dest, func(o *store.Outbound) {
					o.MerchantID, o.PaidBy, o.Status, o.CreatedBlock = requester.ID, store.PaidByMerchant, store.OutboundAwaitingPayment, head
				})
			}
			mkServicePaid := func() { servicePaid = e.outbound(store.OutboundPayout, amount, dest) }
			if tc.merchantPaidFirst {
				mkMerchantPaid()
				e.sim.Commit()
				mkServicePaid()
			} else {
				mkServicePaid()
				mkMerchantPaid()
			}
			e.driveIndexed(20, e.outboundIs(servicePaid.ID, store.OutboundConfirmed), s)
			for range 4 {
				e.sim.Commit()
				e.index()
				require.NoError(t, s.RunOnce(ctx))
			}
			sent := e.getOutbound(servicePaid.ID)
			got := e.getOutbound(merchantPaid.ID)
			require.Equal(t, store.OutboundAwaitingPayment, got.Status, "the service's transfer %s pays no merchant-paid request", sent.TxHash.Hex())
			require.Nil(t, got.TxHash)
			require.Empty(t, e.ledgerOf(merchantPaid.ID), "nothing in the requester's ledger")
			e.reconcile()

			// The merchant names the service's transaction: the engine
			// drops it and says why.
			named := *sent.TxHash
			got.SubmittedTxHash = &named
			require.NoError(t, e.st.UpdateOutbound(ctx, &got))
			require.NoError(t, s.RunOnce(ctx))
			got = e.getOutbound(merchantPaid.ID)
			require.Equal(t, store.OutboundAwaitingPayment, got.Status)
			require.Nil(t, got.SubmittedTxHash, "the named transaction does not pay it: dropped")
			require.Contains(t, got.Error, store.ErrSentByService.Error())

			// Its own payment, from a wallet it registered, does.
			wallet := e.fundedKey(eth(1))
			e.payingWallets(requester.ID, crypto.PubkeyToAddress(wallet.PublicKey))
			h := e.sendFrom(wallet, dest, amount)
			e.driveIndexed(10, e.outboundIs(merchantPaid.ID, store.OutboundConfirmed), s)
			require.Equal(t, h, *e.getOutbound(merchantPaid.ID).TxHash)
			for range 3 {
				e.sim.Commit()
				e.index()
				require.NoError(t, s.RunOnce(ctx))
			}
			e.reconcile()
		})
	}
}

// A transfer of exactly the amount to the destination from an address the
// merchant did not vouch for (the payee, another merchant's customer) pays
// nothing; the same transfer named by the merchant does.
func TestOutbound_MerchantPaid_OnlyAVouchedForTransferPaysIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.sweeper(Config{Confirmations: 2})
	e.index()
	require.NoError(t, s.RunOnce(ctx))
	dest := randAddr()
	head := e.head()
	o := e.outbound(store.OutboundRefund, eth(1), dest, func(o *store.Outbound) {
		o.PaidBy, o.Status, o.CreatedBlock = store.PaidByMerchant, store.OutboundAwaitingPayment, head
		o.Kind, o.InvoiceID = store.OutboundPayout, nil
	})
	stranger := e.fundedKey(eth(5))
	wrong := e.sendFrom(stranger, dest, eth(2)) // another amount
	e.sim.Commit()
	h := e.sendFrom(stranger, dest, eth(1))
	e.sim.Commit()
	for range 4 {
		e.sim.Commit()
		e.index()
		require.NoError(t, s.RunOnce(ctx))
	}
	require.Equal(t, store.OutboundAwaitingPayment, e.getOutbound(o.ID).Status, "nobody vouched for the stranger's transfer")

	got := e.getOutbound(o.ID)
	got.SubmittedTxHash = &wrong
	require.NoError(t, e.st.UpdateOutbound(ctx, &got))
	require.NoError(t, s.RunOnce(ctx))
	got = e.getOutbound(o.ID)
	require.Nil(t, got.SubmittedTxHash)
	require.Contains(t, got.Error, store.ErrNotThisRequest.Error())

	got.SubmittedTxHash = &h
	require.NoError(t, e.st.UpdateOutbound(ctx, &got))
	e.driveIndexed(10, e.outboundIs(o.ID, store.OutboundConfirmed), s)
	require.Equal(t, h, *e.getOutbound(o.ID).TxHash)
	require.Empty(t, e.getOutbound(o.ID).Error)
}
