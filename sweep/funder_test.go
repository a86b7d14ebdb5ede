package sweep

import (
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

const operatorToken = "op_9f8e7d6c5b4a"

func retryRequest(t *testing.T, h http.Handler, token, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, RetryPath, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestSweep_EmptyWallet_InsufficientGas_TopUpThenRetryCompletes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sweepWalletBalance(new(big.Int)))
	inv := e.confirmedInvoices(1, eth(1))[0]
	reg := prometheus.NewRegistry()
	s := e.sweeper(Config{OperatorToken: operatorToken, Registerer: reg, Confirmations: 2})

	// The empty wallet cannot fund the sweep: FAILED, insufficient gas. In
	// the same pass the gas funder sees the wallet below its reserve.
	require.NoError(t, s.RunOnce(ctx))
	got := e.invoice(inv.ID)
	require.Equal(t, store.SweepFailed, got.SweepStatus)
	require.Equal(t, ReasonInsufficientGas, got.SweepError)
	require.Equal(t, []string{store.EventInvoiceSweepFailed}, e.events(inv.ID))
	require.Empty(t, e.sweepTxs(inv.ID, store.SweepTxFunding), "nothing signed that the wallet cannot pay")
	require.Equal(t, 1.0, metricValue(t, s.m.failed.WithLabelValues(ReasonInsufficientGas)))

	topUps, err := e.st.ListUnminedSweepTxs(ctx, e.funder())
	require.NoError(t, err)
	require.Len(t, topUps, 1, "the gas funder signed one top-up")
	require.Equal(t, store.SweepTxTopUp, topUps[0].Kind)
	require.Equal(t, e.sweepWallet(), topUps[0].To)
	require.Equal(t, 0, topUps[0].ValueWei.Big().Cmp(new(big.Int).Mul(big.NewInt(2), DefaultGasReserveFloor())),
		"up to twice the reserve (the floor: nothing was spent yet)")

	// A FAILED sweep is not retried on its own.
	e.sim.Commit()
	require.NoError(t, s.RunOnce(ctx))
	require.Equal(t, store.SweepFailed, e.invoice(inv.ID).SweepStatus)
	ws, err := s.WalletStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, ws.BalanceWei.Big().Cmp(topUps[0].ValueWei.Big()), "the top-up is mined")
	require.False(t, ws.NeedsTopUp)
	require.NotNil(t, ws.Funder)
	require.False(t, ws.Funder.PendingTopUp)

	// The operator re-queues it; the sweep completes.
	h := s.AdminHandler()
	rec := retryRequest(t, h, operatorToken, "")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var res RetryResult
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res))
	require.Equal(t, []Requeued{{InvoiceID: inv.ID, PreviousError: ReasonInsufficientGas}}, res.Requeued)
	require.Empty(t, res.Skipped)
	require.Equal(t, store.SweepQueued, e.invoice(inv.ID).SweepStatus)

	e.drive(10, e.all([]int64{inv.ID}, store.SweepSwept), s)
	got = e.invoice(inv.ID)
	require.Equal(t, store.StatusSettled, got.Status)
	require.Empty(t, got.SweepError)
	require.Zero(t, got.SweepAttempts)
	require.Equal(t, 0, e.balance(e.merchant.SettlementAddress).Cmp(eth(1)))
	require.Equal(t, []string{store.EventInvoiceSweepFailed, store.EventInvoiceSettled}, e.events(inv.ID))

	// Retrying it again changes nothing.
	rec = retryRequest(t, h, operatorToken, `{"invoice_ids":[`+itoa(inv.ID)+`, 999999]}`)
	require.Equal(t, http.StatusOK, rec.Code)
	res = RetryResult{}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res))
	require.Empty(t, res.Requeued)
	require.Equal(t, []Skipped{
		{InvoiceID: inv.ID, Reason: "not failed", SweepStatus: store.SweepSwept},
		{InvoiceID: 999999, Reason: "not found"},
	}, res.Skipped)
}

func itoa(n int64) string { return big.NewInt(n).String() }

func TestWalletStatus_SpendReserveAndAlert(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sweepWalletBalance(eth(1)))
	invs := e.confirmedInvoices(3, eth(1))
	reg := prometheus.NewRegistry()
	floor := store.NewAmount(1000)
	s, err := New(e.st, e.client, Keys{Deposits: e.wallet, Wallet: NewKeySigner(e.sweepKey)},
		Config{Registerer: reg, Confirmations: 1, GasReserveFloor: floor, Now: e.clock.Now})
	require.NoError(t, err)
	e.drive(10, e.all(ids(invs), store.SweepSwept), s)

	ws, err := s.WalletStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, e.sweepWallet(), ws.Address)
	require.Nil(t, ws.Funder)
	body, err := json.Marshal(ws)
	require.NoError(t, err)
	require.Contains(t, string(body), `"address":"`+e.sweepWallet().Hex()+`"`, "EIP-55, as every address the service shows")
	body, err = json.Marshal(FunderStatus{Address: e.funder()})
	require.NoError(t, err)
	require.Contains(t, string(body), `"address":"`+e.funder().Hex()+`"`)
	spend := new(big.Int)
	for _, inv := range invs {
		f := e.sweepTxs(inv.ID, store.SweepTxFunding)[0]
		spend.Add(spend, f.ValueWei.Big())
		spend.Add(spend, f.FeeWei.Big())
	}
	require.Equal(t, amountOf(spend), ws.GasSpend24hWei, "fundings and their fees")
	require.Equal(t, 0, ws.BalanceWei.Big().Cmp(new(big.Int).Sub(eth(1), spend)))
	require.Equal(t, amountOf(spend), ws.ReserveWei, "the 24-hour spend, above the floor")
	require.False(t, ws.Low)
	require.False(t, ws.NeedsTopUp)

	// A day later the spend has aged out: the reserve falls to the floor.
	e.clock.Advance(25 * 60 * 60 * 1e9)
	ws, err = s.WalletStatus(ctx)
	require.NoError(t, err)
	require.True(t, ws.GasSpend24hWei.IsZero())
	require.Equal(t, floor, ws.ReserveWei)

	require.InDelta(t, weiFloat(ws.BalanceWei.Big()), metricValue(t, s.m.balance), 1)
	require.Equal(t, 0.0, metricValue(t, s.m.low))
	require.Equal(t, 3.0, metricValue(t, s.m.swept))
	families, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, name := range []string{"evmpay_sweep_wallet_balance_wei", "evmpay_sweep_wallet_low",
		"evmpay_sweep_wallet_gas_spend_24h_wei", "evmpay_sweep_wallet_reserve_wei", "evmpay_sweep_swept_total"} {
		require.True(t, names[name], "metric %s registered", name)
	}
}

func TestWalletStatus_LowWhenBelowHalfTheDaysSpend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.sweeper(Config{})
	p, err := s.newPass(ctx)
	require.NoError(t, err)
	// A day's spend of 30 ETH recorded against a 10 ETH balance.
	now := p.now
	fee := store.NewAmount(1)
	require.NoError(t, e.st.CreateSweepTx(ctx, &store.SweepTx{
		Kind: store.SweepTxFunding, From: e.sweepWallet(), To: randAddr(), ValueWei: amountOf(eth(30)),
		GasLimit: 21000, MaxFeeWei: store.NewAmount(1), MaxPriorityFeeWei: store.NewAmount(1), TxHash: randHash(),
		RawTx: []byte{1}, Status: store.SweepTxMined, FeeWei: &fee, MinedAt: &now, CreatedAt: now, UpdatedAt: now,
	}))
	ws, err := s.WalletStatus(ctx)
	require.NoError(t, err)
	require.True(t, ws.Low, "10 ETH < 0.5 × 30 ETH")
	require.True(t, ws.NeedsTopUp)
	require.Equal(t, 1.0, metricValue(t, s.m.low))
}

// metricValue reads a gauge or counter.
func metricValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}
