package storetest

import (
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func outboundTests() []test {
	return []test{
		{"Outbound_CreateGetUpdate", testOutboundCreateGetUpdate},
		{"Outbound_StaleVersion_Conflict", testOutboundStaleVersion},
		{"Outbound_List", testOutboundList},
		{"Outbound_ClaimConcurrently", testOutboundClaim},
		{"Outbound_TransferMatchesOneMerchantPaidOutbound", testOutboundMatchedOnce},
		{"Outbound_OneTransferOneOutboundWhoeverPays", testOutboundTransferOnceWhoeverPays},
		{"Outbound_MerchantPaid_ServiceTransferRefused", testOutboundServiceTransferRefused},
		{"Outbound_SweepTxs", testOutboundSweepTxs},
		{"APIKey_CreateLookupRevoke", testAPIKeys},
		{"PayoutPolicy_PutGet", testPayoutPolicy},
		{"ServiceWallet_Register", testServiceWallets},
		{"Ledger_PaymentWritesItsEntryAndReorgReversesIt", testLedgerPayments},
		{"Ledger_InsertReverseList", testLedgerEntries},
		{"Ledger_InboundTransfers", testInboundTransfers},
	}
}

func newOutbound(t *testing.T, st store.Tx, m store.Merchant, mutate ...func(*store.Outbound)) store.Outbound {
	t.Helper()
	dest := randAddr()
	o := store.Outbound{Kind: store.OutboundPayout, MerchantID: m.ID, Amount: store.NewAmount(1000),
		Destination: &dest, PaidBy: store.PaidByService, Status: store.OutboundQueued, CreatedAt: now(), UpdatedAt: now()}
	o.SetAsset(store.NativeAsset("ETH"))
	for _, f := range mutate {
		f(&o)
	}
	require.NoError(t, st.CreateOutbound(ctx, &o))
	require.NotZero(t, o.ID)
	return o
}

func testOutboundCreateGetUpdate(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	claim := randBytes(32)
	o := newOutbound(t, st, m, func(o *store.Outbound) {
		o.Kind, o.InvoiceID, o.Reason, o.Reference = store.OutboundRefund, &inv.ID, store.RefundOverpayment, "ticket 7"
		o.SetAsset(usdc())
		o.Amount = maxUint256()
		o.Destination, o.Status, o.ClaimTokenHash = nil, store.OutboundAwaitingDestination, claim
		o.FiatCurrency, o.FiatMinor, o.FiatRate, o.FiatRateKind = "EUR", ptr(store.NewAmount(1250)), "0.999", "current"
		o.CreatedByKey, o.CreatedBlock = 4, 99
	})
	require.EqualValues(t, 1, o.Version)
	got, err := st.GetOutbound(ctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, usdc(), got.Asset())
	require.Equal(t, maxUint256(), got.Amount)
	require.Equal(t, inv.ID, *got.InvoiceID)
	require.Nil(t, got.Destination)
	require.Equal(t, "1250", got.FiatMinor.String())
	require.EqualValues(t, 4, got.CreatedByKey)
	require.EqualValues(t, 99, got.CreatedBlock)
	requireTime(t, now(), got.CreatedAt)

	byClaim, err := st.GetOutboundByClaimTokenHash(ctx, claim)
	require.NoError(t, err)
	require.Equal(t, o.ID, byClaim.ID)
	_, err = st.GetOutboundByClaimTokenHash(ctx, randBytes(32))
	require.ErrorIs(t, err, store.ErrNotFound)

	// A payout without a destination outside AWAITING_DESTINATION is
	// refused by the database.
	err = st.CreateOutbound(ctx, &store.Outbound{Kind: store.OutboundPayout, MerchantID: m.ID, Amount: store.NewAmount(1),
		AssetSymbol: "ETH", AssetDecimals: 18, PaidBy: store.PaidByService, Status: store.OutboundQueued, CreatedAt: now(), UpdatedAt: now()})
	require.Error(t, err)

	err = st.InTx(ctx, func(tx store.Tx) error {
		cur, err := tx.GetOutboundForUpdate(ctx, o.ID)
		if err != nil {
			return err
		}
		dest, from, h, block, later := randAddr(), randAddr(), randHash(), uint64(12), now().Add(time.Minute)
		key := int64(9)
		cur.Destination, cur.Source, cur.FromAddress, cur.Status = &dest, store.SourcePayoutWallet, &from, store.OutboundBroadcast
		cur.TxHash, cur.BlockNumber, cur.Attempts, cur.ApprovedByKey, cur.ApprovedAt = &h, &block, 2, &key, &later
		cur.NextAttemptAt, cur.BroadcastAt, cur.UpdatedAt, cur.Error = &later, &later, later, "payout wallet balance too low"
		return tx.UpdateOutbound(ctx, &cur)
	})
	require.NoError(t, err)
	got, err = st.GetOutbound(ctx, o.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, got.Version)
	require.Equal(t, store.OutboundBroadcast, got.Status)
	require.Equal(t, store.SourcePayoutWallet, got.Source)
	require.NotNil(t, got.TxHash)
	require.EqualValues(t, 12, *got.BlockNumber)
	require.EqualValues(t, 9, *got.ApprovedByKey)
	require.Equal(t, 2, got.Attempts)
	require.Equal(t, "payout wallet balance too low", got.Error)
	require.Equal(t, "1250", got.FiatMinor.String(), "the request's fields are fixed")
}

func testOutboundStaleVersion(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	o := newOutbound(t, st, m)
	a, b := o, o
	a.Status = store.OutboundCancelled
	require.NoError(t, st.UpdateOutbound(ctx, &a))
	b.Status = store.OutboundBroadcast
	require.ErrorIs(t, st.UpdateOutbound(ctx, &b), store.ErrConflict)
	missing := o
	missing.ID = o.ID + 1000
	require.ErrorIs(t, st.UpdateOutbound(ctx, &missing), store.ErrNotFound)
}

func testOutboundList(t *testing.T, st store.Store) {
	m, other := newMerchant(t, st), newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	r1 := newOutbound(t, st, m, func(o *store.Outbound) { o.Kind, o.InvoiceID = store.OutboundRefund, &inv.ID })
	p1 := newOutbound(t, st, m, func(o *store.Outbound) { o.BatchID = "pb_1" })
	p2 := newOutbound(t, st, m, func(o *store.Outbound) {
		o.BatchID, o.Status, o.PaidBy = "pb_1", store.OutboundAwaitingPayment, store.PaidByMerchant
		o.CreatedAt = now().Add(time.Hour)
	})
	newOutbound(t, st, other)

	all, err := st.ListOutbounds(ctx, store.OutboundFilter{MerchantID: m.ID})
	require.NoError(t, err)
	require.Equal(t, []int64{p2.ID, p1.ID, r1.ID}, outboundIDs(all), "newest first, the merchant's only")
	refunds, err := st.ListOutbounds(ctx, store.OutboundFilter{MerchantID: m.ID, Kind: store.OutboundRefund, InvoiceID: inv.ID})
	require.NoError(t, err)
	require.Equal(t, []int64{r1.ID}, outboundIDs(refunds))
	batch, err := st.ListOutbounds(ctx, store.OutboundFilter{MerchantID: m.ID, BatchID: "pb_1", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, []int64{p2.ID}, outboundIDs(batch))
	next, err := st.ListOutbounds(ctx, store.OutboundFilter{MerchantID: m.ID, BatchID: "pb_1", BeforeID: p2.ID})
	require.NoError(t, err)
	require.Equal(t, []int64{p1.ID}, outboundIDs(next))
	byStatus, err := st.ListOutbounds(ctx, store.OutboundFilter{MerchantID: m.ID,
		Statuses: []string{store.OutboundAwaitingPayment, store.OutboundCancelled}})
	require.NoError(t, err)
	require.Equal(t, []int64{p2.ID}, outboundIDs(byStatus))
	recent, err := st.ListOutbounds(ctx, store.OutboundFilter{MerchantID: m.ID, CreatedAfter: now().Add(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, []int64{p2.ID}, outboundIDs(recent))
	service, err := st.ListOutbounds(ctx, store.OutboundFilter{MerchantID: m.ID, PaidBy: store.PaidByService})
	require.NoError(t, err)
	require.Equal(t, []int64{p1.ID, r1.ID}, outboundIDs(service))
}

func outboundIDs(os []store.Outbound) []int64 {
	out := make([]int64, len(os))
	for i := range os {
		out[i] = os[i].ID
	}
	return out
}

func testOutboundClaim(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	const n = 20
	for i := 0; i < n; i++ {
		status := []string{store.OutboundQueued, store.OutboundBroadcast, store.OutboundAwaitingPayment}[i%3]
		newOutbound(t, st, m, func(o *store.Outbound) { o.Status = status })
	}
	later := now().Add(time.Hour)
	newOutbound(t, st, m, func(o *store.Outbound) { o.NextAttemptAt = &later })
	newOutbound(t, st, m, func(o *store.Outbound) { o.Status = store.OutboundAwaitingApproval })
	newOutbound(t, st, m, func(o *store.Outbound) { o.Status = store.OutboundConfirmed })

	claimed := claimConcurrently(t, 5, func() ([]int64, error) {
		os, err := st.ClaimOutbounds(ctx, now(), time.Minute, 3)
		return outboundIDs(os), err
	})
	require.Len(t, claimed, n, "every due outbound claimed exactly once")
	again, err := st.ClaimOutbounds(ctx, now().Add(30*time.Second), time.Minute, 100)
	require.NoError(t, err)
	require.Empty(t, again, "leases are still live")
	expired, err := st.ClaimOutbounds(ctx, now().Add(2*time.Minute), time.Minute, 100)
	require.NoError(t, err)
	require.Len(t, expired, n)
}

func testOutboundMatchedOnce(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	h := randHash()
	a := newOutbound(t, st, m, func(o *store.Outbound) { o.PaidBy, o.Status = store.PaidByMerchant, store.OutboundAwaitingPayment })
	b := newOutbound(t, st, m, func(o *store.Outbound) { o.PaidBy, o.Status = store.PaidByMerchant, store.OutboundAwaitingPayment })
	a.TxHash, a.Status = &h, store.OutboundBroadcast
	require.NoError(t, st.UpdateOutbound(ctx, &a))
	b.TxHash, b.Status = &h, store.OutboundBroadcast
	require.ErrorIs(t, st.UpdateOutbound(ctx, &b), store.ErrConflict, "a native transfer settles one outbound")
	// Another log of the same transaction is another transfer.
	li := 3
	b.LogIndex = &li
	require.NoError(t, st.UpdateOutbound(ctx, &b))
}

// One transfer settles at most one outbound, service-paid ones included
// (issue #32: a service-paid payout's transaction also confirmed a
// merchant-paid request).
func testOutboundTransferOnceWhoeverPays(t *testing.T, st store.Store) {
	m, other := newMerchant(t, st), newMerchant(t, st)
	h := randHash()
	sent := newOutbound(t, st, m)
	sent.TxHash, sent.Status = &h, store.OutboundBroadcast
	require.NoError(t, st.UpdateOutbound(ctx, &sent))
	for _, owner := range []store.Merchant{m, other} {
		asked := newOutbound(t, st, owner, func(o *store.Outbound) { o.PaidBy, o.Status = store.PaidByMerchant, store.OutboundAwaitingPayment })
		asked.TxHash, asked.Status = &h, store.OutboundBroadcast
		require.ErrorIs(t, st.UpdateOutbound(ctx, &asked), store.ErrConflict, "the transfer is the service-paid outbound's")
		again := newOutbound(t, st, owner)
		again.TxHash, again.Status = &h, store.OutboundBroadcast
		require.ErrorIs(t, st.UpdateOutbound(ctx, &again), store.ErrConflict)
	}
}

// A transfer the service sent — a transaction it signed, or one from an
// address it holds the key of — settles no merchant-paid outbound: the
// database refuses it (ErrInvariant), and SentByService says so first.
func testOutboundServiceTransferRefused(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	wallet := randAddr()
	require.NoError(t, st.RegisterServiceWallet(ctx, store.ServiceWallet{Address: wallet, Role: store.WalletPayout,
		MerchantID: &m.ID, CreatedAt: now()}))
	signed := newSweepTx(t, st, store.SweepTxOutbound, nil, randAddr(), randAddr(), 0, store.SweepTxMined)
	merchantWallet := randAddr()
	for _, c := range []struct {
		name string
		h    common.Hash
		from common.Address
	}{
		{"a transaction the service signed", signed.TxHash, merchantWallet},
		{"from a payout wallet", randHash(), wallet},
		{"from a deposit address", randHash(), inv.DepositAddress},
	} {
		svc, err := st.SentByService(ctx, c.h, c.from)
		require.NoError(t, err)
		require.True(t, svc, c.name)
		o := newOutbound(t, st, m, func(o *store.Outbound) { o.PaidBy, o.Status = store.PaidByMerchant, store.OutboundAwaitingPayment })
		h, from := c.h, c.from
		o.TxHash, o.FromAddress, o.Status = &h, &from, store.OutboundBroadcast
		require.ErrorIs(t, st.UpdateOutbound(ctx, &o), store.ErrInvariant, c.name)
		got, err := st.GetOutbound(ctx, o.ID)
		require.NoError(t, err)
		require.Nil(t, got.TxHash, "nothing half-written")
		// Created matched, it is refused alike.
		err = st.CreateOutbound(ctx, &store.Outbound{Kind: store.OutboundPayout, MerchantID: m.ID, Amount: store.NewAmount(1),
			AssetSymbol: "ETH", AssetDecimals: 18, Destination: ptr(randAddr()), PaidBy: store.PaidByMerchant,
			Status: store.OutboundBroadcast, TxHash: &h, FromAddress: &from, CreatedAt: now(), UpdatedAt: now()})
		require.ErrorIs(t, err, store.ErrInvariant, c.name)
	}
	h := randHash()
	svc, err := st.SentByService(ctx, h, merchantWallet)
	require.NoError(t, err)
	require.False(t, svc)
	o := newOutbound(t, st, m, func(o *store.Outbound) { o.PaidBy, o.Status = store.PaidByMerchant, store.OutboundAwaitingPayment })
	o.TxHash, o.FromAddress, o.Status, o.SubmittedTxHash = &h, &merchantWallet, store.OutboundBroadcast, &h
	require.NoError(t, st.UpdateOutbound(ctx, &o), "the merchant's own transfer")
	got, err := st.GetOutbound(ctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, h, *got.SubmittedTxHash)
}

func testOutboundSweepTxs(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	o := newOutbound(t, st, m)
	wallet := randAddr()
	send := newSweepTx(t, st, store.SweepTxOutbound, nil, wallet, *o.Destination, 0, store.SweepTxSent)
	_ = send
	// newSweepTx sets no outbound: link one by hand.
	linked := store.SweepTx{OutboundID: &o.ID, Kind: store.SweepTxOutbound, From: wallet, To: *o.Destination, Nonce: 1,
		ValueWei: o.Amount, GasLimit: 21000, MaxFeeWei: store.NewAmount(2), MaxPriorityFeeWei: store.NewAmount(1),
		TxHash: randHash(), RawTx: []byte{1}, Status: store.SweepTxSigned, CreatedAt: now(), UpdatedAt: now()}
	require.NoError(t, st.CreateSweepTx(ctx, &linked))
	got, err := st.ListSweepTxsByOutbound(ctx, o.ID)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, linked.TxHash, got[0].TxHash)
	require.Equal(t, o.ID, *got[0].OutboundID)

	byHash, err := st.ListSweepTxsByHashes(ctx, []common.Hash{linked.TxHash, randHash(), send.TxHash})
	require.NoError(t, err)
	require.Len(t, byHash, 2)
	none, err := st.ListSweepTxsByHashes(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}

func testAPIKeys(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	k := store.APIKey{MerchantID: m.ID, Name: "refunds bot", Digest: randBytes(32), Hash: "$argon2id$x", Prefix: "evmpay_sk_ab",
		Scopes: store.Scopes{store.ScopeRead, store.ScopeRefunds}, CreatedAt: now()}
	require.NoError(t, st.CreateAPIKey(ctx, &k))
	require.NotZero(t, k.ID)
	dup := k
	require.ErrorIs(t, st.CreateAPIKey(ctx, &dup), store.ErrConflict)

	got, err := st.GetAPIKeyByDigest(ctx, k.Digest)
	require.NoError(t, err)
	require.Equal(t, store.Scopes{"read", "refunds"}, got.Scopes)
	require.True(t, got.Scopes.Has(store.ScopeRefunds))
	require.False(t, got.Scopes.Has(store.ScopeApprove))
	require.Nil(t, got.RevokedAt)
	_, err = st.GetAPIKeyByDigest(ctx, randBytes(32))
	require.ErrorIs(t, err, store.ErrNotFound)

	other := newMerchant(t, st)
	_, err = st.RevokeAPIKey(ctx, other.ID, k.ID, now())
	require.ErrorIs(t, err, store.ErrNotFound, "another merchant's key")
	revoked, err := st.RevokeAPIKey(ctx, m.ID, k.ID, now())
	require.NoError(t, err)
	requireTimePtr(t, ptr(now()), revoked.RevokedAt)
	again, err := st.RevokeAPIKey(ctx, m.ID, k.ID, now().Add(time.Hour))
	require.NoError(t, err)
	requireTimePtr(t, ptr(now()), again.RevokedAt)
	list, err := st.ListAPIKeys(ctx, m.ID)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NotNil(t, list[0].RevokedAt)
}

func testPayoutPolicy(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	_, err := st.GetPayoutPolicy(ctx, m.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	token := *usdc().Address
	allowed := randAddr()
	p := store.PayoutPolicy{MerchantID: m.ID, Assets: []store.AssetPolicy{
		{ApprovalThreshold: ptr(maxUint256()), DailyLimit: ptr(store.NewAmount(5))},
		{Token: &token, Reserve: ptr(store.NewAmount(100))},
	}, AllowlistEnabled: true, Allowlist: []common.Address{allowed}, PayingWallets: []common.Address{allowed}, UpdatedAt: now()}
	require.NoError(t, st.PutPayoutPolicy(ctx, p))
	got, err := st.GetPayoutPolicy(ctx, m.ID)
	require.NoError(t, err)
	require.True(t, got.Pays(allowed))
	require.False(t, got.Pays(randAddr()))
	require.Equal(t, maxUint256(), *got.For(nil).ApprovalThreshold)
	require.Equal(t, "100", got.For(&token).Reserve.String())
	require.Nil(t, got.For(&token).DailyLimit)
	require.True(t, got.Allowed(allowed))
	require.False(t, got.Allowed(randAddr()))
	p.AllowlistEnabled, p.UpdatedAt = false, now().Add(time.Hour)
	require.NoError(t, st.PutPayoutPolicy(ctx, p))
	got, err = st.GetPayoutPolicy(ctx, m.ID)
	require.NoError(t, err)
	require.True(t, got.Allowed(randAddr()))
	requireTime(t, now().Add(time.Hour), got.UpdatedAt)
}

func testServiceWallets(t *testing.T, st store.Store) {
	m, n := newMerchant(t, st), newMerchant(t, st)
	sweepW, payout := randAddr(), randAddr()
	require.NoError(t, st.RegisterServiceWallet(ctx, store.ServiceWallet{Address: sweepW, Role: store.WalletSweep, CreatedAt: now()}))
	require.NoError(t, st.RegisterServiceWallet(ctx, store.ServiceWallet{Address: sweepW, Role: store.WalletSweep, CreatedAt: now()}),
		"registering again is a no-op")
	require.ErrorIs(t, st.RegisterServiceWallet(ctx, store.ServiceWallet{Address: sweepW, Role: store.WalletFunder, CreatedAt: now()}),
		store.ErrConflict)

	without, err := st.ListMerchantsWithoutPayoutWallet(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{m.ID, n.ID}, without)
	require.NoError(t, st.RegisterServiceWallet(ctx, store.ServiceWallet{Address: payout, Role: store.WalletPayout, MerchantID: &m.ID, CreatedAt: now()}))
	require.ErrorIs(t, st.RegisterServiceWallet(ctx, store.ServiceWallet{Address: randAddr(), Role: store.WalletPayout, MerchantID: &m.ID, CreatedAt: now()}),
		store.ErrConflict, "one payout wallet per merchant")
	require.Error(t, st.RegisterServiceWallet(ctx, store.ServiceWallet{Address: randAddr(), Role: store.WalletPayout, CreatedAt: now()}),
		"a payout wallet has its merchant")
	without, err = st.ListMerchantsWithoutPayoutWallet(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{n.ID}, without)

	w, err := st.GetPayoutWallet(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, payout, w.Address)
	_, err = st.GetPayoutWallet(ctx, n.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	got, err := st.GetServiceWallet(ctx, sweepW)
	require.NoError(t, err)
	require.Equal(t, store.WalletSweep, got.Role)
	require.Nil(t, got.MerchantID)
	_, err = st.GetServiceWallet(ctx, randAddr())
	require.ErrorIs(t, err, store.ErrNotFound)
	all, err := st.ListServiceWallets(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	for _, w := range all {
		require.Nil(t, w.LedgerFromBlock, "no opening block before the ledger starts")
	}

	// The ledger starts at block 40: every wallet without an opening block
	// gets it; one registered later brings its own.
	opened, err := st.OpenServiceWallets(ctx, 40)
	require.NoError(t, err)
	require.Equal(t, 2, opened)
	late, at := randAddr(), uint64(55)
	require.NoError(t, st.RegisterServiceWallet(ctx, store.ServiceWallet{Address: late, Role: store.WalletPayout, MerchantID: &n.ID,
		CreatedAt: now(), LedgerFromBlock: &at}))
	opened, err = st.OpenServiceWallets(ctx, 60)
	require.NoError(t, err)
	require.Zero(t, opened, "an opening block is never moved")
	all, err = st.ListServiceWallets(ctx)
	require.NoError(t, err)
	require.Len(t, all, 3)
	for _, w := range all {
		require.NotNil(t, w.LedgerFromBlock, w.Address)
		if w.Address == late {
			require.Equal(t, uint64(55), *w.LedgerFromBlock)
		} else {
			require.Equal(t, uint64(40), *w.LedgerFromBlock)
		}
	}
}

// ledgerOf lists every entry in (At, ID) order.
func ledgerOf(t *testing.T, st store.Store, merchantID *int64) []store.LedgerEntry {
	t.Helper()
	es, err := st.ListLedgerEntries(ctx, store.LedgerFilter{MerchantID: merchantID, Limit: 10000})
	require.NoError(t, err)
	return es
}

func testLedgerPayments(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.SetAsset(usdc()) })
	blocks, txs := chainOf(10, 3, 1, randHash())
	require.NoError(t, st.InsertBlocks(ctx, blocks, txs))
	token := *usdc().Address
	one := store.Payment{InvoiceID: inv.ID, TxHash: randHash(), LogIndex: 2, BlockNumber: 10, BlockHash: blocks[0].Hash,
		From: randAddr(), AmountWei: maxUint256(), CreatedAt: now(), Token: &token}
	require.NoError(t, st.InsertPayment(ctx, &one))
	bulk := []store.Payment{
		{InvoiceID: inv.ID, TxHash: randHash(), LogIndex: store.NativeLogIndex, BlockNumber: 11, BlockHash: blocks[1].Hash,
			From: randAddr(), AmountWei: store.NewAmount(9), CreatedAt: now(), WrongAsset: true},
		{InvoiceID: inv.ID, TxHash: randHash(), LogIndex: 0, BlockNumber: 40, BlockHash: randHash(),
			From: randAddr(), AmountWei: store.NewAmount(5), CreatedAt: now().Add(time.Minute), Token: &token},
	}
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error { return tx.InsertPayments(ctx, bulk) }))

	es := ledgerOf(t, st, &m.ID)
	require.Len(t, es, 3, "every payment, counted or not, has its entry")
	byTx := map[common.Hash]store.LedgerEntry{}
	for _, e := range es {
		require.Equal(t, store.LedgerPayment, e.Kind)
		require.Equal(t, inv.ID, *e.InvoiceID)
		require.Equal(t, m.ID, *e.MerchantID)
		require.Equal(t, inv.DepositAddress, *e.To)
		require.NotNil(t, e.PaymentID)
		byTx[*e.TxHash] = e
	}
	e := byTx[one.TxHash]
	require.Equal(t, maxUint256(), e.Amount)
	require.Equal(t, token, *e.Token)
	require.Equal(t, one.From, *e.From)
	require.Equal(t, 2, *e.LogIndex)
	require.EqualValues(t, 10, *e.BlockNumber)
	requireTime(t, time.Unix(int64(blocks[0].Timestamp), 0), e.At)
	native := byTx[bulk[0].TxHash]
	require.Nil(t, native.Token)
	require.Nil(t, native.LogIndex, "a native payment has no log")
	requireTime(t, time.Unix(int64(blocks[1].Timestamp), 0), native.At)
	requireTime(t, now().Add(time.Minute), byTx[bulk[1].TxHash].At) // without its block indexed: when it was recorded

	removed, err := st.DeletePaymentsFromBlock(ctx, 11)
	require.NoError(t, err)
	require.Len(t, removed, 2)
	es = ledgerOf(t, st, &m.ID)
	require.Len(t, es, 5, "a reorg appends reversals, never deletes")
	var reversed []int64
	for _, e := range es {
		if e.Reverses != nil {
			reversed = append(reversed, *e.Reverses)
			orig := byTx[*e.TxHash]
			require.Equal(t, orig.ID, *e.Reverses)
			require.Equal(t, *orig.From, *e.To, "a reversal swaps from and to")
			require.Equal(t, *orig.To, *e.From)
			require.Equal(t, orig.Amount, e.Amount)
			require.Equal(t, *orig.BlockNumber, *e.BlockNumber, "a reversal keeps the block of what it undoes")
		}
	}
	require.ElementsMatch(t, []int64{byTx[bulk[0].TxHash].ID, byTx[bulk[1].TxHash].ID}, reversed)
}

func testLedgerEntries(t *testing.T, st store.Store) {
	m, other := newMerchant(t, st), newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	o := newOutbound(t, st, other)
	wallet := randAddr()
	sweepTx := newSweepTx(t, st, store.SweepTxFunding, &inv.ID, wallet, inv.DepositAddress, 0, store.SweepTxMined)
	block := uint64(20)
	at := now().Add(-time.Hour)
	es := []store.LedgerEntry{
		{Kind: store.LedgerGasFunding, InvoiceID: &inv.ID, SweepTxID: &sweepTx.ID, From: &wallet, To: &inv.DepositAddress,
			Amount: store.NewAmount(42000), TxHash: &sweepTx.TxHash, BlockNumber: &block, At: at, RecordedAt: now()},
		{Kind: store.LedgerGasFee, InvoiceID: &inv.ID, SweepTxID: &sweepTx.ID, From: &wallet,
			Amount: store.NewAmount(21000), TxHash: &sweepTx.TxHash, BlockNumber: &block, At: at, RecordedAt: now()},
		{Kind: store.LedgerPayout, OutboundID: &o.ID, From: &wallet, To: o.Destination, Amount: maxUint256(),
			BlockNumber: ptr(uint64(21)), At: at.Add(time.Second), RecordedAt: now()},
		{Kind: store.LedgerOpeningBalance, To: &wallet, Amount: store.NewAmount(7), BlockNumber: ptr(uint64(5)),
			At: at.Add(-time.Hour), RecordedAt: now(), FiatCurrency: "USD", FiatMinor: ptr(store.NewAmount(3))},
	}
	require.NoError(t, st.InsertLedgerEntries(ctx, es))
	mine := ledgerOf(t, st, &m.ID)
	require.Len(t, mine, 2, "merchant from the invoice")
	theirs := ledgerOf(t, st, &other.ID)
	require.Len(t, theirs, 1, "merchant from the outbound")
	require.Equal(t, maxUint256(), theirs[0].Amount)
	all := ledgerOf(t, st, nil)
	require.Len(t, all, 4)
	require.Equal(t, store.LedgerOpeningBalance, all[0].Kind, "in time order")
	require.Nil(t, all[0].MerchantID)
	require.Equal(t, "3", all[0].FiatMinor.String())
	require.Nil(t, all[2].To, "a gas fee goes to no one")

	n, err := st.ReverseLedgerEntries(ctx, sweepTx.ID, now())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = st.ReverseLedgerEntries(ctx, sweepTx.ID, now())
	require.NoError(t, err)
	require.Zero(t, n, "an entry is reversed once")
	mine = ledgerOf(t, st, &m.ID)
	require.Len(t, mine, 4)
	for _, e := range mine[2:] {
		require.NotNil(t, e.Reverses)
		requireTime(t, now(), e.At)
	}

	// Pages in (At, ID) order, bounded by time.
	var pages []int64
	f := store.LedgerFilter{Limit: 3}
	for {
		page, err := st.ListLedgerEntries(ctx, f)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			pages = append(pages, e.ID)
		}
		last := page[len(page)-1]
		f.AfterAt, f.AfterID = last.At, last.ID
	}
	require.Len(t, pages, 6)
	bounded, err := st.ListLedgerEntries(ctx, store.LedgerFilter{From: at, To: now()})
	require.NoError(t, err)
	require.Len(t, bounded, 3, "from is inclusive, to exclusive")

	scan, err := st.ScanLedgerEntries(ctx, store.LedgerScan{MaxBlock: 20})
	require.NoError(t, err)
	require.Len(t, scan, 5, "every entry of a block at or below 20, reversals included")
	scan, err = st.ScanLedgerEntries(ctx, store.LedgerScan{MaxBlock: 100, AfterID: scan[0].ID, Limit: 2})
	require.NoError(t, err)
	require.Len(t, scan, 2)
}

func testInboundTransfers(t *testing.T, st store.Store) {
	blocks, txs := chainOf(30, 3, 3, randHash())
	watched := randAddr()
	txs[1].To, txs[4].To = &watched, &watched
	txs[2].To = &watched
	txs[2].ValueWei = store.Amount{} // no value: no movement
	token := randAddr()
	trs := transfersOf(blocks, txs, token, 2)
	trs[3].To = watched // block 31
	trs[3].Value = store.NewAmount(77)
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.InsertBlocks(ctx, blocks, txs); err != nil {
			return err
		}
		return tx.InsertTokenTransfers(ctx, trs)
	}))
	got, err := st.ListInboundTransfers(ctx, []common.Address{watched, randAddr()}, 30, 32)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, txs[1].Hash, got[0].TxHash)
	require.Nil(t, got[0].LogIndex)
	require.Nil(t, got[0].Token)
	require.Equal(t, maxUint256(), got[0].Amount)
	require.EqualValues(t, blocks[0].Timestamp, got[0].BlockTime)
	require.Equal(t, txs[4].Hash, got[1].TxHash, "block 31, by position: the transaction first")
	require.Equal(t, trs[3].TxHash, got[2].TxHash, "then the token transfer")
	require.Equal(t, token, *got[2].Token)
	require.Equal(t, 1, *got[2].LogIndex)
	require.Equal(t, "77", got[2].Amount.String())
	none, err := st.ListInboundTransfers(ctx, []common.Address{watched}, 33, 40)
	require.NoError(t, err)
	require.Empty(t, none)
}
