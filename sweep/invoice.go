package sweep

import (
	"context"
	"log/slog"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
)

// advance moves one invoice's sweep as far as the chain allows in this
// pass. Its state is derived from the chain and the stored transactions
// each time, so that a crash at any point resumes where it was; the error
// is for transient failures only (the invoice is retried after
// RetryBackoff).
func (s *Sweeper) advance(ctx context.Context, p *pass, inv store.Invoice) (outcome, error) {
	txs, err := s.st.ListSweepTxsByInvoice(ctx, inv.ID)
	if err != nil {
		return outcome{}, err
	}
	if token := invoiceToken(inv); token != nil {
		return s.advanceToken(ctx, p, inv, *token, txs)
	}
	seen := fingerprintOf(txs)
	own := ownTxs(txs)
	fund := groupSlots(own, store.SweepTxFunding)
	var sweep *slot
	for _, sl := range groupSlots(own, store.SweepTxSweep) {
		if sl.live() != nil {
			sweep = sl
		}
	}
	inFlight := sweep != nil
	for _, sl := range fund {
		if sl.live() != nil {
			inFlight = true
			if err := s.refresh(ctx, p, sl); err != nil {
				return outcome{}, err
			}
		}
	}
	if sweep != nil {
		if err := s.refresh(ctx, p, sweep); err != nil {
			return outcome{}, err
		}
		if sweep.mined != nil && !fundingPending(fund) {
			o, err := s.confirm(p, sweep, fund)
			if err != nil || o.swept == nil {
				return o, err
			}
			if w, done, err := s.sweepWrongTokens(ctx, p, inv); err != nil || !done {
				return w, err
			}
			return o, s.dustAfterWrong(ctx, p, inv, false, &o)
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
	var live []*slot
	for _, sl := range fund {
		if sl.live() != nil {
			live = append(live, sl)
		}
	}
	if len(live) > 0 || (sweep == nil && s.cfg.Policy == PolicySponsor) {
		return s.advanceSponsor(ctx, p, inv, seen, live, sweep)
	}
	return s.advanceDeduct(ctx, p, inv, seen, sweep)
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
	if block := r.BlockNumber.Uint64(); p.number-block < s.cfg.Confirmations {
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

// precheck runs before anything is signed for an invoice. stop reports an
// outcome that ends this pass for it.
func (s *Sweeper) precheck(ctx context.Context, p *pass, inv store.Invoice) (o outcome, stop bool, err error) {
	if inv.Status != store.StatusConfirmed {
		// Settlement moved it (a reorg of its payment): leave it be.
		retry := p.now.Add(s.cfg.RetryBackoff)
		return outcome{retryAt: &retry}, true, nil
	}
	if s.chainID.Sign() <= 0 || !s.chainID.IsUint64() || inv.ChainID != s.chainID.Uint64() {
		return failWith(ReasonChainMismatch), true, nil
	}
	addr, err := s.keys.Deposits.Address(inv.DerivationIndex)
	if err != nil {
		return outcome{}, true, err
	}
	if addr != inv.DepositAddress {
		return failWith(ReasonKeyMismatch), true, nil
	}
	n, err := s.nonceAt(ctx, p, inv.DepositAddress)
	if err != nil {
		return outcome{}, true, err
	}
	if n != 0 {
		return failWith(ReasonDepositSpent), true, nil
	}
	if _, reason, err := s.target(ctx, p, inv); reason != "" || err != nil {
		return failWith(reason), true, err
	}
	return outcome{}, false, nil
}

// target returns the merchant's settlement address, or why it cannot be
// swept to.
func (s *Sweeper) target(ctx context.Context, p *pass, inv store.Invoice) (common.Address, string, error) {
	m, err := s.st.GetMerchant(ctx, inv.MerchantID)
	if err != nil {
		return common.Address{}, "", err
	}
	if m.SettlementAddress == (common.Address{}) {
		return common.Address{}, ReasonNoSettlementAddress, nil
	}
	code, err := s.chain.CodeAt(ctx, m.SettlementAddress, p.headNumber())
	if err != nil {
		return common.Address{}, "", err
	}
	if len(code) > 0 {
		return common.Address{}, ReasonSettlementIsContract, nil
	}
	own, err := s.serviceAddress(ctx, m.SettlementAddress)
	if err != nil {
		return common.Address{}, "", err
	}
	if own {
		s.log.ErrorContext(ctx, "sweep: refusing to sweep to an address of this service", slog.Int64("invoice_id", inv.ID),
			slog.Int64("merchant_id", m.ID), slog.String("settlement_address", m.SettlementAddress.Hex()))
		return common.Address{}, ReasonSettlementIsService, nil
	}
	return m.SettlementAddress, "", nil
}

func (s *Sweeper) depositSigner(inv store.Invoice) func(context.Context, *types.Transaction) (*types.Transaction, error) {
	return func(ctx context.Context, tx *types.Transaction) (*types.Transaction, error) {
		return s.keys.Deposits.SignTx(ctx, inv.DerivationIndex, tx, s.signer)
	}
}

func (s *Sweeper) walletSigner(ctx context.Context, tx *types.Transaction) (*types.Transaction, error) {
	return s.keys.Wallet.SignTx(ctx, tx, s.signer)
}

// advanceSponsor: the sweep wallet funds the deposit address with the gas
// of its sweep (FUNDING), and once that is mined the deposit address sends
// exactly the payer's funds to the merchant (SENT).
func (s *Sweeper) advanceSponsor(ctx context.Context, p *pass, inv store.Invoice, seen fingerprint, fund []*slot, sweep *slot) (outcome, error) {
	if s.keys.Wallet == nil {
		return failWith(ReasonNoWallet), nil
	}
	status := store.SweepFunding
	if sweep != nil {
		status = store.SweepSent
	}
	// funded is what mined fundings brought to the deposit address: the
	// sweep's gas budget.
	funded := new(big.Int)
	pending, lost := false, false
	for _, sl := range fund {
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
			live := sl.live()
			if s.exhausted(inv) {
				s.stopReplacing(ctx, live, ReasonReplacementCap)
				return failWith(replaceReason(live)), nil
			}
			f := s.bumped(p, feeOf(*live))
			if !replaceable(feeOf(*live), f) {
				s.stopReplacing(ctx, live, ReasonFeeCeiling)
				return retryWith(status, ReasonFeeCeiling), nil // at MaxFeePerGas: nothing to bump
			}
			rec, err := s.signAndStore(ctx, p, spec{
				kind: store.SweepTxFunding, invoiceID: &inv.ID, from: live.From, to: live.To,
				value: live.ValueWei.Big(), fee: f, nonce: live.Nonce, sign: s.walletSigner, replaces: live,
				invoice: &invoiceGuard{id: inv.ID, seen: seen, status: status},
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

	if lost && s.exhausted(inv) {
		return failWith(ReasonNonceTooLow), nil
	}
	o, err := s.sponsorNext(ctx, p, inv, seen, sweep, funded, pending)
	if lost && err == nil && o.fail == "" {
		o.attempt = true
		if o.sweepErr == nil || *o.sweepErr == "" {
			reason := ReasonNonceTooLow
			o.sweepErr = &reason
		}
	}
	return o, err
}

func (s *Sweeper) sponsorNext(ctx context.Context, p *pass, inv store.Invoice, seen fingerprint, sweep *slot, funded *big.Int, pending bool) (outcome, error) {
	if sweep != nil {
		return s.tendSponsoredSweep(ctx, p, inv, seen, sweep, funded, pending)
	}
	if pending {
		return outcome{status: store.SweepFunding, sweepErr: new(string)}, nil
	}
	if funded.Sign() == 0 {
		// Nothing funded yet: send the deposit address exactly the gas its
		// sweep can cost at a fresh price.
		return s.fund(ctx, p, inv, &invoiceGuard{id: inv.ID, seen: seen, status: store.SweepFunding}, gasCost(transferGas, s.freshFee(p).cap))
	}

	// Funded: the deposit address sends the payer's funds, all of them.
	bal, err := s.chain.BalanceAt(ctx, inv.DepositAddress, p.headNumber())
	if err != nil {
		return outcome{}, err
	}
	value := new(big.Int).Sub(bal, funded)
	if value.Sign() <= 0 {
		return failWith(ReasonNothingToSweep), nil
	}
	feeCap := new(big.Int).Div(funded, big.NewInt(transferGas))
	if feeCap.Cmp(s.minViable(p)) < 0 {
		// The base fee rose past the funded cap while the funding was
		// mined: fund the difference to a fresh price first.
		extra := new(big.Int).Sub(gasCost(transferGas, s.freshFee(p).cap), funded)
		return s.fund(ctx, p, inv, &invoiceGuard{id: inv.ID, seen: seen, status: store.SweepFunding}, extra)
	}
	to, reason, err := s.target(ctx, p, inv)
	if reason != "" || err != nil {
		return failWith(reason), err
	}
	f := fee{cap: feeCap, tip: bigMin(s.freshFee(p).tip, feeCap)}
	return s.sendSweep(ctx, p, inv, seen, to, value, f, nil)
}

// minViable is the smallest fee cap a transaction can be mined with at the
// pass's head.
func (s *Sweeper) minViable(p *pass) *big.Int {
	return bigMax(new(big.Int).Add(p.baseFee, big.NewInt(1)), s.cfg.MinGasPrice.Big())
}

// tendSponsoredSweep keeps a signed sponsored sweep moving. A replacement
// must pay a higher fee cap with the same value, so it is preceded by an
// extra funding of the difference.
func (s *Sweeper) tendSponsoredSweep(ctx context.Context, p *pass, inv store.Invoice, seen fingerprint, sweep *slot, funded *big.Int, pending bool) (outcome, error) {
	v, err := s.tend(ctx, p, sweep)
	if err != nil {
		return outcome{}, err
	}
	live := sweep.live()
	switch {
	case v.dead:
		return failWith(ReasonNonceTooLow), nil
	case v.nonceWait:
		return retryWith(store.SweepSent, ReasonNonceTooLow), nil
	case v.class == classInsufficientFunds:
		if pending {
			// A funding was reorged out (or is still on its way): the
			// sweep becomes valid again once it is mined.
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
			s.stopReplacing(ctx, live, ReasonReplacementCap)
			return failWith(replaceReason(live)), nil
		}
		f := s.bumped(p, feeOf(*live))
		if !replaceable(feeOf(*live), f) {
			s.stopReplacing(ctx, live, ReasonFeeCeiling)
			return retryWith(store.SweepSent, ReasonFeeCeiling), nil
		}
		if need := gasCost(transferGas, f.cap); funded.Cmp(need) < 0 {
			// The sweep keeps its status (SENT) while the extra gas is
			// sent; the extra funding counts as an attempt.
			o, err := s.fund(ctx, p, inv, &invoiceGuard{id: inv.ID, seen: seen, status: store.SweepSent}, new(big.Int).Sub(need, funded))
			if err == nil && o.fail == "" {
				o = retryWith(store.SweepSent, replaceReason(live))
			}
			return o, err
		}
		feeCap := new(big.Int).Div(funded, big.NewInt(transferGas))
		f = fee{cap: feeCap, tip: bigMin(f.tip, feeCap)}
		o, err := s.sendSweep(ctx, p, inv, seen, live.To, live.ValueWei.Big(), f, live)
		if err == nil && o.fail == "" {
			o = retryWith(store.SweepSent, replaceReason(live))
		}
		return o, err
	}
	return outcome{status: store.SweepSent}, nil
}

// fund signs, stores and broadcasts a funding of amount from the sweep
// wallet to the deposit address, if the wallet can pay for it.
func (s *Sweeper) fund(ctx context.Context, p *pass, inv store.Invoice, g *invoiceGuard, amount *big.Int) (outcome, error) {
	f := s.freshFee(p)
	wallet := s.keys.Wallet.Address()
	ok, err := s.reserveWallet(ctx, p, new(big.Int).Add(amount, gasCost(transferGas, f.cap)))
	if err != nil {
		return outcome{}, err
	}
	if !ok {
		return failWith(ReasonInsufficientGas), nil
	}
	pendingNonce, err := s.pendingNonce(ctx, p, wallet)
	if err != nil {
		return outcome{}, err
	}
	rec, err := s.signAndStore(ctx, p, spec{
		kind: store.SweepTxFunding, invoiceID: &inv.ID, from: wallet, to: inv.DepositAddress,
		value: amount, fee: f, nonce: pendingNonce, reserve: true, sign: s.walletSigner, invoice: g,
	})
	if err != nil {
		return outcome{}, err
	}
	return s.afterFirstBroadcast(ctx, p, &rec, g.status)
}

// sendSweep signs, stores and broadcasts the sweep from the deposit
// address (or a replacement of replaces).
func (s *Sweeper) sendSweep(ctx context.Context, p *pass, inv store.Invoice, seen fingerprint, to common.Address, value *big.Int, f fee, replaces *store.SweepTx) (outcome, error) {
	if replaces == nil {
		// A deposit address sends one transaction, at nonce 0. A used
		// nonce means it was spent by someone else (or a sweep died with
		// its nonce): never sign a second sweep.
		n, err := s.nonceAt(ctx, p, inv.DepositAddress)
		if err != nil {
			return outcome{}, err
		}
		if n != 0 {
			return failWith(ReasonDepositSpent), nil
		}
	}
	rec, err := s.signAndStore(ctx, p, spec{
		kind: store.SweepTxSweep, invoiceID: &inv.ID, from: inv.DepositAddress, to: to,
		value: value, fee: f, nonce: 0, sign: s.depositSigner(inv), replaces: replaces,
		invoice: &invoiceGuard{id: inv.ID, seen: seen, status: store.SweepSent},
	})
	if err != nil {
		return outcome{}, err
	}
	if replaces != nil {
		s.m.replaced.WithLabelValues(rec.Kind).Inc()
	}
	return s.afterFirstBroadcast(ctx, p, &rec, store.SweepSent)
}

// afterFirstBroadcast broadcasts a just-stored transaction and maps the
// node's answer to the invoice's outcome.
func (s *Sweeper) afterFirstBroadcast(ctx context.Context, p *pass, rec *store.SweepTx, status string) (outcome, error) {
	c, err := s.broadcast(ctx, p, rec)
	if err != nil {
		if c == classTransient && ctx.Err() == nil {
			// Stored: the next pass re-broadcasts the same bytes.
			return outcome{status: status, sweepErr: new(string)}, nil
		}
		return outcome{}, err
	}
	switch c {
	case classOK, classAlreadyKnown, classNonceTooHigh:
		return outcome{status: status, sweepErr: new(string)}, nil
	case classInsufficientFunds:
		if rec.Kind == store.SweepTxFunding {
			return failWith(ReasonInsufficientGas), nil
		}
		return retryWith(status, ReasonInsufficientGas), nil
	case classRejected:
		return failWith(rec.LastError), nil
	default: // underpriced, nonce too low: the next pass replaces or re-checks
		return retryWith(status, c.String()), nil
	}
}

// advanceDeduct: one transaction from the deposit address sends its
// balance minus the gas it can cost.
func (s *Sweeper) advanceDeduct(ctx context.Context, p *pass, inv store.Invoice, seen fingerprint, sweep *slot) (outcome, error) {
	if sweep == nil {
		to, reason, err := s.target(ctx, p, inv)
		if reason != "" || err != nil {
			return failWith(reason), err
		}
		return s.deductSweep(ctx, p, inv, seen, to, s.freshFee(p), nil)
	}
	v, err := s.tend(ctx, p, sweep)
	if err != nil {
		return outcome{}, err
	}
	live := sweep.live()
	switch {
	case v.dead:
		return failWith(ReasonNonceTooLow), nil
	case v.nonceWait:
		return retryWith(store.SweepSent, ReasonNonceTooLow), nil
	case v.class == classInsufficientFunds:
		return retryWith(store.SweepSent, ReasonInsufficientGas), nil
	case v.class == classRejected:
		return failWith(live.LastError), nil
	case v.replace:
		if s.exhausted(inv) {
			s.stopReplacing(ctx, live, ReasonReplacementCap)
			return failWith(replaceReason(live)), nil
		}
		f := s.bumped(p, feeOf(*live))
		if !replaceable(feeOf(*live), f) {
			s.stopReplacing(ctx, live, ReasonFeeCeiling)
			return retryWith(store.SweepSent, ReasonFeeCeiling), nil
		}
		o, err := s.deductSweep(ctx, p, inv, seen, live.To, f, live)
		if err == nil && o.fail == "" {
			o = retryWith(store.SweepSent, replaceReason(live))
		}
		return o, err
	}
	return outcome{status: store.SweepSent}, nil
}

func (s *Sweeper) deductSweep(ctx context.Context, p *pass, inv store.Invoice, seen fingerprint, to common.Address, f fee, replaces *store.SweepTx) (outcome, error) {
	bal, err := s.chain.BalanceAt(ctx, inv.DepositAddress, p.headNumber())
	if err != nil {
		return outcome{}, err
	}
	if bal.Sign() == 0 {
		return failWith(ReasonNothingToSweep), nil
	}
	value := new(big.Int).Sub(bal, gasCost(transferGas, f.cap))
	if value.Sign() <= 0 {
		return failWith(ReasonBalanceBelowGas), nil
	}
	return s.sendSweep(ctx, p, inv, seen, to, value, f, replaces)
}

// exhausted reports whether the sweep used its MaxAttempts retries.
func (s *Sweeper) exhausted(inv store.Invoice) bool { return inv.SweepAttempts >= s.cfg.MaxAttempts }

// replaceReason is the sweep_error recorded while a replacement is
// retried: the node's refusal, or "not mined" for a stuck transaction.
func replaceReason(live *store.SweepTx) string {
	if live.LastError != "" {
		return live.LastError
	}
	return ReasonNotMined
}
