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
	return o, s.dustAfterWrong(ctx, p, inv, len(t.natives) > 0, &o)
}

// dustAfterWrong sets a finished sweep's dust to what stays at the deposit
// address when more than the invoice's own sweep went through it: a
// wrong-asset native sweep (its unspent gas) or a wrong token's funding
// (its dust, which a native sweep after it takes along).
func (s *Sweeper) dustAfterWrong(ctx context.Context, p *pass, inv store.Invoice, native bool, o *outcome) error {
	if !native {
		txs, err := s.st.ListSweepTxsByInvoice(ctx, inv.ID)
		if err != nil || !wrongFunded(txs) {
			return err
		}
	}
	bal, err := s.chain.BalanceAt(ctx, inv.DepositAddress, p.headNumber())
	if err != nil {
		return err
	}
	o.swept.dust = amountOf(bal)
	return nil
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
			if !s.final(p, live.receipt.BlockNumber.Uint64()) {
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
			cur := live.live()
			f, stop := s.replacement(ctx, p, cur, s.exhausted(inv))
			switch stop {
			case ReasonReplacementCap:
				return outcome{}, true, nil // given up (alerted): the coin stays, flagged by settlement
			case ReasonFeeCeiling:
				return retryWith(store.SweepSent, ReasonFeeCeiling), false, nil
			}
			// The payer's coin pays its own gas: the higher fee comes out
			// of the value.
			value := new(big.Int).Sub(new(big.Int).Add(cur.ValueWei.Big(), gasCost(transferGas, cur.MaxFeeWei.Big())), gasCost(transferGas, f.cap))
			if value.Sign() <= 0 {
				return retryWith(store.SweepSent, ReasonNotMined), false, nil
			}
			rec, err := s.signAndStore(ctx, p, spec{
				kind: store.SweepTxNative, invoiceID: &inv.ID, from: cur.From, to: cur.To, value: value, fee: f,
				nonce: cur.Nonce, sign: s.depositSigner(inv), replaces: cur,
				invoice: t.guard(inv, store.SweepSent),
			})
			if err != nil {
				return outcome{}, false, err
			}
			s.m.replaced.WithLabelValues(rec.Kind).Inc()
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
		// Any native coin at a token-led invoice: paid as a wrong asset,
		// or a quoted asset of a fiat invoice that arrived after its sweep
		// was queued in a token. Only this chain's: money that arrived on
		// another chain is at the address there (a wrong-network payment,
		// refunded on its chain).
		wrong = wrong || pay.Token == nil && pay.ChainID == inv.ChainID
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
		invoice: t.guard(inv, store.SweepSent),
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

// ownTxs keeps the transactions of the invoice's own sweep (and of its
// wrong-asset native sweep): those of no wrong token.
func ownTxs(txs []store.SweepTx) []store.SweepTx {
	return wrongTokenTxs(txs, nil)
}

// wrongTokenTxs keeps the transactions of one wrong token's sweep (nil: of
// none). A refund's transactions from (or funding) the deposit address
// are no sweep's.
func wrongTokenTxs(txs []store.SweepTx, token *common.Address) []store.SweepTx {
	var out []store.SweepTx
	for _, tx := range txs {
		if tx.OutboundID != nil {
			continue
		}
		if (tx.WrongToken == nil) == (token == nil) && (token == nil || *tx.WrongToken == *token) {
			out = append(out, tx)
		}
	}
	return out
}

// wrongFunded reports a mined funding of a wrong token's transfer: the
// deposit address then holds that funding's dust too.
func wrongFunded(txs []store.SweepTx) bool {
	for _, tx := range txs {
		if tx.WrongToken != nil && tx.Kind == store.SweepTxFunding && tx.Status == store.SweepTxMined {
			return true
		}
	}
	return false
}

// depositNextNonce is the nonce the deposit address sends with next when
// only the sweep ever sent from it: one past the highest of its mined
// transactions (0 when none). The chain must agree before a wrong token's
// transfer is signed with it (prepareTokenTransfer checks).
func depositNextNonce(txs []store.SweepTx, deposit common.Address) uint64 {
	var next uint64
	for _, tx := range txs {
		if tx.From == deposit && tx.Status == store.SweepTxMined {
			next = max(next, tx.Nonce+1)
		}
	}
	return next
}

// wrongTokens returns the tokens paid to inv other than its own (as the
// sweep sees it, sweptAs): those settlement recorded as wrong-asset
// payments and, for a fiat invoice, its other quoted tokens that arrived,
// in the order first paid.
func (s *Sweeper) wrongTokens(ctx context.Context, inv store.Invoice) ([]common.Address, error) {
	pays, err := s.st.ListPaymentsByInvoice(ctx, inv.ID)
	if err != nil {
		return nil, err
	}
	own := invoiceToken(inv)
	var out []common.Address
	seen := map[common.Address]bool{}
	for _, pay := range pays {
		// Every token but the one swept first: a wrong asset, or another
		// quoted asset of a fiat invoice; on this chain only (see
		// sweepWrongNative).
		if pay.Token == nil || pay.ChainID != inv.ChainID || own != nil && *pay.Token == *own || seen[*pay.Token] {
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
// confirmations, one token at a time, by the token's path and with the
// same stored, crash-safe transactions as a token invoice's sweep, each
// marked with the token (WrongToken):
//   - permit: the deposit key signs a permit, the sweep wallet sends permit
//     and transferFrom (one live PULL per invoice and token, migration
//     0065);
//   - fund: the sweep wallet funds the gas, and after the funding's receipt
//     the deposit sends transfer with its next nonce (after its own sweep
//     and any wrong token before; one live SWEEP per deposit and token,
//     migration 0091).
//
// A token whose permit does not simulate, whose transfer fails, or whose
// deposit nonce is not the expected one (someone else sent from it) stays
// at the deposit address, flagged needs_attention by settlement, for the
// operator. done reports that nothing (more) is to be done; otherwise o is
// the invoice's outcome for this pass.
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
		mine := wrongTokenTxs(txs, &token)
		t := tokenSweep{
			token: token, seen: seen, wrong: true,
			permits: groupSlots(mine, store.SweepTxPermit),
			pulls:   groupSlots(mine, store.SweepTxPull),
			fund:    groupSlots(mine, store.SweepTxFunding),
			sweeps:  groupSlots(mine, store.SweepTxSweep),
			nonce:   depositNextNonce(txs, inv.DepositAddress),
		}
		if live := liveSlot(t.sweeps); live != nil {
			t.nonce = live.nonce
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
