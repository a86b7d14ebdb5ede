package invoice_test

import (
	"fmt"
	"math/big"
	"net/http"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// Issue #32: the money-out defects found from outside.

// merchantPaidPayout requests a merchant-paid payout of amount wei to dest.
func (e *env) merchantPaidPayout(key string, amount string, dest common.Address) map[string]any {
	e.t.Helper()
	res := e.do("POST", "/v1/payouts", key, `{"amount":"`+amount+`","destination":"`+dest.Hex()+`","paid_by":"merchant"}`,
		"Idempotency-Key", fmt.Sprintf("mp-%s-%s", amount, dest.Hex()))
	require.Equal(e.t, http.StatusCreated, res.Status, "%s", res.Body)
	v := res.json(e.t)
	require.Equal(e.t, store.OutboundAwaitingPayment, v["status"])
	return v
}

// indexTx indexes a native transfer in block n (with the chain's blocks up
// to there).
func (e *env) indexTx(n uint64, h common.Hash, from, to common.Address, value string) {
	e.t.Helper()
	e.chainAt(n - 1)
	b := store.Block{Number: n, Hash: common.BigToHash(new(big.Int).SetUint64(n + 1000)), Timestamp: 1_800_000_000 + n, IndexedAt: e.clock.Now()}
	tx := store.Transaction{Hash: h, BlockNumber: n, BlockHash: b.Hash, From: from, To: &to, ValueWei: store.MustParseAmount(value)}
	require.NoError(e.t, e.st.InsertBlocks(ctx, []store.Block{b}, []store.Transaction{tx}))
}

// The transaction a merchant names as its merchant-paid request's payment
// is checked once indexed: exactly the asset and amount to the
// destination, after the request, and not the service's own.
func TestMerchantPaid_NamedTransaction_CheckedAgainstTheIndex(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		e.chainAt(5)
		dest := common.HexToAddress("0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65")
		mine := common.HexToAddress("0x976EA74026E726554dB657fA54763abd0C3a0aa9")
		o := e.merchantPaidPayout(m.APIKey, "7700000000000000", dest)
		path := fmt.Sprintf("/v1/payouts/%d/payment", int64(o["id"].(float64)))

		wrongAmount, exact, pending := common.Hash{0xa1}, common.Hash{0xa2}, common.Hash{0xa3}
		e.indexTx(7, wrongAmount, mine, dest, "7700000000000001")
		e.indexTx(8, exact, mine, dest, "7700000000000000")

		requireProblem(t, e.do("POST", path, m.APIKey, `{"tx_hash":"0x12"}`), http.StatusBadRequest, "invalid_hash", "tx_hash")
		requireProblem(t, e.do("POST", path, m.APIKey, `{"tx_hash":"`+exact.Hex()+`","x":1}`), http.StatusBadRequest, "unknown_field", "x")
		res := e.do("POST", path, m.APIKey, `{"tx_hash":"`+wrongAmount.Hex()+`"}`)
		requireProblem(t, res, http.StatusUnprocessableEntity, "transfer_mismatch", "tx_hash")
		require.Contains(t, string(res.Body), store.ErrNotThisRequest.Error())

		// Sent by the service (a transaction it signed): refused alike.
		signed := store.SweepTx{Kind: store.SweepTxOutbound, From: common.Address{0x5e}, To: dest, ValueWei: store.MustParseAmount("7700000000000000"),
			GasLimit: 21000, MaxFeeWei: store.NewAmount(2), MaxPriorityFeeWei: store.NewAmount(1), TxHash: common.Hash{0xa4},
			RawTx: []byte{1}, Status: store.SweepTxMined, CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now()}
		require.NoError(t, e.st.CreateSweepTx(ctx, &signed))
		e.indexTx(9, signed.TxHash, signed.From, dest, "7700000000000000")
		res = e.do("POST", path, m.APIKey, `{"tx_hash":"`+signed.TxHash.Hex()+`"}`)
		requireProblem(t, res, http.StatusUnprocessableEntity, "transfer_mismatch", "tx_hash")
		require.Contains(t, string(res.Body), store.ErrSentByService.Error())

		// Not indexed yet: recorded, checked by the engine later.
		res = e.do("POST", path, m.APIKey, `{"tx_hash":"`+pending.Hex()+`"}`)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, pending.Hex(), res.json(t)["submitted_tx_hash"])
		// The exact one replaces it.
		res = e.do("POST", path, m.APIKey, `{"tx_hash":"`+exact.Hex()+`"}`)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		got, err := e.st.GetOutbound(ctx, int64(o["id"].(float64)))
		require.NoError(t, err)
		require.Equal(t, exact, *got.SubmittedTxHash)

		// Another merchant cannot see it; a service-paid one takes none.
		other := e.newMerchant()
		requireProblem(t, e.do("POST", path, other.APIKey, `{"tx_hash":"`+exact.Hex()+`"}`), http.StatusNotFound, "not_found", "")
		sp := e.do("POST", "/v1/payouts", m.APIKey, `{"amount":"5","destination":"`+dest.Hex()+`"}`, "Idempotency-Key", "service-paid")
		require.Equal(t, http.StatusCreated, sp.Status, "%s", sp.Body)
		requireProblem(t, e.do("POST", fmt.Sprintf("/v1/payouts/%d/payment", int64(sp.json(t)["id"].(float64))), m.APIKey,
			`{"tx_hash":"`+exact.Hex()+`"}`), http.StatusConflict, "state_conflict", "")
	})
}

// The merchant's paying wallets are payout settings (owner only): never an
// address of the service.
func TestPayoutSettings_PayingWallets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	w1, w2 := common.HexToAddress("0x976EA74026E726554dB657fA54763abd0C3a0aa9"), common.HexToAddress("0x14dC79964da2C08b23698B3D3cc7Ca32193d9955")
	res := e.do("PUT", "/v1/merchant/payout-settings", m.APIKey, `{"paying_wallets":["`+w1.Hex()+`","`+w2.Hex()+`","`+w1.Hex()+`"]}`)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, []any{w1.Hex(), w2.Hex()}, res.json(t)["paying_wallets"])
	p, err := e.st.GetPayoutPolicy(ctx, m.ID)
	require.NoError(t, err)
	require.True(t, p.Pays(w1) && p.Pays(w2))

	inv := e.mustCreate(m.APIKey, "k", `{"amount_wei":"1"}`)
	requireProblem(t, e.do("PUT", "/v1/merchant/payout-settings", m.APIKey, `{"paying_wallets":["`+inv.DepositAddress.Hex()+`"]}`),
		http.StatusUnprocessableEntity, "destination_reserved", "paying_wallets[0]")
	requireProblem(t, e.do("PUT", "/v1/merchant/payout-settings", m.APIKey, `{"paying_wallets":"`+w1.Hex()+`"}`),
		http.StatusBadRequest, "invalid_field", "paying_wallets")
	p, err = e.st.GetPayoutPolicy(ctx, m.ID)
	require.NoError(t, err)
	require.Len(t, p.PayingWallets, 2, "a refused change leaves the settings as they were")
	admin, _ := e.scopedKey(m.APIKey, store.AllScopes()...)
	requireProblem(t, e.do("PUT", "/v1/merchant/payout-settings", admin, `{"paying_wallets":[]}`), http.StatusForbidden, "insufficient_scope", "")
}

// Where the money goes is the owner's: an admin key cannot change the
// settlement address; the owner's change is written with its event.
func TestSettlementAddress_OwnerOnly_ChangeEvented(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		admin, _ := e.scopedKey(m.APIKey, store.ScopeAdmin)
		before, err := e.st.GetMerchant(ctx, m.ID)
		require.NoError(t, err)
		to := common.HexToAddress("0xa0Ee7A142d267C1f36714E4a8F75612F20a79720")
		res := e.do("PATCH", "/v1/merchant", admin, `{"settlement_address":"`+to.Hex()+`"}`)
		requireProblem(t, res, http.StatusForbidden, "insufficient_scope", "settlement_address")
		res = e.do("PATCH", "/v1/merchant", admin, `{"name":"renamed","settlement_address":"`+to.Hex()+`"}`)
		requireProblem(t, res, http.StatusForbidden, "insufficient_scope", "settlement_address")
		after, err := e.st.GetMerchant(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, before.SettlementAddress, after.SettlementAddress, "refused: nothing changed")
		require.Equal(t, before.Name, after.Name, "nothing half-written")
		require.Equal(t, http.StatusOK, e.do("PATCH", "/v1/merchant", admin, `{"name":"renamed"}`).Status, "the profile is admin's")

		res = e.do("PATCH", "/v1/merchant", m.APIKey, `{"settlement_address":"`+to.Hex()+`"}`)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, to.Hex(), res.json(t)["settlement_address"])
		evs, err := e.st.ListEventsByInvoice(ctx, 0)
		require.NoError(t, err)
		var changed []store.Event
		for _, ev := range evs {
			if ev.Type == store.EventSettlementAddressChanged && ev.MerchantID == m.ID {
				changed = append(changed, ev)
			}
		}
		require.Len(t, changed, 1)
		require.JSONEq(t, fmt.Sprintf(`{"merchant_id":%d,"previous_settlement_address":%q,"settlement_address":%q,"changed_by":"owner_key","changed_at":%q}`,
			m.ID, before.SettlementAddress.Hex(), to.Hex(), e.clock.Now().UTC().Format("2006-01-02T15:04:05.999999999Z07:00")), string(changed[0].Data))
		// The same address again is no change: no event.
		require.Equal(t, http.StatusOK, e.do("PATCH", "/v1/merchant", m.APIKey, `{"settlement_address":"`+to.Hex()+`"}`).Status)
		evs, err = e.st.ListEventsByInvoice(ctx, 0)
		require.NoError(t, err)
		n := 0
		for _, ev := range evs {
			if ev.Type == store.EventSettlementAddressChanged && ev.MerchantID == m.ID {
				n++
			}
		}
		require.Equal(t, 1, n)
	})
}

// Every object of every body is read by one strict decoder: a member given
// twice, in another case, or unknown is refused at any depth — a refund's
// fiat object took the last of two amounts (40.00 EUR refunded for a
// request whose first amount said 1.00).
func TestStrictObjects_NestedMembersRefusedLikeTopLevelOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	inv := e.paidInvoice(m, "1000000000000000000")
	for _, c := range []struct{ body, code, field string }{
		{`{"fiat":{"amount":"1.00","currency":"EUR","rate":"current","amount":"40.00"}}`, "duplicate_field", "fiat.amount"},
		{`{"fiat":{"AMOUNT":"40.00","currency":"EUR","rate":"current"}}`, "unknown_field", "fiat.AMOUNT"},
		{`{"fiat":{"amount":"1.00","currency":"EUR","rate":"current","note":"x"}}`, "unknown_field", "fiat.note"},
		{`{"reference":"a","reference":"b"}`, "duplicate_field", "reference"},
	} {
		res := e.refund(m.APIKey, inv.ID, "strict-"+c.field, c.body)
		requireProblem(t, res, http.StatusBadRequest, c.code, c.field)
	}
	os, err := e.st.ListOutbounds(ctx, store.OutboundFilter{MerchantID: m.ID})
	require.NoError(t, err)
	require.Empty(t, os, "nothing was made")

	for _, c := range []struct{ body, code, field string }{
		{`{"amount_wei":"1","metadata":{"order":{"id":1,"id":2}}}`, "duplicate_field", "metadata.order.id"},
		{`{"amount_wei":"1","metadata":{"lines":[{"sku":"a","sku":"b"}]}}`, "duplicate_field", "metadata.lines[].sku"},
	} {
		requireProblem(t, e.createInvoice(m.APIKey, "strict-"+c.field, c.body), http.StatusBadRequest, c.code, c.field)
	}
	requireProblem(t, e.do("PATCH", "/v1/merchant", m.APIKey, `{"underpayment_tolerance":{"percent":"1","percent":"90"}}`),
		http.StatusBadRequest, "duplicate_field", "underpayment_tolerance.percent")
}

// The operator exports the whole ledger — the service's own movements (a
// gas funder's top-up, which belongs to no merchant) with every
// merchant's — that no merchant export holds.
func TestLedger_OperatorExportHoldsTheServicesOwnMovements(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	e.paidInvoice(m, "1500000000000000000")
	funder, sweepWallet, h := common.Address{0xf0}, common.Address{0x5e}, common.Hash{0x70}
	blk := uint64(11)
	require.NoError(t, e.st.InsertLedgerEntries(ctx, []store.LedgerEntry{{Kind: store.LedgerTopUp, From: &funder, To: &sweepWallet,
		Amount: store.MustParseAmount("250000000000000000"), TxHash: &h, BlockNumber: &blk, At: e.clock.Now(), RecordedAt: e.clock.Now()}}))

	mine := e.do("GET", "/v1/ledger?format=jsonl", m.APIKey, "")
	require.Equal(t, http.StatusOK, mine.Status)
	require.NotContains(t, string(mine.Body), "top_up", "not the merchant's")
	requireProblem(t, e.do("GET", "/v1/admin/ledger", m.APIKey, ""), http.StatusUnauthorized, "unauthorized", "")
	all := e.do("GET", "/v1/admin/ledger?format=csv", adminToken, "")
	require.Equal(t, http.StatusOK, all.Status, "%s", all.Body)
	require.Contains(t, string(all.Body), ",top_up,")
	require.Contains(t, string(all.Body), sweepWallet.Hex())
	require.Contains(t, string(all.Body), ",payment,")
}
