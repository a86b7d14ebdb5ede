package sweep

import (
	"context"
	"math/big"

	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
)

// finishToken ends a token sweep whose transfer is mined: once it has its
// confirmations, native coin that settlement recorded as a wrong-asset
// payment to this token invoice is swept to the merchant too, then the
// invoice is SWEPT.
func (s *Sweeper) finishToken(ctx context.Context, p *pass, inv store.Invoice, t *tokenSweep, sl *slot, fund []*slot) (outcome, error) {
	o, err := s.confirmToken(p, inv, t.token, sl, fund)
	if err != nil || o.swept == nil {
		return o, err
	}
	n, done, err := s.sweepWrongNative(ctx, p, inv, t)
	if err != nil || !done {
		return n, err
	}
	if len(t.natives) > 0 {
		// What stays at the deposit address after both: the native sweep's
		// unspent gas (and the funding path's dust it did not take).
		bal, err := s.chain.BalanceAt(ctx, inv.DepositAddress, p.headNumber())
		if err != nil {
			return outcome{}, err
		}
		o.swept.dust = amountOf(bal)
	}
	return o, nil
}

// sweepWrongNative moves the native coin at a token invoice's deposit
// address to the merchant when settlement recorded a wrong-asset native
// payment: one transaction from the deposit (nonce: its next) sending its
// balance minus 21000 × fee cap — the payer's mistake pays its own gas.
// done reports that nothing (more) is to be done.
func (s *Sweeper) sweepWrongNative(ctx context.Context, p *pass, inv store.Invoice, t *tokenSweep) (outcome, bool, error) {
	if live := liveSlot(t.natives); live != nil {
		if err := s.refresh(ctx, p, live); err != nil {
			return outcome{}, false, err
		}
		if live.mined != nil {
			if live.receipt.Status != types.ReceiptStatusSuccessful {
				return failWith(ReasonReverted), false, nil
			}
			if p.number-live.receipt.BlockNumber.Uint64() < s.cfg.Confirmations {
				return outcome{status: store.SweepSent, sweepErr: new(string)}, false, nil
			}
			return outcome{}, true, nil
		}
		v, err := s.tend(ctx, p, live)
		if err != nil {
			return outcome{}, false, err
		}
		switch {
		case v.dead || v.class == classRejected || v.class == classInsufficientFunds:
			// The native coin stays at the deposit (needs_attention is
			// already set by settlement); the token sweep stands.
			return outcome{}, true, nil
		case v.replace:
			if s.exhausted(inv) {
				return outcome{}, true, nil
			}
			cur := live.live()
			f := s.bumped(p, feeOf(*cur))
			value := new(big.Int).Sub(new(big.Int).Add(cur.ValueWei.Big(), gasCost(transferGas, cur.MaxFeeWei.Big())), gasCost(transferGas, f.cap))
			if value.Sign() <= 0 || f.cap.Cmp(cur.MaxFeeWei.Big()) <= 0 {
				return retryWith(store.SweepSent, ReasonNotMined), false, nil
			}
			rec, err := s.signAndStore(ctx, p, spec{
				kind: store.SweepTxNative, invoiceID: &inv.ID, from: cur.From, to: cur.To, value: value, fee: f,
				nonce: cur.Nonce, sign: s.depositSigner(inv), replaces: cur,
				invoice: &invoiceGuard{id: inv.ID, seen: t.seen, status: store.SweepSent},
			})
			if err != nil {
				return outcome{}, false, err
			}
			if _, err := s.broadcast(ctx, p, &rec); err != nil {
				return outcome{}, false, err
			}
			return retryWith(store.SweepSent, replaceReason(cur)), false, nil
		}
		return outcome{status: store.SweepSent}, false, nil
	}
	if len(t.natives) > 0 {
		return outcome{}, true, nil // tried and given up: the coin stays, flagged by settlement
	}
	pays, err := s.st.ListPaymentsByInvoice(ctx, inv.ID)
	if err != nil {
		return outcome{}, false, err
	}
	wrong := false
	for _, pay := range pays {
		wrong = wrong || pay.WrongAsset && pay.Token == nil
	}
	if !wrong {
		return outcome{}, true, nil
	}
	bal, err := s.chain.BalanceAt(ctx, inv.DepositAddress, p.headNumber())
	if err != nil {
		return outcome{}, false, err
	}
	f := s.freshFee(p)
	value := new(big.Int).Sub(bal, gasCost(transferGas, f.cap))
	if value.Sign() <= 0 {
		return outcome{}, true, nil // less than its own gas: it stays as dust
	}
	to, reason, err := s.target(ctx, p, inv)
	if reason != "" || err != nil {
		return outcome{}, reason != "", err
	}
	nonce, err := s.nonceAt(ctx, p, inv.DepositAddress)
	if err != nil {
		return outcome{}, false, err
	}
	rec, err := s.signAndStore(ctx, p, spec{
		kind: store.SweepTxNative, invoiceID: &inv.ID, from: inv.DepositAddress, to: to, value: value, fee: f,
		nonce: nonce, sign: s.depositSigner(inv),
		invoice: &invoiceGuard{id: inv.ID, seen: t.seen, status: store.SweepSent},
	})
	if err != nil {
		return outcome{}, false, err
	}
	o, err := s.afterFirstBroadcast(ctx, p, &rec, store.SweepSent)
	return o, false, err
}
