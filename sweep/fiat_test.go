package sweep

import (
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
)

// fiatPaid is what arrived at a fiat invoice, in each of its quoted assets.
type fiatPaid struct {
	token  *big.Int // base units of the quoted token
	native *big.Int // wei
}

// confirmedFiatInvoice creates an invoice priced at 49.90 EUR, quoted in
// tok (first, at 0.80 EUR) and the native coin (2,000 EUR), pays it what
// paid says on chain, records those payments as counted (every quoted
// asset counts) and marks it CONFIRMED and QUEUED with the sweep's lead
// asset as settlement chooses it: the native coin when some arrived.
func (e *env) confirmedFiatInvoice(tok *testtoken.Token, paid fiatPaid) store.Invoice {
	e.t.Helper()
	price := store.MustParseFiat("49.90", "EUR")
	token := tok.Address
	tokAsset := store.Asset{Symbol: "USDC", Address: &token, Decimals: tok.Decimals}
	quote := func(a store.Asset, rate string) store.Quote {
		r := store.MustParseDecimal(rate)
		amount, err := store.QuoteAmount(price, r, a.Decimals)
		require.NoError(e.t, err)
		return store.Quote{Asset: a, Amount: amount, Price: price, Rate: r}
	}
	pricing := &store.Pricing{Price: price, Tolerance: store.Tolerance{Amount: store.Fiat{Currency: price.Currency}},
		Quotes: []store.Quote{quote(tokAsset, "0.8"), quote(store.NativeAsset("ETH"), "2000")}}
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
		inv = store.Invoice{MerchantID: e.merchant.ID, Status: store.StatusPending, AmountWei: pricing.Quotes[0].Amount,
			ChainID: 1337, DepositAddress: addr, DerivationIndex: idx, PaymentURI: "ethereum:x", LookupTokenHash: randBytes(32),
			ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now, SweepStatus: store.SweepNone, Pricing: pricing}
		inv.SetAsset(tokAsset)
		return tx.CreateInvoice(ctx, &inv)
	}))
	record := func(t *common.Address, amount *big.Int) {
		li := store.NativeLogIndex
		if t != nil {
			li = 0
		}
		require.NoError(e.t, e.st.InsertPayment(ctx, &store.Payment{InvoiceID: inv.ID, TxHash: randHash(), LogIndex: li,
			BlockNumber: e.head(), BlockHash: randHash(), From: randAddr(), AmountWei: amountOf(amount),
			CreatedAt: e.clock.Now(), Token: t}))
	}
	if paid.token != nil {
		_, err := tok.Mint(e.payerOpts(), inv.DepositAddress, paid.token)
		require.NoError(e.t, err)
		e.sim.Commit()
		record(&token, paid.token)
	}
	if paid.native != nil {
		e.pay([]common.Address{inv.DepositAddress}, paid.native)
		e.sim.Commit()
		record(nil, paid.native)
	}
	now := e.clock.Now()
	v := store.NewAmount(4990)
	inv.Status, inv.PaidAt, inv.ConfirmedAt, inv.PaidValue = store.StatusConfirmed, &now, &now, &v
	inv.SweepStatus, inv.UpdatedAt = store.SweepQueued, now
	lead := tokAsset
	if paid.native != nil {
		lead = store.NativeAsset("ETH")
	}
	inv.SweepAsset = &lead
	require.NoError(e.t, e.st.UpdateInvoice(ctx, &inv))
	return inv
}

// A fiat invoice paid partly in a token and partly in the native coin ends
// SETTLED with both at the merchant: the native coin first (the sponsored
// sweep sends exactly what the payer sent), then the token in full, on
// either token path.
func TestFiatSweep_PaidInATokenAndTheNativeCoin_BothReachTheMerchant(t *testing.T) {
	t.Parallel()
	for _, kind := range []testtoken.Kind{testtoken.Stable, testtoken.Tether} {
		t.Run(kind.Name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			tok := e.deployToken(kind, 6)
			// 30 USDC (24.00 EUR) and 0.01295 ETH (25.90 EUR).
			usdc, wei := big.NewInt(30_000_000), big.NewInt(12_950_000_000_000_000)
			inv := e.confirmedFiatInvoice(tok, fiatPaid{token: usdc, native: wei})
			s := e.sweeper(Config{Confirmations: 2})

			e.drive(20, e.all([]int64{inv.ID}, store.SweepSwept), s)

			require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(wei), "the native coin, exactly what the payer sent")
			require.Equal(t, 0, e.tokenBalance(tok, e.merchant.SettlementAddress).Cmp(usdc), "the token, in full")
			require.Zero(t, e.tokenBalance(tok, inv.DepositAddress).Sign())
			got := e.invoice(inv.ID)
			require.Equal(t, store.StatusSettled, got.Status)
			require.Equal(t, amountOf(wei), *got.SweptWei, "swept_wei counts the lead asset (sweep_asset)")
			require.True(t, got.SweepAsset.IsNative())
			require.Equal(t, []string{store.EventInvoiceSettled}, e.events(inv.ID))
			txs, err := e.st.ListSweepTxsByInvoice(ctx, inv.ID)
			require.NoError(t, err)
			require.NotEmpty(t, ofToken(txs, tok), "the token goes by the machinery that moves wrong assets, marked with it")
		})
	}
}

// Paid in the token alone: the token leads, as a token invoice's sweep.
func TestFiatSweep_PaidInTheTokenAlone_SweptAsATokenInvoice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.deployToken(testtoken.Stable, 6)
	usdc := big.NewInt(62_375_000)
	inv := e.confirmedFiatInvoice(tok, fiatPaid{token: usdc})
	s := e.sweeper(Config{Confirmations: 2})
	e.drive(12, e.all([]int64{inv.ID}, store.SweepSwept), s)
	require.Equal(t, 0, e.tokenBalance(tok, e.merchant.SettlementAddress).Cmp(usdc))
	require.Zero(t, e.balance(e.merchant.SettlementAddress).Sign(), "no native coin moved")
	got := e.invoice(inv.ID)
	require.Equal(t, store.StatusSettled, got.Status)
	require.Equal(t, amountOf(usdc), *got.SweptWei)
	pull := e.oneOf(inv.ID, store.SweepTxPull)
	require.Nil(t, pull.WrongToken, "the lead token is the invoice's own sweep")
}

// Paid in the native coin alone, although the invoice's first quote is a
// token: the native coin leads, sponsored, exact.
func TestFiatSweep_PaidInTheNativeCoinAlone_SweptExactly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.deployToken(testtoken.Stable, 6)
	wei := big.NewInt(24_950_000_000_000_000)
	inv := e.confirmedFiatInvoice(tok, fiatPaid{native: wei})
	s := e.sweeper(Config{Confirmations: 2})
	e.drive(12, e.all([]int64{inv.ID}, store.SweepSwept), s)
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(wei))
	require.Zero(t, e.tokenBalance(tok, e.merchant.SettlementAddress).Sign())
	require.Equal(t, store.StatusSettled, e.invoice(inv.ID).Status)
	require.Equal(t, amountOf(wei), *e.invoice(inv.ID).SweptWei)
}

// The token led (no native coin when the sweep was queued); native coin
// that arrived afterwards (an overpayment, counted) follows, paying its own
// gas, like native coin paid to a token invoice.
func TestFiatSweep_NativeCoinAfterATokenLedSweepWasQueued_FollowsPayingItsGas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.deployToken(testtoken.Tether, 6)
	usdc := big.NewInt(62_375_000)
	inv := e.confirmedFiatInvoice(tok, fiatPaid{token: usdc})
	later := eth(1)
	e.pay([]common.Address{inv.DepositAddress}, later)
	e.sim.Commit()
	require.NoError(t, e.st.InsertPayment(ctx, &store.Payment{InvoiceID: inv.ID, TxHash: randHash(), LogIndex: store.NativeLogIndex,
		BlockNumber: e.head(), BlockHash: randHash(), From: randAddr(), AmountWei: amountOf(later), CreatedAt: e.clock.Now()}))
	s := e.sweeper(Config{Confirmations: 2})
	e.drive(20, e.all([]int64{inv.ID}, store.SweepSwept), s)
	require.Equal(t, 0, e.tokenBalance(tok, e.merchant.SettlementAddress).Cmp(usdc))
	native := e.oneOf(inv.ID, store.SweepTxNative)
	require.Equal(t, store.SweepTxMined, native.Status)
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(native.ValueWei.Big()))
	require.Equal(t, 1, e.balance(e.merchant.SettlementAddress).Cmp(new(big.Int).Div(later, big.NewInt(2))), "most of it")
	require.Equal(t, store.StatusSettled, e.invoice(inv.ID).Status)
}

// With a Valuer, the gas of a fiat invoice's sweep is stored in the ledger
// in the invoice's currency at the rate of the moment (here the dev
// table's 2,000 EUR per ETH), rounded down to the cent; the token moved
// carries none of its own (the ledger values it at the locked quote when
// read).
func TestFiatSweep_GasValuedInTheInvoicesCurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := e.deployToken(testtoken.Tether, 6) // the fund path: the sweep wallet's and the deposit's gas
	inv := e.confirmedFiatInvoice(tok, fiatPaid{token: big.NewInt(62_375_000)})
	rates, err := pricing.New([]pricing.Source{pricing.NewFixed("dev", pricing.DevRates, e.clock.Now)},
		pricing.Config{Assets: []string{"ETH"}, Currencies: []string{"EUR"}, MinSources: 1, Now: e.clock.Now})
	require.NoError(t, err)
	require.NoError(t, rates.Refresh(ctx))
	s := e.sweeper(Config{Confirmations: 2, Valuer: rates})
	e.drive(12, e.all([]int64{inv.ID}, store.SweepSwept), s)

	es, err := e.st.ListLedgerEntries(ctx, store.LedgerFilter{MerchantID: &e.merchant.ID})
	require.NoError(t, err)
	fees, valued := 0, new(big.Int)
	for _, en := range es {
		if en.InvoiceID == nil || *en.InvoiceID != inv.ID {
			continue
		}
		if en.Kind != store.LedgerGasFee {
			require.Nil(t, en.FiatMinor, "%s: only fees are valued when recorded", en.Kind)
			continue
		}
		fees++
		want := new(big.Int).Mul(en.Amount.Big(), big.NewInt(2000*100))
		want.Quo(want, big.NewInt(1e18))
		require.Equal(t, "EUR", en.FiatCurrency)
		require.NotNil(t, en.FiatMinor)
		valued.Add(valued, en.FiatMinor.Big())
		require.Equal(t, want.String(), en.FiatMinor.String(), "fee %s wei at 2,000 EUR per ETH, in cents", en.Amount)
	}
	require.Positive(t, fees, "the sweep's transactions paid gas")
	require.Positive(t, valued.Sign(), "fees worth cents at these gas prices")
}
