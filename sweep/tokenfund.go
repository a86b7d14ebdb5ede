package sweep

import (
	"context"
	"math/big"

	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
)

// advanceFund: the sweep wallet funds the deposit address with exactly the
// gas of its token transfer — gas limit (estimate + 20%) × fee cap —
// (FUNDING); only once that funding's receipt is seen at or below the
// pass's head does the deposit key sign transfer(settlement address,
// balance) (SENT). Never a sleep: each pass looks at the receipts.
func (s *Sweeper) advanceFund(ctx context.Context, p *pass, inv store.Invoice, t *tokenSweep) (outcome, error) {
	if s.keys.Wallet == nil {
		return failWith(ReasonNoWallet), nil
	}
	t.sweep = liveSlot(t.sweeps)
	if t.sweep != nil {
		if err := s.refresh(ctx, p, t.sweep); err != nil {
			return outcome{}, err
		}
	}
	funded := new(big.Int)
	pending, lost := false, false
	for _, sl := range t.fund {
		if sl.live() == nil {
			continue
		}
		if err := s.refresh(ctx, p, sl); err != nil {
			return outcome{}, err
		}
		if sl.mined != nil {
			if sl.receipt.Status != types.ReceiptStatusSuccessful {
				return failWith(ReasonReverted), nil
			}
			funded.Add(funded, sl.mined.ValueWei.Big())
			continue
		}
		status := store.SweepFunding
		if t.sweep != nil {
			status = store.SweepSent
		}
		v, err := s.tend(ctx, p, sl)
		if err != nil {
			return outcome{}, err
		}
		if v.dead {
			lost = true // its nonce went elsewhere: fund again below
			continue
		}
		pending = true
		switch {
		case v.nonceWait:
			return retryWith(status, ReasonNonceTooLow), nil
		case v.class == classInsufficientFunds:
			return failWith(ReasonInsufficientGas), nil
		case v.class == classRejected:
			return failWith(sl.live().LastError), nil
		case v.replace:
			live := sl.live()
			if s.exhausted(inv) {
				return failWith(replaceReason(live)), nil
			}
			f := s.bumped(p, feeOf(*live))
			if f.cap.Cmp(live.MaxFeeWei.Big()) <= 0 {
				return retryWith(status, ReasonNotMined), nil
			}
			rec, err := s.signAndStore(ctx, p, spec{
				kind: store.SweepTxFunding, invoiceID: &inv.ID, from: live.From, to: live.To,
				value: live.ValueWei.Big(), fee: f, nonce: live.Nonce, sign: s.walletSigner, replaces: live,
				invoice: t.guard(inv, status),
			})
			if err != nil {
				return outcome{}, err
			}
			s.m.replaced.WithLabelValues(rec.Kind).Inc()
			if _, err := s.broadcast(ctx, p, &rec); err != nil {
				return outcome{}, err
			}
			return retryWith(status, replaceReason(live)), nil
		}
	}
	if t.sweep != nil && t.sweep.mined != nil && !pending {
		if t.wrong {
			return s.confirmToken(p, inv, t.token, t.sweep, t.fund)
		}
		return s.finishToken(ctx, p, inv, t, t.sweep, t.fund)
	}
	if lost && s.exhausted(inv) {
		return failWith(ReasonNonceTooLow), nil
	}
	o, err := s.fundNext(ctx, p, inv, t, funded, pending)
	if lost && err == nil && o.fail == "" {
		o.attempt = true
		if o.sweepErr == nil || *o.sweepErr == "" {
			reason := ReasonNonceTooLow
			o.sweepErr = &reason
		}
	}
	return o, err
}

func (s *Sweeper) fundNext(ctx context.Context, p *pass, inv store.Invoice, t *tokenSweep, funded *big.Int, pending bool) (outcome, error) {
	if t.sweep != nil {
		return s.tendTokenTransfer(ctx, p, inv, t, funded, pending)
	}
	if pending {
		return outcome{status: store.SweepFunding, sweepErr: new(string)}, nil
	}
	to, reason, err := s.target(ctx, p, inv)
	if reason != "" || err != nil {
		return failWith(reason), err
	}
	value, err := callUint(ctx, s.chain, t.token, p.headNumber(), "balanceOf", inv.DepositAddress)
	if err != nil {
		return outcome{}, err
	}
	if value.Sign() == 0 {
		return failWith(ReasonNothingToSweep), nil
	}
	est, err := s.estimateTransfer(ctx, p, inv, t.token, to, value)
	if err != nil {
		return outcome{}, err
	}
	if est == 0 {
		return failWith(ReasonTokenTransferFailed), nil
	}
	gas := withMargin(est)
	if funded.Sign() == 0 {
		// Nothing funded yet: exactly the gas of the transfer at a fresh
		// fee cap.
		return s.fund(ctx, p, inv, t.guard(inv, store.SweepFunding), gasCost(gas, s.freshFee(p).cap))
	}
	feeCap := new(big.Int).Div(funded, new(big.Int).SetUint64(gas))
	if feeCap.Cmp(s.minViable(p)) < 0 {
		// The base fee rose past the funded cap while the funding was
		// mined: fund the difference to a fresh price first.
		extra := new(big.Int).Sub(gasCost(gas, s.freshFee(p).cap), funded)
		return s.fund(ctx, p, inv, t.guard(inv, store.SweepFunding), extra)
	}
	n, err := s.nonceAt(ctx, p, inv.DepositAddress)
	if err != nil {
		return outcome{}, err
	}
	if n != t.nonce {
		return failWith(ReasonDepositSpent), nil
	}
	f := fee{cap: feeCap, tip: bigMin(s.freshFee(p).tip, feeCap)}
	return s.sendTokenTransfer(ctx, p, inv, t, packCall("transfer", to, value), gas, f, nil)
}

// sendTokenTransfer signs, stores and broadcasts the deposit address's
// transfer (nonce t.nonce), or a replacement of replaces.
func (s *Sweeper) sendTokenTransfer(ctx context.Context, p *pass, inv store.Invoice, t *tokenSweep, data []byte, gas uint64, f fee, replaces *store.SweepTx) (outcome, error) {
	rec, err := s.signAndStore(ctx, p, spec{
		kind: store.SweepTxSweep, invoiceID: &inv.ID, from: inv.DepositAddress, to: t.token, value: new(big.Int),
		data: data, gas: gas, fee: f, nonce: t.nonce, sign: s.depositSigner(inv), replaces: replaces,
		invoice: t.guard(inv, store.SweepSent),
	})
	if err != nil {
		return outcome{}, err
	}
	if replaces != nil {
		s.m.replaced.WithLabelValues(rec.Kind).Inc()
	}
	return s.afterFirstBroadcast(ctx, p, &rec, store.SweepSent)
}

// tendTokenTransfer keeps a signed token transfer from the deposit moving.
// A replacement pays a higher fee cap from the same funding, so when the
// funding does not cover it an extra funding of the difference goes
// first.
func (s *Sweeper) tendTokenTransfer(ctx context.Context, p *pass, inv store.Invoice, t *tokenSweep, funded *big.Int, pending bool) (outcome, error) {
	v, err := s.tend(ctx, p, t.sweep)
	if err != nil {
		return outcome{}, err
	}
	live := t.sweep.live()
	switch {
	case v.dead:
		return failWith(ReasonNonceTooLow), nil
	case v.nonceWait:
		return retryWith(store.SweepSent, ReasonNonceTooLow), nil
	case v.class == classInsufficientFunds:
		if pending {
			return outcome{status: store.SweepSent}, nil
		}
		return retryWith(store.SweepSent, ReasonInsufficientGas), nil
	case v.class == classRejected:
		return failWith(live.LastError), nil
	case v.replace:
		if pending {
			return outcome{status: store.SweepSent}, nil
		}
		if s.exhausted(inv) {
			return failWith(replaceReason(live)), nil
		}
		f := s.bumped(p, feeOf(*live))
		if f.cap.Cmp(live.MaxFeeWei.Big()) <= 0 {
			return retryWith(store.SweepSent, ReasonNotMined), nil
		}
		if need := gasCost(live.GasLimit, f.cap); funded.Cmp(need) < 0 {
			o, err := s.fund(ctx, p, inv, t.guard(inv, store.SweepSent), new(big.Int).Sub(need, funded))
			if err == nil && o.fail == "" {
				o = retryWith(store.SweepSent, replaceReason(live))
			}
			return o, err
		}
		c, err := decodeTokenCall(live.RawTx)
		if err != nil {
			return outcome{}, err
		}
		feeCap := new(big.Int).Div(funded, new(big.Int).SetUint64(live.GasLimit))
		f = fee{cap: feeCap, tip: bigMin(f.tip, feeCap)}
		o, err := s.sendTokenTransfer(ctx, p, inv, t, c.data, live.GasLimit, f, live)
		if err == nil && o.fail == "" {
			o = retryWith(store.SweepSent, replaceReason(live))
		}
		return o, err
	}
	return outcome{status: store.SweepSent}, nil
}
