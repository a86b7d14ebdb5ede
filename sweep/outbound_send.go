package sweep

import (
	"context"
	"errors"
	"log/slog"
	"math/big"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
)

// advanceServicePaid moves a refund or payout the service sends: it picks
// where it leaves from (once), then runs the funded send — the sweep
// wallet funds exactly the gas of the send, the sender signs it once the
// funding's receipt is at or below the pass's head, a stuck send is
// replaced under the one replacement rule — and confirms it.
func (s *Sweeper) advanceServicePaid(ctx context.Context, p *pass, o store.Outbound) (obOutcome, error) {
	if o.Destination == nil {
		return obOutcome{status: store.OutboundFailed, errText: ptrTo("no destination")}, nil
	}
	txs, err := s.st.ListSweepTxsByOutbound(ctx, o.ID)
	if err != nil {
		return obOutcome{}, err
	}
	seen := fingerprintOf(txs)
	sends := groupSlots(txs, store.SweepTxOutbound)
	fund, send := groupSlots(txs, store.SweepTxFunding), liveSlot(sends)
	for _, sl := range append([]*slot{send}, fund...) {
		if sl != nil && sl.live() != nil {
			if err := s.refresh(ctx, p, sl); err != nil {
				return obOutcome{}, err
			}
		}
	}
	source := o.Source
	if source == "" {
		if source, err = s.chooseSource(ctx, p, o); err != nil || source == "" {
			return obOutcome{}, err // "": decided at a later pass
		}
	}
	acct, inv, reason, err := s.outboundAccount(ctx, o, source)
	if err != nil {
		return obOutcome{}, err
	}
	if reason != "" {
		return s.outboundOutcome(p, failWith(reason), len(sends) > 0), nil
	}
	var invSeen fingerprint
	if source == store.SourceDeposit {
		invTxs, err := s.st.ListSweepTxsByInvoice(ctx, inv.ID)
		if err != nil {
			return obOutcome{}, err
		}
		invSeen = fingerprintOf(invTxs)
	}
	// The check every transaction of this outbound is signed under: its
	// row (and, from a deposit address, its invoice's, so that the sweep
	// and the refund never both sign for the address).
	guard := func(string) *invoiceGuard {
		g := &invoiceGuard{outbound: &outboundGuard{id: o.ID, seen: seen}}
		if source == store.SourceDeposit {
			g.id, g.seen = inv.ID, invSeen
		}
		return g
	}
	// Before its send, a stuck funding is replaced at most MaxAttempts
	// times (then the outbound fails: nothing was sent). Once sent, the
	// send's replacements are capped per nonce like a top-up's, and at the
	// cap it is re-broadcast as it is, never failed: it may still be mined.
	acct.capped, acct.keepAtCap = o.Attempts >= s.cfg.MaxAttempts, true
	if send != nil {
		hist, err := s.st.ListSweepTxsByNonce(ctx, send.from, store.SweepTxOutbound, send.nonce)
		if err != nil {
			return obOutcome{}, err
		}
		acct.capped = s.replacementCapped(hist)
	}
	out, err := s.advanceFunded(ctx, p, &fundedSend{
		acct: acct, fund: fund, send: send, guard: guard,
		prepare: func(ctx context.Context, p *pass, funded *big.Int) (sendPlan, string, error) {
			return s.prepareOutbound(ctx, p, o, acct, funded, guard)
		},
		finish: func(ctx context.Context, p *pass) (outcome, error) { return s.confirmOutbound(p, o, send) },
	})
	if err != nil {
		return obOutcome{}, err
	}
	return s.outboundOutcome(p, out, len(sends) > 0 || out.status == store.SweepSent), nil
}

// outboundOutcome maps the funded send's outcome to the outbound's. Before
// its send is signed, a failure to fund (the sweep wallet cannot pay) or a
// sender short of the asset makes it wait; any other failure fails it,
// nothing having been sent. After, only what proves the send can never
// move the money (sendFinal: its nonce used by another transaction, a
// revert, a token transfer without its Transfer event) fails it; any other
// failure leaves it BROADCAST, tended again after RetryBackoff.
func (s *Sweeper) outboundOutcome(p *pass, out outcome, sent bool) obOutcome {
	r := obOutcome{attempt: out.attempt, retryAt: out.retryAt, errText: out.sweepErr}
	switch {
	case out.swept != nil:
		h, b := out.swept.tx.TxHash, *out.swept.tx.BlockNumber
		r.status, r.txHash, r.block, r.errText = store.OutboundConfirmed, &h, &b, new(string)
	case out.fail != "" && !sent && slices.Contains([]string{ReasonSenderLow, ReasonInsufficientGas, ReasonNoPayoutKey,
		ReasonNoWallet, ReasonPayoutKeyMismatch}, out.fail):
		retry := p.now.Add(s.cfg.RetryBackoff)
		r.retryAt, r.errText, r.attempt = &retry, ptrTo(out.fail), false
	case out.fail != "" && sent && !slices.Contains(sendFinal, out.fail):
		// A broadcast send may still be mined whatever went wrong around
		// it (its replacement's funding or broadcast): it keeps being
		// tended. FAILED would free its amount for another refund or make
		// the merchant send it again: the payer could be paid twice.
		retry := p.now.Add(s.cfg.RetryBackoff)
		r.retryAt, r.errText, r.attempt = &retry, ptrTo(out.fail), false
	case out.fail != "":
		r.status, r.errText = store.OutboundFailed, ptrTo(out.fail)
	}
	return r
}

// sendFinal are the failures that prove a broadcast send can never move
// the money: mined and reverted, mined without its Transfer event, or its
// nonce taken by another transaction.
var sendFinal = []string{ReasonReverted, ReasonTokenTransferFailed, ReasonNonceTooLow}

func ptrTo[T any](v T) *T { return &v }

// chooseSource decides, once, where a service-paid outbound leaves from:
// a refund straight from its invoice's deposit address while the money is
// still there and the invoice's sweep has not started (nothing signed for
// it yet, no other refund leaving from there), else the merchant's payout
// wallet. The choice is written under the invoice's row lock, which the
// sweep's signing takes too: from then on the sweep waits for the refund.
//
// A refund's choice waits ("" and no error) until the pass's head has
// reached every payment of its invoice on this chain: below one, the
// deposit's balance lacks that money, and the refund would go to the
// payout wallet for good (a wrong-network refund created as its payment
// was recorded, read through a node a block behind the indexer's).
func (s *Sweeper) chooseSource(ctx context.Context, p *pass, o store.Outbound) (string, error) {
	source := store.SourcePayoutWallet
	if o.Kind == store.OutboundRefund && o.InvoiceID != nil {
		ps, err := s.st.ListPaymentsByInvoice(ctx, *o.InvoiceID)
		if err != nil {
			return "", err
		}
		for _, pay := range ps {
			if pay.ChainID == o.ChainID && pay.BlockNumber > p.number {
				return "", nil
			}
		}
		ok, err := s.depositEligible(ctx, p, o)
		if err != nil {
			return "", err
		}
		if ok {
			source = store.SourceDeposit
		}
	}
	var chosen string
	err := inTx(ctx, s.st, func(tx store.Tx) error {
		choice := source
		if choice == store.SourceDeposit {
			if _, err := tx.GetInvoiceForUpdate(ctx, *o.InvoiceID); err != nil {
				return err
			}
			txs, err := tx.ListSweepTxsByInvoice(ctx, *o.InvoiceID)
			if err != nil {
				return err
			}
			if len(ownTxs(txs)) > 0 {
				choice = store.SourcePayoutWallet // its sweep started meanwhile
			} else if err := s.depositHeld(ctx, tx, *o.InvoiceID); errors.Is(err, errDepositHeld) {
				choice = store.SourcePayoutWallet // another refund leaves from it
			} else if err != nil {
				return err
			}
		}
		cur, err := tx.GetOutboundForUpdate(ctx, o.ID)
		if err != nil {
			return err
		}
		if cur.Source != "" {
			chosen = cur.Source
			return nil
		}
		cur.Source, cur.UpdatedAt = choice, p.now
		chosen = choice
		return tx.UpdateOutbound(ctx, &cur)
	})
	if err == nil {
		s.log.InfoContext(ctx, "sweep: outbound source", slog.Int64("outbound_id", o.ID), slog.String("source", chosen))
	}
	return chosen, err
}

// depositEligible reports whether a refund can leave from its invoice's
// deposit address: the invoice is not settled, nothing was signed for its
// sweep, the address sent nothing but earlier refunds, its key is the
// wallet's, and it holds the amount (the gas is funded). On another chain
// than the invoice's (a wrong-network refund: the money arrived there) the
// invoice's state does not matter — nothing sweeps that address on this
// chain — but the rest does.
func (s *Sweeper) depositEligible(ctx context.Context, p *pass, o store.Outbound) (bool, error) {
	inv, err := s.st.GetInvoice(ctx, *o.InvoiceID)
	if err != nil {
		return false, err
	}
	if s.chainID == nil || o.ChainID != s.chainID.Uint64() || inv.ChainID == o.ChainID && inv.Status == store.StatusSettled {
		return false, nil
	}
	txs, err := s.st.ListSweepTxsByInvoice(ctx, inv.ID)
	if err != nil || len(ownTxs(txs)) > 0 {
		return false, err
	}
	if addr, err := s.keys.Deposits.Address(inv.DerivationIndex); err != nil || addr != inv.DepositAddress {
		return false, err
	}
	n, err := s.nonceAt(ctx, p, inv.DepositAddress)
	if err != nil || n != depositBaseOf(txs, inv.DepositAddress) {
		return false, err
	}
	held, err := s.assetAvailable(ctx, p, inv.DepositAddress, o.TokenAddress)
	if err != nil {
		return false, err
	}
	return held.Cmp(o.Amount.Big()) >= 0, nil
}

// outboundAccount is the funded account an outbound leaves from: the
// invoice's deposit address (inv is that invoice), or the merchant's
// payout wallet. A reason says why it cannot be used now.
func (s *Sweeper) outboundAccount(ctx context.Context, o store.Outbound, source string) (fundedAccount, store.Invoice, string, error) {
	if source == store.SourceDeposit {
		inv, err := s.st.GetInvoice(ctx, *o.InvoiceID)
		if err != nil {
			return fundedAccount{}, store.Invoice{}, "", err
		}
		acct := s.depositAccount(inv)
		acct.outboundID = &o.ID
		return acct, inv, "", nil
	}
	if s.keys.Payouts == nil {
		return fundedAccount{}, store.Invoice{}, ReasonNoPayoutKey, nil
	}
	addr, err := s.keys.Payouts.PayoutAddress(o.MerchantID)
	if err != nil {
		return fundedAccount{}, store.Invoice{}, "", err
	}
	if w, err := s.st.GetPayoutWallet(ctx, o.MerchantID); err == nil && w.Address != addr {
		// The configured key is not the wallet the merchant was shown.
		return fundedAccount{}, store.Invoice{}, ReasonPayoutKeyMismatch, nil
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fundedAccount{}, store.Invoice{}, "", err
	}
	id := o.MerchantID
	return fundedAccount{addr: addr, outboundID: &o.ID, sign: func(ctx context.Context, tx *types.Transaction) (*types.Transaction, error) {
		return s.keys.Payouts.SignPayoutTx(ctx, id, tx, s.signer)
	}}, store.Invoice{}, "", nil
}

// assetAvailable is what addr holds of an asset (token nil: the native
// coin) at the pass's head, less what its stored, unmined transactions
// commit of it.
func (s *Sweeper) assetAvailable(ctx context.Context, p *pass, addr common.Address, token *common.Address) (*big.Int, error) {
	if token == nil {
		return s.uncommittedBalance(ctx, p, addr)
	}
	bal, err := callUint(ctx, s.chain, *token, p.headNumber(), "balanceOf", addr)
	if err != nil {
		return nil, err
	}
	unmined, err := s.st.ListUnminedSweepTxs(ctx, addr)
	if err != nil {
		return nil, err
	}
	for _, t := range unmined {
		if t.To != *token || t.Kind != store.SweepTxOutbound {
			continue
		}
		if c, err := decodeTokenCall(t.RawTx); err == nil && c.method == "transfer" {
			bal.Sub(bal, c.value)
		}
	}
	if bal.Sign() < 0 {
		bal.SetInt64(0)
	}
	return bal, nil
}

// prepareOutbound readies an outbound's send for the funded send: its
// checks before anything is funded (the destination, what the sender
// holds), its gas limit (21,000 for the native coin; a token transfer's
// estimate + 20%), and how to sign it.
func (s *Sweeper) prepareOutbound(ctx context.Context, p *pass, o store.Outbound, acct fundedAccount, funded *big.Int, guard func(string) *invoiceGuard) (sendPlan, string, error) {
	dest := *o.Destination
	own, err := s.serviceAddress(ctx, dest)
	if err != nil {
		return sendPlan{}, "", err
	}
	if !own {
		_, err := s.st.GetServiceWallet(ctx, dest)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return sendPlan{}, "", err
		}
		own = err == nil
	}
	if own {
		return sendPlan{}, ReasonDestinationIsService, nil
	}
	amount := o.Amount.Big()
	held, err := s.assetAvailable(ctx, p, acct.addr, o.TokenAddress)
	if err != nil {
		return sendPlan{}, "", err
	}
	if held.Cmp(amount) < 0 {
		return sendPlan{}, ReasonSenderLow, nil
	}
	var (
		to   = dest
		data []byte
		gas  = uint64(transferGas)
		val  = amount
	)
	if o.TokenAddress == nil {
		code, err := s.chain.CodeAt(ctx, dest, p.headNumber())
		if err != nil {
			return sendPlan{}, "", err
		}
		if len(code) > 0 {
			return sendPlan{}, ReasonDestinationIsContract, nil
		}
	} else {
		to, data, val = *o.TokenAddress, packCall("transfer", dest, amount), new(big.Int)
		est, err := s.estimateTransfer(ctx, p, acct.addr, to, dest, amount)
		if err != nil {
			return sendPlan{}, "", err
		}
		if est == 0 {
			return sendPlan{}, ReasonTokenTransferFailed, nil
		}
		gas = withMargin(est)
	}
	return sendPlan{gas: gas, send: func(ctx context.Context, p *pass, f fee) (outcome, error) {
		// What the sender holds is checked again as the send is signed:
		// this pass's other sends from it count.
		cost := gasCost(gas, f.cap)
		if o.TokenAddress == nil {
			cost.Add(cost, amount)
		}
		ok, err := s.reserveFrom(ctx, p, acct.addr, cost)
		if err != nil {
			return outcome{}, err
		}
		if !ok {
			return retryWith(store.SweepFunding, ReasonSenderLow), nil
		}
		sp := spec{kind: store.SweepTxOutbound, invoiceID: acct.invoiceID, outboundID: &o.ID, from: acct.addr, to: to,
			value: val, data: data, gas: gas, fee: f, sign: acct.sign, invoice: guard(store.SweepSent)}
		if acct.invoiceID != nil {
			// From a deposit address: its next nonce, which the chain must
			// agree is the next one.
			n, err := s.nonceAt(ctx, p, acct.addr)
			if err != nil {
				return outcome{}, err
			}
			sp.nonce = n
		} else {
			if sp.nonce, err = s.pendingNonce(ctx, p, acct.addr); err != nil {
				return outcome{}, err
			}
			sp.reserve = true
		}
		rec, err := s.signAndStore(ctx, p, sp)
		if err != nil {
			return outcome{}, err
		}
		s.log.InfoContext(ctx, "sweep: outbound signed", slog.Int64("outbound_id", o.ID), slog.String("kind", o.Kind),
			slog.String("tx_hash", rec.TxHash.Hex()), slog.String("from", rec.From.Hex()), slog.String("to", dest.Hex()),
			slog.String("asset", o.Asset().String()), slog.String("amount", o.Amount.String()))
		return s.afterFirstBroadcast(ctx, p, &rec, store.SweepSent)
	}}, "", nil
}

// confirmOutbound finishes an outbound whose send is mined: it moved the
// money only if it succeeded (and, for a token, logged its Transfer to the
// destination); then it waits for the confirmations.
func (s *Sweeper) confirmOutbound(p *pass, o store.Outbound, sl *slot) (outcome, error) {
	r := sl.receipt
	if r.Status != types.ReceiptStatusSuccessful {
		return failWith(ReasonReverted), nil
	}
	if o.TokenAddress != nil {
		c, err := decodeTokenCall(sl.mined.RawTx)
		if err != nil {
			return outcome{}, err
		}
		if !hasTransferLog(r, *o.TokenAddress, sl.mined.From, c.to, c.value) {
			return failWith(ReasonTokenTransferFailed), nil
		}
	}
	if !s.final(p, r.BlockNumber.Uint64()) {
		return outcome{status: store.SweepSent, sweepErr: new(string)}, nil
	}
	return outcome{swept: &sweptResult{tx: *sl.mined}}, nil
}
