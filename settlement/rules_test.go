package settlement

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func ruleInvoice(status string) store.Invoice {
	return store.Invoice{ID: 1, Status: status, AmountWei: eth(1000), ExpiresAt: t0.Add(15 * time.Minute),
		SweepStatus: store.SweepNone}
}

func payments(blocksAndMilli ...uint64) []store.Payment {
	var ps []store.Payment
	for i := 0; i < len(blocksAndMilli); i += 2 {
		ps = append(ps, store.Payment{BlockNumber: blocksAndMilli[i], AmountWei: eth(blocksAndMilli[i+1])})
	}
	return ps
}

func TestApplyPayments(t *testing.T) {
	now := t0.Add(time.Minute)
	afterExpiry := t0.Add(20 * time.Minute)
	beyondWindow := t0.Add(15*time.Minute + 24*time.Hour + time.Second)
	confirmed := ruleInvoice(store.StatusConfirmed)
	confirmed.SweepStatus = store.SweepQueued
	for _, tc := range []struct {
		name      string
		inv       store.Invoice
		ps        []store.Payment
		now       time.Time
		status    string
		event     string
		under     bool
		over      bool
		attention bool
	}{
		{"exact payment pays", ruleInvoice(store.StatusPending), payments(5, 1000), now,
			store.StatusPaid, store.EventInvoicePaid, false, false, false},
		{"partial payment stays pending, underpaid", ruleInvoice(store.StatusPending), payments(5, 400), now,
			store.StatusPending, store.EventInvoiceUnderpaid, true, false, false},
		{"two partials completing pay", ruleInvoice(store.StatusPending), payments(5, 400, 6, 600), now,
			store.StatusPaid, store.EventInvoicePaid, false, false, false},
		{"overpayment pays, overpaid", ruleInvoice(store.StatusPending), payments(5, 1001), now,
			store.StatusPaid, store.EventInvoicePaid, false, true, false},
		{"late full payment within the window pays", ruleInvoice(store.StatusExpired), payments(5, 1000), afterExpiry,
			store.StatusPaid, store.EventInvoicePaid, false, false, false},
		{"late partial payment stays expired", ruleInvoice(store.StatusExpired), payments(5, 10), afterExpiry,
			store.StatusExpired, store.EventInvoiceUnderpaid, true, false, false},
		{"payment beyond the late window is only flagged", ruleInvoice(store.StatusExpired), payments(5, 1000), beyondWindow,
			store.StatusExpired, store.EventInvoiceLatePayment, false, false, true},
		{"more money while PAID: overpaid", ruleInvoice(store.StatusPaid), payments(5, 1000, 6, 1), now,
			store.StatusPaid, store.EventInvoiceOverpaid, false, true, false},
		{"more money after the sweep was queued: flagged", confirmed, payments(5, 1000, 30, 1), now,
			store.StatusConfirmed, store.EventInvoiceOverpaid, false, true, true},
		{"more money after settlement: flagged", ruleInvoice(store.StatusSettled), payments(5, 1000, 30, 1), now,
			store.StatusSettled, store.EventInvoiceOverpaid, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, event := applyPayments(tc.inv, tc.ps, tc.now, 24*time.Hour)
			require.Equal(t, tc.status, got.Status)
			require.Equal(t, tc.event, event)
			require.Equal(t, tc.under, got.Underpaid, "underpaid")
			require.Equal(t, tc.over, got.Overpaid, "overpaid")
			require.Equal(t, tc.attention, got.NeedsAttention, "needs_attention")
			require.Equal(t, sumPayments(tc.ps), got.PaidWei)
			if tc.status == store.StatusPaid && tc.inv.Status != store.StatusPaid {
				require.NotNil(t, got.PaidAt)
			}
			require.Equal(t, tc.inv.SweepStatus, got.SweepStatus, "settlement never touches a started sweep")
		})
	}
}

func TestApplyPayments_LateFlagFromPayments(t *testing.T) {
	ps := payments(5, 1000)
	ps[0].Late = true
	got, _ := applyPayments(ruleInvoice(store.StatusExpired), ps, t0.Add(20*time.Minute), time.Hour)
	require.True(t, got.PaidLate)
}

func TestApplyRevert(t *testing.T) {
	now := t0.Add(time.Minute)
	withSweep := func(status, sweep string) store.Invoice {
		inv := ruleInvoice(status)
		inv.SweepStatus = sweep
		at := t0
		if status != store.StatusPending {
			inv.PaidAt = &at
		}
		if status == store.StatusConfirmed || status == store.StatusSettled {
			inv.ConfirmedAt = &at
		}
		return inv
	}
	for _, tc := range []struct {
		name      string
		inv       store.Invoice
		left      []store.Payment
		now       time.Time
		status    string
		sweep     string
		attention bool
	}{
		{"paid loses its payment: pending", withSweep(store.StatusPaid, store.SweepNone), nil, now,
			store.StatusPending, store.SweepNone, false},
		{"paid loses its payment after expiry: expired", withSweep(store.StatusPaid, store.SweepNone), nil,
			t0.Add(time.Hour), store.StatusExpired, store.SweepNone, false},
		{"paid keeps enough: stays paid", withSweep(store.StatusPaid, store.SweepNone), payments(3, 1000), now,
			store.StatusPaid, store.SweepNone, false},
		{"confirmed, sweep queued: un-queued, back to paid", withSweep(store.StatusConfirmed, store.SweepQueued),
			payments(3, 1000), now, store.StatusPaid, store.SweepNone, false},
		{"confirmed, sweep queued, short: pending", withSweep(store.StatusConfirmed, store.SweepQueued),
			payments(3, 10), now, store.StatusPending, store.SweepNone, false},
		{"confirmed, sweep funding: kept and flagged", withSweep(store.StatusConfirmed, store.SweepFunding), nil, now,
			store.StatusConfirmed, store.SweepFunding, true},
		{"confirmed, sweep sent: kept and flagged", withSweep(store.StatusConfirmed, store.SweepSent), nil, now,
			store.StatusConfirmed, store.SweepSent, true},
		{"settled: kept and flagged", withSweep(store.StatusSettled, store.SweepSwept), nil, now,
			store.StatusSettled, store.SweepSwept, true},
		{"pending partial removed: stays pending", withSweep(store.StatusPending, store.SweepNone), nil, now,
			store.StatusPending, store.SweepNone, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, event := applyRevert(tc.inv, tc.left, tc.now)
			require.Equal(t, store.EventInvoiceReverted, event)
			require.Equal(t, tc.status, got.Status)
			require.Equal(t, tc.sweep, got.SweepStatus)
			require.Equal(t, tc.attention, got.NeedsAttention)
			require.Equal(t, sumPayments(tc.left), got.PaidWei)
			if got.Status == store.StatusPending || got.Status == store.StatusExpired {
				require.Nil(t, got.PaidAt)
			}
			if got.Status != store.StatusConfirmed && got.Status != store.StatusSettled {
				require.Nil(t, got.ConfirmedAt)
			}
		})
	}
}

func TestApplyConfirm_AllPaymentsDeepEnough(t *testing.T) {
	inv := ruleInvoice(store.StatusPaid)
	_, event := applyConfirm(inv, payments(10, 500, 21, 500), 20, t0)
	require.Empty(t, event, "one payment is not deep enough")
	got, event := applyConfirm(inv, payments(10, 500, 20, 500), 20, t0)
	require.Equal(t, store.EventInvoiceConfirmed, event)
	require.Equal(t, store.StatusConfirmed, got.Status)
	require.Equal(t, store.SweepQueued, got.SweepStatus)
	require.NotNil(t, got.ConfirmedAt)
	_, event = applyConfirm(ruleInvoice(store.StatusPending), payments(1, 1000), 20, t0)
	require.Empty(t, event, "only PAID invoices confirm")
}

func TestApplyExpire(t *testing.T) {
	inv := ruleInvoice(store.StatusPending)
	_, event := applyExpire(inv, inv.ExpiresAt.Add(-time.Microsecond))
	require.Empty(t, event)
	got, event := applyExpire(inv, inv.ExpiresAt)
	require.Equal(t, store.EventInvoiceExpired, event)
	require.Equal(t, store.StatusExpired, got.Status)
	_, event = applyExpire(ruleInvoice(store.StatusPaid), inv.ExpiresAt.Add(time.Hour))
	require.Empty(t, event, "a paid invoice never expires")
}

func TestSumPayments_Saturates(t *testing.T) {
	ps := []store.Payment{{AmountWei: maxAmount}, {AmountWei: store.NewAmount(1)}}
	require.Equal(t, maxAmount, sumPayments(ps))
}

func TestConfig_Validate(t *testing.T) {
	for _, cfg := range []Config{
		{Confirmations: -1}, {PollInterval: -1}, {LateWindow: -1}, {MaxReorgDepth: -1},
		{BatchSize: 10001}, {RetryMin: 2 * time.Second, RetryMax: time.Second},
	} {
		_, err := New(sqliteStore(t), cfg)
		require.Error(t, err, "%+v", cfg)
	}
	_, err := New(nil, Config{})
	require.Error(t, err)
}

// movesTo: money on chain 1338 moves an invoice of chain 1337 only when it
// is fiat, quoted that asset on 1338 (its token with its chain), has no
// counted payment, and is PENDING or EXPIRED within the late window.
func TestMovesTo(t *testing.T) {
	tok := randAddr()
	usdc := store.Asset{Symbol: "USDC", Address: &tok, Decimals: 6}
	price := store.MustParseFiat("10.00", "EUR")
	fiat := func(status string, quotes ...store.Quote) store.Invoice {
		inv := ruleInvoice(status)
		inv.ChainID = 1337
		inv.Pricing = &store.Pricing{Price: price, Quotes: quotes}
		return inv
	}
	q := func(a store.Asset, chain uint64) store.Quote {
		return store.Quote{Asset: a, ChainID: chain, Amount: store.NewAmount(1), Price: price, Rate: store.MustParseDecimal("1")}
	}
	native := incoming{chain: 1338}
	token := incoming{chain: 1338, token: &tok}
	within, beyond := t0.Add(20*time.Minute), t0.Add(15*time.Minute+24*time.Hour+time.Second)
	wrong := store.Payment{ChainID: 1338, WrongNetwork: true, AmountWei: eth(1)}
	countedOnOwn := store.Payment{ChainID: 1337, AmountWei: eth(1)}
	for _, tc := range []struct {
		name string
		inv  store.Invoice
		in   incoming
		paid []store.Payment
		now  time.Time
		want bool
	}{
		{"quoted on that chain", fiat(store.StatusPending, q(usdc, 0), q(store.NativeAsset("ETH"), 1338)), native, nil, t0, true},
		{"a wrong-network payment does not count", fiat(store.StatusPending, q(usdc, 0), q(usdc, 1338)), token, []store.Payment{wrong}, t0, true},
		{"the same token quoted on its own chain only", fiat(store.StatusPending, q(usdc, 0)), token, nil, t0, false},
		{"the same token quoted on a third chain", fiat(store.StatusPending, q(usdc, 0), q(usdc, 10)), token, nil, t0, false},
		{"another asset on that chain", fiat(store.StatusPending, q(usdc, 1338)), native, nil, t0, false},
		{"a counted payment already", fiat(store.StatusPending, q(usdc, 0), q(usdc, 1338)), token, []store.Payment{countedOnOwn}, t0, false},
		{"expired within the window", fiat(store.StatusExpired, q(usdc, 0), q(usdc, 1338)), token, nil, within, true},
		{"expired beyond the window", fiat(store.StatusExpired, q(usdc, 0), q(usdc, 1338)), token, nil, beyond, false},
		{"paid", fiat(store.StatusPaid, q(usdc, 0), q(usdc, 1338)), token, nil, t0, false},
		{"settled", fiat(store.StatusSettled, q(usdc, 0), q(usdc, 1338)), token, nil, t0, false},
		{"priced in its asset", ruleInvoice(store.StatusPending), native, nil, t0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, movesTo(tc.inv, tc.in, tc.paid, tc.now, 24*time.Hour))
		})
	}
}
