package sweep

import (
	"context"
	"math/big"

	"github.com/evmpay/evmpay/store"
)

// advanceFund: the sweep wallet funds the deposit address with exactly the
// gas of its token transfer — gas limit (estimate + 20%) × fee cap —
// (FUNDING); only once that funding's receipt is seen at or below the
// pass's head does the deposit key sign transfer(settlement address,
// balance) (SENT). Never a sleep: each pass looks at the receipts. It is
// the funded send of native sponsored sweeps (funded.go) with a token
// transfer as the deposit's send, for the invoice's own token and for a
// wrong-asset token (t.wrong) alike.
func (s *Sweeper) advanceFund(ctx context.Context, p *pass, inv store.Invoice, t *tokenSweep) (outcome, error) {
	t.sweep = liveSlot(t.sweeps)
	for _, sl := range append([]*slot{t.sweep}, t.fund...) {
		if sl == nil || sl.live() == nil {
			continue
		}
		if err := s.refresh(ctx, p, sl); err != nil {
			return outcome{}, err
		}
	}
	return s.advanceFunded(ctx, p, &fundedSend{
		acct: s.depositAccount(inv), fund: t.fund, send: t.sweep,
		guard: func(status string) *invoiceGuard { return t.guard(inv, status) },
		prepare: func(ctx context.Context, p *pass, _ *big.Int) (sendPlan, string, error) {
			return s.prepareTokenTransfer(ctx, p, inv, t)
		},
		finish: func(ctx context.Context, p *pass) (outcome, error) {
			if t.wrong {
				return s.confirmToken(p, inv, t.token, t.sweep, t.fund)
			}
			return s.finishToken(ctx, p, inv, t, t.sweep, t.fund)
		},
	})
}

// prepareTokenTransfer readies the deposit's transfer(settlement address,
// balance) of t.token: simulated and estimated from the deposit (a revert
// or a false return fails the sweep before anything is signed), its gas
// limit the estimate + 20%, sent with the deposit's nonce t.nonce once the
// chain agrees it is the next one.
func (s *Sweeper) prepareTokenTransfer(ctx context.Context, p *pass, inv store.Invoice, t *tokenSweep) (sendPlan, string, error) {
	to, reason, err := s.target(ctx, p, inv)
	if reason != "" || err != nil {
		return sendPlan{}, reason, err
	}
	value, err := callUint(ctx, s.chain, t.token, p.headNumber(), "balanceOf", inv.DepositAddress)
	if err != nil {
		return sendPlan{}, "", err
	}
	if value.Sign() == 0 {
		return sendPlan{}, ReasonNothingToSweep, nil
	}
	est, err := s.estimateTransfer(ctx, p, inv.DepositAddress, t.token, to, value)
	if err != nil {
		return sendPlan{}, "", err
	}
	if est == 0 {
		return sendPlan{}, ReasonTokenTransferFailed, nil
	}
	gas := withMargin(est)
	return sendPlan{gas: gas, send: func(ctx context.Context, p *pass, f fee) (outcome, error) {
		n, err := s.nonceAt(ctx, p, inv.DepositAddress)
		if err != nil {
			return outcome{}, err
		}
		if n != t.nonce {
			return failWith(ReasonDepositSpent), nil
		}
		rec, err := s.signAndStore(ctx, p, spec{
			kind: store.SweepTxSweep, invoiceID: &inv.ID, from: inv.DepositAddress, to: t.token, value: new(big.Int),
			data: packCall("transfer", to, value), gas: gas, fee: f, nonce: t.nonce, sign: s.depositSigner(inv),
			invoice: t.guard(inv, store.SweepSent),
		})
		if err != nil {
			return outcome{}, err
		}
		return s.afterFirstBroadcast(ctx, p, &rec, store.SweepSent)
	}}, "", nil
}
