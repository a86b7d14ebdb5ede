package invoice_test

import (
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// otherChain is a second chain the services of these tests create
// invoices on: its own native coin, USDC (configured there only), three
// confirmations.
const otherChain = 9000

func withOtherChain(c *invoice.Config) {
	c.Chains = []invoice.Chain{{ID: otherChain, Confirmations: 3, Assets: []store.Asset{
		store.NativeAsset("TEST"), {Symbol: "USDC", Address: &usdcAddr, Decimals: 6}}}}
}

// blocksOn indexes blocks up to head on chain id (from the chain's next).
func (e *env) blocksOn(id uint64, head uint64) {
	e.t.Helper()
	st := e.st.Chain(id)
	from := uint64(0)
	if latest, err := st.LatestBlock(ctx); err == nil {
		from = latest.Number + 1
	}
	var bs []store.Block
	for n := from; n <= head; n++ {
		bs = append(bs, store.Block{Number: n, Hash: common.BigToHash(new(big.Int).SetUint64(n + id)), Timestamp: 1_800_000_000 + n,
			IndexedAt: e.clock.Now()})
	}
	require.NoError(e.t, st.InsertBlocks(ctx, bs, nil))
}

// An invoice names its chain in chain_id: its payment URI carries it, its
// assets are that chain's, and a chain the service does not serve (or a
// malformed id) is refused with nothing written.
func TestCreate_ChainID_TheInvoiceIsOnTheNamedChain(t *testing.T) {
	t.Parallel()
	bothStoresWith(t, withOtherChain, func(t *testing.T, e *env) {
		m := e.newMerchant()
		require.Equal(t, []uint64{chainID, otherChain}, e.svc.ChainIDs())
		assets, ok := e.svc.ChainAssets(otherChain)
		require.True(t, ok)
		require.Equal(t, []string{"TEST", "USDC"}, []string{assets[0].Symbol, assets[1].Symbol}, "the chain's coin first, then its tokens")
		_, ok = e.svc.ChainAssets(5)
		require.False(t, ok, "a chain not served")

		home := e.mustCreate(m.APIKey, "h", `{"amount_wei":"1000"}`)
		require.EqualValues(t, chainID, home.ChainID)
		require.Equal(t, "ethereum:"+home.DepositAddress.Hex()+"@1337?value=1000", home.PaymentURI)

		other := e.createInvoice(m.APIKey, "o", `{"chain_id":9000,"asset":"USDC","amount_formatted":"2.5"}`)
		require.Equal(t, http.StatusCreated, other.Status, "%s", other.Body)
		body := other.json(t)
		require.EqualValues(t, otherChain, body["chain_id"])
		deposit := common.HexToAddress(body["deposit_address"].(string))
		require.Equal(t, "ethereum:"+usdcAddr.Hex()+"@9000/transfer?address="+deposit.Hex()+"&uint256=2500000", body["payment_uri"])
		require.NotEqual(t, home.DepositAddress, deposit, "every invoice has its own address, whatever its chain")

		native := e.mustCreate(m.APIKey, "n", `{"chain_id":"9000","amount_wei":"7"}`)
		require.EqualValues(t, otherChain, native.ChainID)
		require.True(t, strings.HasSuffix(native.PaymentURI, "@9000?value=7"), native.PaymentURI)
		inv, err := e.st.GetInvoice(ctx, native.ID)
		require.NoError(t, err)
		require.Equal(t, "TEST", inv.AssetSymbol, "the chain's own native coin")

		// USDC is configured on 9000 only.
		requireProblem(t, e.createInvoice(m.APIKey, "u", `{"asset":"USDC","amount":"1"}`), http.StatusBadRequest, "unknown_asset", "asset")
		requireProblem(t, e.createInvoice(m.APIKey, "c1", `{"chain_id":1,"amount_wei":"1"}`), http.StatusBadRequest, "unknown_chain", "chain_id")
		for i, bad := range []string{`0`, `-1`, `1.5`, `"abc"`, `"09000"`, `1e3`, `true`, `18446744073709551616`} {
			res := e.createInvoice(m.APIKey, fmt.Sprintf("bad-%d", i), `{"chain_id":`+bad+`,"amount_wei":"1"}`)
			requireProblem(t, res, http.StatusBadRequest, "invalid_field", "chain_id")
		}
		list, err := e.st.ListInvoices(ctx, store.InvoiceFilter{MerchantID: m.ID, Limit: 100})
		require.NoError(t, err)
		require.Len(t, list, 3, "nothing written by a refused request")
	})
}

// The public read counts an invoice's confirmations on its own chain, with
// its chain's threshold; a refund of it needs its chain's confirmations and
// is recorded on its chain (the engine of that chain sends it).
func TestChainID_ConfirmationsAndRefundsOnTheInvoicesChain(t *testing.T) {
	t.Parallel()
	bothStoresWith(t, withOtherChain, func(t *testing.T, e *env) {
		m := e.newMerchant()
		inv := e.mustCreate(m.APIKey, "o", `{"chain_id":9000,"amount_wei":"1000000000000000000"}`)
		p := store.Payment{InvoiceID: inv.ID, TxHash: common.HexToHash("0xaa"), LogIndex: store.NativeLogIndex, BlockNumber: 10,
			BlockHash: common.Hash{1}, From: payer, AmountWei: store.MustParseAmount("1000000000000000000"), CreatedAt: e.clock.Now()}
		require.NoError(t, e.st.Chain(otherChain).InsertPayment(ctx, &p))
		stored, err := e.st.GetInvoice(ctx, inv.ID)
		require.NoError(t, err)
		paidAt := e.clock.Now()
		stored.PaidWei, stored.Status, stored.PaidAt = p.AmountWei, store.StatusPaid, &paidAt
		require.NoError(t, e.st.UpdateInvoice(ctx, &stored))
		e.chainAt(40)              // New's chain is far ahead: not this invoice's
		e.blocksOn(otherChain, 11) // one block on top on its own chain

		pub := e.do("GET", "/v1/public/invoice", inv.LookupToken, "").json(t)
		require.EqualValues(t, 1, pub["confirmations"])
		require.EqualValues(t, 3, pub["confirmations_required"])

		one := `{"amount":"1","destination":"` + payer.Hex() + `"}`
		res := e.refund(m.APIKey, inv.ID, "r1", one)
		requireProblem(t, res, http.StatusUnprocessableEntity, "refund_exceeds_received", "amount")
		require.Contains(t, res.json(t)["detail"], "with 3 confirmations")

		e.blocksOn(otherChain, 13)
		ok := e.refund(m.APIKey, inv.ID, "r2", one)
		require.Equal(t, http.StatusCreated, ok.Status, "%s", ok.Body)
		o, err := e.st.GetOutbound(ctx, int64(ok.json(t)["id"].(float64)))
		require.NoError(t, err)
		require.EqualValues(t, otherChain, o.ChainID, "the refund is sent on the invoice's chain")
		require.Equal(t, "TEST", o.AssetSymbol)
	})
}

// A Chains entry New cannot use is refused with what is wrong.
func TestNew_Chains_Refused(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, newSQLite(t))
	for name, c := range map[string]invoice.Chain{
		"chain id must not be zero": {},
		"chain 1337 given twice":    {ID: chainID},
		"takes no confirmations":    {ID: 5, Finality: store.FinalityInstant, Confirmations: 2},
		`symbol "usdc" given twice`: {ID: 5, Assets: []store.Asset{{Symbol: "USDC", Address: &usdcAddr, Decimals: 6}, {Symbol: "usdc", Address: &common.Address{9}, Decimals: 6}}},
	} {
		_, err := invoice.New(e.st, e.creds, testDeriver(t), chainID, invoice.Config{Chains: []invoice.Chain{c}})
		require.ErrorContains(t, err, name)
	}
}

// fiatOnTwoChains is a Service on f that prices in fiat, with USDC on its
// own chain and, on otherChain, that chain's coin and USDC (three
// confirmations); stopped is its Config.ChainStopped.
func fiatOnTwoChains(t *testing.T, f *fiatEnv, stopped func(uint64) error) *invoice.Service {
	t.Helper()
	svc, err := invoice.New(f.st, f.creds, testDeriver(t), chainID, invoice.Config{Now: f.clock.Now, Pricer: f.pricer,
		Assets: []store.Asset{{Symbol: "USDC", Address: &usdcAddr, Decimals: 6}},
		Chains: []invoice.Chain{{ID: otherChain, Confirmations: 3, Assets: []store.Asset{store.NativeAsset("TEST"),
			{Symbol: "USDC", Address: &usdcAddr, Decimals: 6}}}},
		ChainStopped: stopped})
	require.NoError(t, err)
	return svc
}

// A fiat invoice accepts an asset on another chain the service serves by
// "asset@chain": a quote on that chain, with a payment URI of that chain;
// the public read and its QR code tell the quotes apart by chain.
func TestFiat_AcceptOnAnotherChain_AQuoteOnThatChain(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		f := newFiatEnv(t, e.st)
		svc := fiatOnTwoChains(t, f, nil)
		owner, created := acceptOnBoth(t, f, svc)
		require.EqualValues(t, chainID, created.ChainID)
		require.Len(t, created.Quotes, 2)
		deposit := created.DepositAddress
		require.EqualValues(t, chainID, created.Quotes[0].ChainID)
		require.EqualValues(t, otherChain, created.Quotes[1].ChainID)
		require.Equal(t, "10000000", created.Quotes[1].Amount.String(), "8 EUR at 0.80 EUR per USDC")
		require.Equal(t, fmt.Sprintf("ethereum:%s@9000/transfer?address=%s&uint256=10000000", usdcAddr.Hex(), deposit), created.Quotes[1].PaymentURI)

		// The public read: each quote with its chain.
		mux := httpapi.NewMux()
		svc.Routes(mux)
		srv := httptest.NewServer(mux)
		defer srv.Close()
		get := func(path string) result {
			req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+created.LookupToken)
			return send(t, req)
		}
		pub := get("/v1/public/invoice").json(t)
		qs := quotesOf(t, pub)
		require.EqualValues(t, chainID, qs[0]["chain_id"])
		require.EqualValues(t, otherChain, qs[1]["chain_id"])
		require.Contains(t, qs[1]["payment_uri"], "@9000/transfer")
		// The same token address on both chains: chain_id picks the QR.
		own, other := get("/v1/public/invoice/qr.svg?asset=USDC"), get("/v1/public/invoice/qr.svg?asset=USDC&chain_id=9000")
		require.Equal(t, http.StatusOK, own.Status, "%s", own.Body)
		require.Equal(t, http.StatusOK, other.Status, "%s", other.Body)
		want, err := invoice.QRSVG(created.Quotes[1].PaymentURI)
		require.NoError(t, err)
		require.Equal(t, want, other.Body)
		require.NotEqual(t, own.Body, other.Body)
		requireProblem(t, get("/v1/public/invoice/qr.svg?asset=USDC&chain_id=5"), http.StatusBadRequest, "invalid_parameter", "asset")
		requireProblem(t, get("/v1/public/invoice/qr.svg?chain_id=9000"), http.StatusBadRequest, "invalid_parameter", "chain_id")

		// Once a payment counts (here on the invoice's chain), only that
		// chain's quotes are offered.
		payOneUSDC(t, f, created.ID, common.HexToHash("0xcc"))
		pub = get("/v1/public/invoice").json(t)
		qs = quotesOf(t, pub)
		require.Len(t, qs, 1, "the other chain's quote is no longer offered")
		require.EqualValues(t, chainID, qs[0]["chain_id"])
		require.Equal(t, "1000000", qs[0]["paid"])

		for i, c := range []struct {
			accept      []string
			code, field string
		}{
			{[]string{"USDC@9000", "USDC"}, "invalid_field", "accept[0]"},
			{[]string{"USDC", "USDC@1"}, "unknown_chain", "accept[1]"},
			{[]string{"USDC", "USDC@09000"}, "invalid_field", "accept[1]"},
			{[]string{"USDC", "USDC@9000", "usdc@9000"}, "invalid_field", "accept[2]"},
			{[]string{"USDC", "TEST@1337"}, "unknown_asset", "accept[1]"},
		} {
			_, err := svc.CreateInvoice(ctx, owner, fmt.Sprintf("bad-%d", i), invoice.InvoiceParams{
				Price: &invoice.Price{Amount: "8.00", Currency: "EUR"}, Accept: c.accept})
			var p *problem.Problem
			require.ErrorAs(t, err, &p, "%v", c.accept)
			require.Equal(t, c.code, p.Code, "%v: %v", c.accept, err)
			require.Equal(t, c.field, p.Field, "%v", c.accept)
		}
	})
}

// A payment that arrived on another chain (recorded by that chain's
// settlement as wrong-network) is refunded on that chain: reason
// wrong_network, in that chain's asset, once it has that chain's
// confirmations; the invoice's own refunds never count it.
func TestRefund_WrongNetwork_OnTheChainTheMoneyArrivedOn(t *testing.T) {
	t.Parallel()
	bothStoresWith(t, withOtherChain, func(t *testing.T, e *env) {
		m := e.newMerchant()
		inv := e.mustCreate(m.APIKey, "i", `{"amount_wei":"1000000000000000000"}`)
		bare := e.mustCreate(m.APIKey, "b", `{"amount_wei":"5"}`)
		p := store.Payment{InvoiceID: inv.ID, TxHash: common.HexToHash("0xbb"), LogIndex: store.NativeLogIndex, BlockNumber: 10,
			BlockHash: common.Hash{2}, From: payer, AmountWei: store.MustParseAmount("700"), CreatedAt: e.clock.Now(), WrongNetwork: true}
		require.NoError(t, e.st.Chain(otherChain).InsertPayment(ctx, &p))
		e.chainAt(40)
		e.blocksOn(otherChain, 11)
		dest := `"destination":"` + payer.Hex() + `"`

		// Not yet its chain's 3 confirmations.
		requireProblem(t, e.refund(m.APIKey, inv.ID, "w0", `{"reason":"wrong_network",`+dest+`}`),
			http.StatusUnprocessableEntity, "nothing_to_refund", "")
		e.blocksOn(otherChain, 13)
		// The invoice's own refunds do not see it.
		requireProblem(t, e.refund(m.APIKey, inv.ID, "f0", `{"reason":"full",`+dest+`}`),
			http.StatusUnprocessableEntity, "nothing_to_refund", "")
		for i, c := range []struct{ body, code, field string }{
			{`{"reason":"wrong_network","chain_id":1337,` + dest + `}`, "invalid_field", "chain_id"},
			{`{"reason":"full","chain_id":9000,` + dest + `}`, "invalid_field", "chain_id"},
			{`{"reason":"wrong_network","chain_id":5,` + dest + `}`, "unknown_chain", "chain_id"},
			{`{"reason":"wrong_network","asset":"TEST",` + dest + `}`, "missing_field", "chain_id"},
			{`{"reason":"wrong_network","amount":"1",` + dest + `}`, "invalid_field", "amount"},
		} {
			requireProblem(t, e.refund(m.APIKey, inv.ID, fmt.Sprintf("bad-%d", i), c.body), http.StatusBadRequest, c.code, c.field)
		}
		requireProblem(t, e.refund(m.APIKey, bare.ID, "none", `{"reason":"wrong_network",`+dest+`}`),
			http.StatusUnprocessableEntity, "nothing_to_refund", "")

		res := e.refund(m.APIKey, inv.ID, "w1", `{"reason":"wrong_network",`+dest+`}`)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		body := res.json(t)
		require.EqualValues(t, otherChain, body["chain_id"])
		require.Equal(t, "700", body["amount"])
		require.Equal(t, "TEST", body["asset"].(map[string]any)["symbol"])
		o, err := e.st.GetOutbound(ctx, int64(body["id"].(float64)))
		require.NoError(t, err)
		require.EqualValues(t, otherChain, o.ChainID)
		require.Equal(t, store.RefundWrongNetwork, o.Reason)
		// Named explicitly, nothing is left of it.
		requireProblem(t, e.refund(m.APIKey, inv.ID, "w2", `{"reason":"wrong_network","chain_id":9000,"asset":"TEST",`+dest+`}`),
			http.StatusUnprocessableEntity, "nothing_to_refund", "")
	})
}

// stoppedChains is a Config.ChainStopped whose stopped chains a test sets.
type stoppedChains struct{ ids sync.Map } // uint64 → error

func (s *stoppedChains) stopped(id uint64) error {
	if err, ok := s.ids.Load(id); ok {
		return err.(error)
	}
	return nil
}

// An invoice on a chain whose parts stopped (Config.ChainStopped), or
// accepting an asset on one, is refused with chain_unavailable and nothing
// is written; its Idempotency-Key is free again, so the same request
// succeeds once the chain runs. The other chains take invoices meanwhile.
func TestCreate_ChainStopped_RefusedWithNothingWritten(t *testing.T) {
	t.Parallel()
	for name, st := range map[string]func(*testing.T) store.Store{
		"postgres": func(t *testing.T) store.Store { return newPostgres(t) }, "sqlite": newSQLite} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var stop stoppedChains
			testChainStopped(t, newEnvOn(t, st(t), func(c *invoice.Config) { withOtherChain(c); c.ChainStopped = stop.stopped }), &stop)
		})
	}
}

func testChainStopped(t *testing.T, e *env, stop *stoppedChains) {
	m := e.newMerchant()
	stop.ids.Store(uint64(otherChain), errors.New("the node serves chain 1"))
	body := `{"chain_id":9000,"amount_wei":"7"}`
	res := e.createInvoice(m.APIKey, "k", body)
	requireProblem(t, res, http.StatusServiceUnavailable, "chain_unavailable", "")
	detail := res.json(t)["detail"].(string)
	require.Contains(t, detail, "chain 9000")
	require.NotContains(t, detail, "serves chain 1", "why is the operator's to read, not the merchant's")
	require.Empty(t, invoicesOf(t, e.st, m.ID), "nothing written")

	home := e.mustCreate(m.APIKey, "h", `{"amount_wei":"1"}`)
	require.EqualValues(t, chainID, home.ChainID, "the home chain still takes invoices")

	stop.ids.Delete(uint64(otherChain))
	again := e.mustCreate(m.APIKey, "k", body)
	require.EqualValues(t, otherChain, again.ChainID, "the key was released: the same request succeeds")
	require.Len(t, invoicesOf(t, e.st, m.ID), 2)
}

// A fiat invoice accepting an asset on a stopped chain is refused too,
// before any quote is made.
func TestFiat_AcceptOnAStoppedChain_Refused(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		f := newFiatEnv(t, e.st)
		svc := fiatOnTwoChains(t, f, func(id uint64) error {
			if id == otherChain {
				return errors.New("stopped")
			}
			return nil
		})
		m := f.newMerchant()
		owner, err := svc.Owner(ctx, m.ID)
		require.NoError(t, err)
		_, err = svc.CreateInvoice(ctx, owner, "x-1", invoice.InvoiceParams{
			Price: &invoice.Price{Amount: "8.00", Currency: "EUR"}, Accept: []string{"USDC", "USDC@9000"}})
		var p *problem.Problem
		require.ErrorAs(t, err, &p)
		require.Equal(t, problem.CodeChainUnavailable, p.Code)
		require.Empty(t, invoicesOf(t, f.st, m.ID))

		created, err := svc.CreateInvoice(ctx, owner, "x-2", invoice.InvoiceParams{
			Price: &invoice.Price{Amount: "8.00", Currency: "EUR"}, Accept: []string{"USDC"}})
		require.NoError(t, err, "without the stopped chain")
		require.Len(t, created.Quotes, 1)
	})
}

// An invoice opened before one of its chains stopped keeps its options:
// its public read names the stopped chains among them in delayed_chains
// (a payment sent there is safe, and credited once the chain runs again),
// and only those: a chain the invoice no longer offers is not named.
func TestPublic_ChainStoppedAfterCreation_DelayedChainsListed(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		f := newFiatEnv(t, e.st)
		var mu sync.Mutex
		stopped := map[uint64]bool{}
		stop := func(id uint64, on bool) {
			mu.Lock()
			defer mu.Unlock()
			stopped[id] = on
		}
		svc := fiatOnTwoChains(t, f, func(id uint64) error {
			mu.Lock()
			defer mu.Unlock()
			if stopped[id] {
				return errors.New("stopped")
			}
			return nil
		})
		_, created := acceptOnBoth(t, f, svc)
		mux := httpapi.NewMux()
		svc.Routes(mux)
		srv := httptest.NewServer(mux)
		defer srv.Close()
		delayed := func() any {
			req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/public/invoice", nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+created.LookupToken)
			res := send(t, req)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			return res.json(t)["delayed_chains"]
		}
		require.Nil(t, delayed(), "absent while every chain runs")
		stop(otherChain, true)
		require.Equal(t, []any{float64(otherChain)}, delayed(), "a quote's chain")
		stop(chainID, true)
		require.Equal(t, []any{float64(chainID), float64(otherChain)}, delayed(), "both, in order")
		stop(chainID, false)

		// Once a payment counts on the invoice's chain, the other chain's
		// quote is no longer offered, and its stop no longer concerns the
		// payer.
		payOneUSDC(t, f, created.ID, common.HexToHash("0xcd"))
		require.Nil(t, delayed())
		stop(chainID, true)
		require.Equal(t, []any{float64(chainID)}, delayed())
	})
}

// payOneUSDC records a payment of 1 USDC (0.80 EUR) on invoice id's own
// chain, counted: the invoice is on that chain for good.
func payOneUSDC(t *testing.T, f *fiatEnv, id int64, tx common.Hash) {
	t.Helper()
	stored, err := f.st.GetInvoice(ctx, id)
	require.NoError(t, err)
	p := store.Payment{InvoiceID: stored.ID, TxHash: tx, LogIndex: 0, BlockNumber: 5, BlockHash: common.Hash{3},
		From: payer, AmountWei: store.MustParseAmount("1000000"), CreatedAt: f.clock.Now(), Token: &usdcAddr}
	require.NoError(t, f.st.InsertPayment(ctx, &p))
	minor := store.MustParseAmount("80")
	stored.PaidValue, stored.PaidWei = &minor, p.AmountWei
	require.NoError(t, f.st.UpdateInvoice(ctx, &stored))
}

// acceptOnBoth creates, for a new merchant (its owner returned), an
// 8 EUR invoice accepting USDC on the service's chain and on otherChain.
func acceptOnBoth(t *testing.T, f *fiatEnv, svc *invoice.Service) (invoice.Principal, invoice.Created) {
	t.Helper()
	m := f.newMerchant()
	owner, err := svc.Owner(ctx, m.ID)
	require.NoError(t, err)
	created, err := svc.CreateInvoice(ctx, owner, "x-1", invoice.InvoiceParams{
		Price: &invoice.Price{Amount: "8.00", Currency: "EUR"}, Accept: []string{"USDC", "USDC@9000"}})
	require.NoError(t, err)
	return owner, created
}
