package sweep

import (
	"context"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
)

// advanceNative moves the sweep of an invoice in the native coin: under
// PolicySponsor the sweep wallet funds the deposit address with the gas of
// its sweep and the deposit then sends exactly the payer's funds (the
// funded send, funded.go); under PolicyDeduct one transaction from the
// deposit sends its balance minus its gas. Wrong-asset tokens paid to the
// invoice follow its sweep's confirmations (wrongasset.go).
func (s *Sweeper) advanceNative(ctx context.Context, p *pass, inv store.Invoice, txs []store.SweepTx) (outcome, error) {
	seen := fingerprintOf(txs)
	own := ownTxs(txs)
	fund := groupSlots(own, store.SweepTxFunding)
	sweep := liveSlot(groupSlots(own, store.SweepTxSweep))
	inFlight := sweep != nil
	for _, sl := range fund {
		if sl.live() != nil {
			inFlight = true
			if err := s.refresh(ctx, p, sl); err != nil {
				return outcome{}, err
			}
		}
	}
	finish := func(ctx context.Context, p *pass) (outcome, error) {
		o, err := s.confirm(p, sweep, fund)
		if err != nil || o.swept == nil {
			return o, err
		}
		// The gas refunds from the deposit left there stays with the
		// sweep's own: the invoice's dust.
		dust := new(big.Int).Add(o.swept.dust.Big(), refundGasLeftOf(txs, inv.DepositAddress))
		o.swept.dust = amountOf(dust)
		if w, done, err := s.sweepWrongTokens(ctx, p, inv); err != nil || !done {
			return w, err
		}
		return o, s.dustAfterWrong(ctx, p, inv, false, &o)
	}
	if sweep != nil {
		if err := s.refresh(ctx, p, sweep); err != nil {
			return outcome{}, err
		}
		if sweep.mined != nil && !fundingPending(fund) {
			return finish(ctx, p)
		}
		// A funding still on its way (the extra gas of a replacement whose
		// original was mined after all) ends as dust: wait for it, so that
		// the recorded dust is all of it.
	}
	if !inFlight {
		if o, stop, err := s.precheck(ctx, p, inv); stop || err != nil {
			return o, err
		}
	}
	guard := func(status string) *invoiceGuard { return &invoiceGuard{id: inv.ID, seen: seen, status: status} }
	if liveSlot(fund) != nil || (sweep == nil && s.cfg.Policy == PolicySponsor) {
		return s.advanceFunded(ctx, p, &fundedSend{
			acct: s.depositAccount(inv), fund: fund, send: sweep, guard: guard, finish: finish,
			prepare: func(ctx context.Context, p *pass, funded *big.Int) (sendPlan, string, error) {
				return s.prepareNative(ctx, p, inv, guard, funded)
			},
		})
	}
	return s.advanceDeduct(ctx, p, inv, guard, sweep)
}

// prepareNative readies a sponsored sweep: 21000 gas, sending the deposit
// address's balance minus what the fundings brought — exactly the payer's
// funds — once they are mined.
func (s *Sweeper) prepareNative(ctx context.Context, p *pass, inv store.Invoice, guard func(string) *invoiceGuard, funded *big.Int) (sendPlan, string, error) {
	if funded.Sign() == 0 {
		// Nothing funded yet: the gas is all the funding needs; the value
		// is read once it is mined.
		return sendPlan{gas: transferGas}, "", nil
	}
	bal, err := s.chain.BalanceAt(ctx, inv.DepositAddress, p.headNumber())
	if err != nil {
		return sendPlan{}, "", err
	}
	left, err := s.refundGasLeft(ctx, inv)
	if err != nil {
		return sendPlan{}, "", err
	}
	value := new(big.Int).Sub(bal, funded)
	value.Sub(value, left)
	if value.Sign() <= 0 {
		return sendPlan{}, ReasonNothingToSweep, nil
	}
	return sendPlan{gas: transferGas, send: func(ctx context.Context, p *pass, f fee) (outcome, error) {
		to, reason, err := s.target(ctx, p, inv)
		if reason != "" || err != nil {
			return failWith(reason), err
		}
		return s.sendSweep(ctx, p, inv, guard(store.SweepSent), to, value, f, nil)
	}}, "", nil
}

// refundGasLeft is the service's gas money that refunds sent from the
// deposit address left there: what their mined gas fundings brought minus
// the fees of their mined sends. It is never swept to the merchant (the
// merchant receives exactly what the payer sent, less what was refunded);
// it stays at the deposit address with the sweep's own unspent gas, and
// the invoice's dust_wei counts both.
func (s *Sweeper) refundGasLeft(ctx context.Context, inv store.Invoice) (*big.Int, error) {
	txs, err := s.st.ListSweepTxsByInvoice(ctx, inv.ID)
	if err != nil {
		return nil, err
	}
	return refundGasLeftOf(txs, inv.DepositAddress), nil
}

// refundGasLeftOf is refundGasLeft over an invoice's transactions.
func refundGasLeftOf(txs []store.SweepTx, deposit common.Address) *big.Int {
	left := new(big.Int)
	for _, t := range txs {
		if t.OutboundID == nil || t.Status != store.SweepTxMined {
			continue
		}
		switch {
		case t.Kind == store.SweepTxFunding && t.To == deposit:
			left.Add(left, t.ValueWei.Big())
		case t.Kind == store.SweepTxOutbound && t.From == deposit && t.FeeWei != nil:
			left.Sub(left, t.FeeWei.Big())
		}
	}
	if left.Sign() < 0 {
		left.SetInt64(0)
	}
	return left
}

// fundingPending reports a live funding not yet mined.
func fundingPending(fund []*slot) bool {
	for _, sl := range fund {
		if sl.live() != nil && sl.mined == nil {
			return true
		}
	}
	return false
}

// confirm finishes a sweep whose transaction is mined, once it has the
// configured confirmations. The dust is the gas money the sweep did not
// spend, left at the deposit address: under the sponsor policy everything
// the mined fundings brought minus the sweep's fee; under the deduct policy
// gas limit × fee cap (kept back from the value) minus the fee.
func (s *Sweeper) confirm(p *pass, sweep *slot, fund []*slot) (outcome, error) {
	r := sweep.receipt
	if r.Status != types.ReceiptStatusSuccessful {
		return failWith(ReasonReverted), nil
	}
	if !s.final(p, r.BlockNumber.Uint64()) {
		return outcome{status: store.SweepSent, sweepErr: new(string)}, nil
	}
	mined := *sweep.mined
	budget := new(big.Int)
	for _, sl := range fund {
		if sl.mined != nil {
			budget.Add(budget, sl.mined.ValueWei.Big())
		}
	}
	if budget.Sign() == 0 {
		budget = gasCost(mined.GasLimit, mined.MaxFeeWei.Big())
	}
	dust := budget.Sub(budget, mined.FeeWei.Big())
	if dust.Sign() < 0 {
		dust.SetInt64(0)
	}
	return outcome{swept: &sweptResult{tx: mined, dust: amountOf(dust)}}, nil
}

// sendSweep signs, stores and broadcasts the sweep from the deposit
// address (or, under the deduct policy, a replacement of replaces: its
// value changes with its fee).
func (s *Sweeper) sendSweep(ctx context.Context, p *pass, inv store.Invoice, g *invoiceGuard, to common.Address, value *big.Int, f fee, replaces *store.SweepTx) (outcome, error) {
	// A deposit address sends one sweep, at nonce 0 (after the refunds
	// sent from it before the sweep, if any: depositBase). A used nonce
	// means it was spent by someone else (or a sweep died with its
	// nonce): never sign a second sweep.
	nonce, err := s.depositBase(ctx, inv)
	if err != nil {
		return outcome{}, err
	}
	if replaces != nil {
		nonce = replaces.Nonce
	} else {
		n, err := s.nonceAt(ctx, p, inv.DepositAddress)
		if err != nil {
			return outcome{}, err
		}
		if n != nonce {
			return failWith(ReasonDepositSpent), nil
		}
	}
	rec, err := s.signAndStore(ctx, p, spec{
		kind: store.SweepTxSweep, invoiceID: &inv.ID, from: inv.DepositAddress, to: to,
		value: value, fee: f, nonce: nonce, sign: s.depositSigner(inv), replaces: replaces, invoice: g,
	})
	if err != nil {
		return outcome{}, err
	}
	if replaces != nil {
		s.m.replaced.WithLabelValues(rec.Kind).Inc()
	}
	return s.afterFirstBroadcast(ctx, p, &rec, store.SweepSent)
}

// advanceDeduct: one transaction from the deposit address sends its
// balance minus the gas it can cost.
func (s *Sweeper) advanceDeduct(ctx context.Context, p *pass, inv store.Invoice, guard func(string) *invoiceGuard, sweep *slot) (outcome, error) {
	if sweep == nil {
		to, reason, err := s.target(ctx, p, inv)
		if reason != "" || err != nil {
			return failWith(reason), err
		}
		return s.deductSweep(ctx, p, inv, guard, to, s.freshFee(p), nil)
	}
	return s.tendSend(ctx, p, sweep, false, func(live *store.SweepTx) (outcome, error) {
		f, o, ok := s.replaceFee(ctx, p, s.exhausted(inv), live, store.SweepSent)
		if !ok {
			return o, nil
		}
		// The higher fee comes out of the value.
		o, err := s.deductSweep(ctx, p, inv, guard, live.To, f, live)
		if err == nil && o.fail == "" {
			o = retryWith(store.SweepSent, replaceReason(live))
		}
		return o, err
	})
}

func (s *Sweeper) deductSweep(ctx context.Context, p *pass, inv store.Invoice, guard func(string) *invoiceGuard, to common.Address, f fee, replaces *store.SweepTx) (outcome, error) {
	bal, err := s.chain.BalanceAt(ctx, inv.DepositAddress, p.headNumber())
	if err != nil {
		return outcome{}, err
	}
	if bal.Sign() == 0 {
		return failWith(ReasonNothingToSweep), nil
	}
	left, err := s.refundGasLeft(ctx, inv)
	if err != nil {
		return outcome{}, err
	}
	value := new(big.Int).Sub(bal, gasCost(transferGas, f.cap))
	value.Sub(value, left)
	if value.Sign() <= 0 {
		return failWith(ReasonBalanceBelowGas), nil
	}
	return s.sendSweep(ctx, p, inv, guard(store.SweepSent), to, value, f, replaces)
}
