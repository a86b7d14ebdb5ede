package sweep

import (
	"context"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
)

// fundedSend is a sweep in which the deposit address sends one transaction
// (SWEEP) whose gas the sweep wallet sends it first (FUNDING): the native
// sweep under PolicySponsor, a plain transfer of the payer's coin (native.go),
// and a token's transfer on the fund path, the invoice's own token or one
// paid to it as a wrong asset (tokenfund.go). Both go through one step,
// advanceFunded; they differ only in what the deposit sends (prepare) and
// how the sweep ends (finish).
type fundedSend struct {
	// acct is the account funded and sending: the invoice's deposit
	// address (depositAccount), or a refund's or payout's sender
	// (outbound.go).
	acct fundedAccount
	// fund are the fundings of this send (refreshed: mined ones known).
	fund []*slot
	// send is the deposit's live send, if one was signed (refreshed).
	send *slot
	// guard is the invoice check of a transaction of this sweep, the
	// invoice's sweep status becoming status.
	guard func(status string) *invoiceGuard
	// prepare readies the deposit's first send, before anything is funded
	// (funded is 0) and again once the fundings are mined: its gas limit,
	// and how to sign, store and broadcast it at a fee. A reason fails the
	// sweep.
	prepare func(ctx context.Context, p *pass, funded *big.Int) (plan sendPlan, reason string, err error)
	// finish ends the sweep once its send is mined and no funding is on its
	// way: its confirmations, then what follows it (wrong-asset sweeps).
	finish func(ctx context.Context, p *pass) (outcome, error)
}

// fundedAccount is the account a funded send funds and sends from.
type fundedAccount struct {
	addr common.Address
	// sign signs its send (and the send's replacements).
	sign signFunc
	// invoiceID and outboundID are recorded on its fundings.
	invoiceID, outboundID *int64
	// capped: the retries are used up; a stuck transaction is not
	// replaced again (the outcome fails).
	capped bool
	// keepAtCap: once its send is signed, a stuck send at the cap is not
	// failed but re-broadcast as it is (an outbound's send may still be
	// mined: failing it would let a second payment be made).
	keepAtCap bool
}

// depositAccount is the funded account of an invoice's own sweep: its
// deposit address, capped by the invoice's sweep attempts.
func (s *Sweeper) depositAccount(inv store.Invoice) fundedAccount {
	return fundedAccount{addr: inv.DepositAddress, sign: s.depositSigner(inv), invoiceID: &inv.ID, capped: s.exhausted(inv)}
}

// sendPlan is the deposit's first send, as prepared.
type sendPlan struct {
	// gas is its gas limit: what the funding pays for, × the fee cap.
	gas uint64
	// send signs, stores and broadcasts it at f (its fee cap is what the
	// mined fundings pay for: funded / gas). It may be nil while nothing
	// is funded: it is called only once the fundings are mined.
	send func(ctx context.Context, p *pass, f fee) (outcome, error)
}

// advanceFunded moves a funded send as far as the chain allows in this
// pass: the fundings are tended (re-broadcast, replaced with a bumped fee
// when stuck, funded again with a new nonce when their nonce went to
// another transaction); only once their receipts are seen at or below the
// pass's head does the deposit sign its send, at the fee cap the mined
// fundings pay for; a stuck send is replaced, after an extra funding of
// the difference when the fundings do not cover its bumped fee.
func (s *Sweeper) advanceFunded(ctx context.Context, p *pass, fs *fundedSend) (outcome, error) {
	if s.keys.Wallet == nil {
		return failWith(ReasonNoWallet), nil
	}
	status := store.SweepFunding
	if fs.send != nil {
		status = store.SweepSent
	}
	// funded is what mined fundings brought to the deposit address: the
	// send's gas budget.
	funded := new(big.Int)
	pending, lost := false, false
	for _, sl := range fs.fund {
		if sl.live() == nil {
			continue
		}
		if sl.mined != nil {
			if sl.receipt.Status != types.ReceiptStatusSuccessful {
				return failWith(ReasonReverted), nil
			}
			funded.Add(funded, sl.mined.ValueWei.Big())
			continue
		}
		v, err := s.tend(ctx, p, sl)
		if err != nil {
			return outcome{}, err
		}
		if v.dead {
			// The wallet's nonce went to another transaction (one block
			// after it was first seen): this funding can never be mined;
			// fund again below with a new nonce.
			lost = true
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
			return s.replaceStuck(ctx, p, fs.acct.capped, sl.live(), s.walletSigner, fs.guard(status))
		}
	}
	if fs.send != nil && fs.send.mined != nil && !pending {
		return fs.finish(ctx, p)
	}
	if lost && fs.acct.capped {
		return failWith(ReasonNonceTooLow), nil
	}
	o, err := s.fundedNext(ctx, p, fs, funded, pending)
	if lost && err == nil && o.fail == "" {
		o.attempt = true
		if o.sweepErr == nil || *o.sweepErr == "" {
			reason := ReasonNonceTooLow
			o.sweepErr = &reason
		}
	}
	return o, err
}

// fundedNext takes the next step once the fundings are tended: tend the
// send, wait for a funding, fund, or send.
func (s *Sweeper) fundedNext(ctx context.Context, p *pass, fs *fundedSend, funded *big.Int, pending bool) (outcome, error) {
	if fs.send != nil {
		return s.tendFundedSend(ctx, p, fs, funded, pending)
	}
	if pending {
		return outcome{status: store.SweepFunding, sweepErr: new(string)}, nil
	}
	plan, reason, err := fs.prepare(ctx, p, funded)
	if reason != "" || err != nil {
		return failWith(reason), err
	}
	if funded.Sign() == 0 {
		// Nothing funded yet: exactly the send's gas at a fresh fee cap.
		return s.fund(ctx, p, fs.acct, fs.guard(store.SweepFunding), gasCost(plan.gas, s.freshFee(p).cap))
	}
	feeCap := new(big.Int).Div(funded, new(big.Int).SetUint64(plan.gas))
	if feeCap.Cmp(s.minViable(p)) < 0 {
		// The base fee rose past the funded cap while the funding was
		// mined: fund the difference to a fresh price first.
		extra := new(big.Int).Sub(gasCost(plan.gas, s.freshFee(p).cap), funded)
		return s.fund(ctx, p, fs.acct, fs.guard(store.SweepFunding), extra)
	}
	return plan.send(ctx, p, fee{cap: feeCap, tip: bigMin(s.freshFee(p).tip, feeCap)})
}

// tendFundedSend keeps the deposit's signed send moving. A replacement
// must pay a higher fee cap from the deposit's gas money, so when the
// mined fundings do not cover it an extra funding of the difference goes
// first (and counts as the attempt); the replacement follows once it is
// mined, at the fee cap the fundings then pay for.
func (s *Sweeper) tendFundedSend(ctx context.Context, p *pass, fs *fundedSend, funded *big.Int, pending bool) (outcome, error) {
	return s.tendSend(ctx, p, fs.send, pending, func(live *store.SweepTx) (outcome, error) {
		f, o, ok := s.replaceFee(ctx, p, fs.acct.capped, live, store.SweepSent)
		if !ok {
			if fs.acct.keepAtCap && o.fail != "" {
				// At the cap: the stored bytes go out again, as they are.
				reason := ReasonReplacementCap
				return outcome{status: store.SweepSent, sweepErr: &reason}, s.keepSending(ctx, p, live)
			}
			return o, nil
		}
		if need := gasCost(live.GasLimit, f.cap); funded.Cmp(need) < 0 {
			// The send keeps its status (SENT) while the extra gas is sent.
			o, err := s.fund(ctx, p, fs.acct, fs.guard(store.SweepSent), new(big.Int).Sub(need, funded))
			if err == nil && o.fail == "" {
				o = retryWith(store.SweepSent, replaceReason(live))
			}
			return o, err
		}
		feeCap := new(big.Int).Div(funded, new(big.Int).SetUint64(live.GasLimit))
		f = fee{cap: feeCap, tip: bigMin(f.tip, feeCap)}
		return s.resend(ctx, p, live, f, fs.acct.sign, fs.guard(store.SweepSent))
	})
}

// tendSend keeps a deposit address's signed send (the sweep, from nonce
// 0, or a token transfer) moving: re-broadcast, or replace (by replace)
// when stuck or refused as underpriced. pending: a funding of its gas is
// on its way, which is what it waits for.
func (s *Sweeper) tendSend(ctx context.Context, p *pass, sl *slot, pending bool, replace func(live *store.SweepTx) (outcome, error)) (outcome, error) {
	v, err := s.tend(ctx, p, sl)
	if err != nil {
		return outcome{}, err
	}
	live := sl.live()
	switch {
	case v.dead:
		return failWith(ReasonNonceTooLow), nil
	case v.nonceWait:
		return retryWith(store.SweepSent, ReasonNonceTooLow), nil
	case v.class == classInsufficientFunds:
		if pending {
			// A funding was reorged out (or is still on its way): the send
			// becomes valid again once it is mined.
			return outcome{status: store.SweepSent}, nil
		}
		return retryWith(store.SweepSent, ReasonInsufficientGas), nil
	case v.class == classRejected:
		return failWith(live.LastError), nil
	case v.replace:
		if pending {
			return outcome{status: store.SweepSent}, nil
		}
		return replace(live)
	}
	return outcome{status: store.SweepSent}, nil
}

// fund signs, stores and broadcasts a funding of amount from the sweep
// wallet to the funded account, if the wallet can pay for it.
func (s *Sweeper) fund(ctx context.Context, p *pass, acct fundedAccount, g *invoiceGuard, amount *big.Int) (outcome, error) {
	_, o, err := s.walletSend(ctx, p, spec{
		kind: store.SweepTxFunding, invoiceID: acct.invoiceID, outboundID: acct.outboundID, to: acct.addr, value: amount,
		invoice: g,
	})
	return o, err
}

// minViable is the smallest fee cap a transaction can be mined with at the
// pass's head.
func (s *Sweeper) minViable(p *pass) *big.Int {
	return bigMax(new(big.Int).Add(p.baseFee, big.NewInt(1)), s.cfg.MinGasPrice.Big())
}
