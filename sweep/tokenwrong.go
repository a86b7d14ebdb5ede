package sweep

import (
	"context"
	"log/slog"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
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
	// Wrong-asset tokens first: a fund-path one needs the deposit's nonce
	// 0, and the native sweep after it then takes that funding's dust too.
	if w, done, err := s.sweepWrongTokens(ctx, p, inv); err != nil || !done {
		return w, err
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

// txsTo keeps the transactions sent to a token contract (its PERMIT and
// PULL calls: one invoice may have those of several tokens).
func txsTo(txs []store.SweepTx, token common.Address) []store.SweepTx {
	var out []store.SweepTx
	for _, tx := range txs {
		if tx.To == token {
			out = append(out, tx)
		}
	}
	return out
}

// wrongTokens returns the configured tokens settlement recorded as
// wrong-asset payments to inv (another token than its own), in the order
// first paid.
func (s *Sweeper) wrongTokens(ctx context.Context, inv store.Invoice) ([]common.Address, error) {
	pays, err := s.st.ListPaymentsByInvoice(ctx, inv.ID)
	if err != nil {
		return nil, err
	}
	own := invoiceToken(inv)
	var out []common.Address
	seen := map[common.Address]bool{}
	for _, pay := range pays {
		if !pay.WrongAsset || pay.Token == nil || own != nil && *pay.Token == *own || seen[*pay.Token] {
			continue
		}
		seen[*pay.Token] = true
		out = append(out, *pay.Token)
	}
	return out, nil
}

// sweepWrongTokens moves each token recorded as a wrong-asset payment to
// inv (a token paid to a native invoice, another token paid to a token
// invoice) to the merchant, once the invoice's own sweep has its
// confirmations: by the token's permit path (the deposit key signs a
// permit, the sweep wallet sends permit and transferFrom), one token at a
// time, with the same stored, crash-safe transactions as a token invoice's
// sweep (one live PULL per invoice and token, migration 0065). A token on
// the fund path, one whose permit does not simulate, or one whose transfer
// fails stays at the deposit address, flagged needs_attention by
// settlement, for the operator. done reports that nothing (more) is to be
// done; otherwise o is the invoice's outcome for this pass.
func (s *Sweeper) sweepWrongTokens(ctx context.Context, p *pass, inv store.Invoice) (o outcome, done bool, err error) {
	tokens, err := s.wrongTokens(ctx, inv)
	if err != nil || len(tokens) == 0 {
		return outcome{}, err == nil, err
	}
	if s.keys.Wallet == nil {
		s.log.WarnContext(ctx, "sweep: wrong-asset token left at the deposit address: no sweep wallet", slog.Int64("invoice_id", inv.ID))
		return outcome{}, true, nil
	}
	txs, err := s.st.ListSweepTxsByInvoice(ctx, inv.ID)
	if err != nil {
		return outcome{}, false, err
	}
	seen := fingerprintOf(txs)
	for _, token := range tokens {
		mine := txsTo(txs, token)
		t := tokenSweep{
			token: token, seen: seen, wrong: true,
			permits: groupSlots(mine, store.SweepTxPermit),
			pulls:   groupSlots(mine, store.SweepTxPull),
		}
		if fundable(txs, token) {
			t.fund, t.sweeps = groupSlots(txs, store.SweepTxFunding), groupSlots(mine, store.SweepTxSweep)
		}
		path := TokenPathPermit
		switch {
		case len(t.fund)+len(t.sweeps) > 0:
			if liveSlot(t.sweeps) == nil && liveSlot(t.fund) == nil {
				continue // tried and given up: the token stays, flagged by settlement
			}
			path = TokenPathFund
		case len(t.permits)+len(t.pulls) > 0:
			if liveSlot(t.pulls) == nil && liveSlot(t.permits) == nil {
				continue
			}
		default:
			if path, err = s.tokenPath(ctx, p, token); err != nil {
				return outcome{}, false, err
			}
			if path == TokenPathFund && !fundable(txs, token) {
				s.log.WarnContext(ctx, "sweep: wrong-asset token on the fund path left at the deposit address (its nonce 0 is taken)",
					slog.Int64("invoice_id", inv.ID), slog.String("token", token.Hex()))
				continue
			}
		}
		var o outcome
		if path == TokenPathFund {
			o, err = s.advanceFund(ctx, p, inv, &t)
		} else {
			o, err = s.advancePermit(ctx, p, inv, &t)
		}
		if err != nil {
			return outcome{}, false, err
		}
		switch {
		case o.swept != nil:
			continue
		case o.fail != "":
			s.log.WarnContext(ctx, "sweep: wrong-asset token left at the deposit address",
				slog.Int64("invoice_id", inv.ID), slog.String("token", token.Hex()), slog.String("reason", o.fail))
			continue
		}
		return o, false, nil
	}
	return outcome{}, true, nil
}

// fundable reports that the deposit's transfer of token by the fund path
// can have nonce 0: every deposit transfer (SWEEP) and funding stored for
// the invoice is this token's, and the deposit sent no native sweep.
func fundable(txs []store.SweepTx, token common.Address) bool {
	for _, tx := range txs {
		switch tx.Kind {
		case store.SweepTxSweep:
			if tx.To != token {
				return false
			}
		case store.SweepTxNative:
			return false
		}
	}
	return true
}
