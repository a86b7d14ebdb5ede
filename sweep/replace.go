package sweep

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
)

// replacement prices the replacement of the stuck transaction live (same
// nonce, bumped fee), or says why none may be made:
//
//   - ReasonReplacementCap when capped (its MaxAttempts replacements are
//     used);
//   - ReasonFeeCeiling when MaxFeePerGas holds the next price below the bump
//     nodes require (go-ethereum refuses a replacement that does not raise
//     both cap and tip by 10%, as "replacement transaction underpriced").
//
// Either stop raises the operator alert (stopReplacing). Every replacement
// the sweeper makes is priced here — fundings, native and token sweeps from
// deposit addresses, the sweep wallet's token calls, top-ups, drains of
// retired keys — so none is signed, stored and broadcast that a node
// refuses as underpriced.
func (s *Sweeper) replacement(ctx context.Context, p *pass, live *store.SweepTx, capped bool) (f fee, stop string) {
	if capped {
		s.stopReplacing(ctx, live, ReasonReplacementCap)
		return fee{}, ReasonReplacementCap
	}
	f = s.bumped(p, feeOf(*live))
	if !replaceable(feeOf(*live), f) {
		s.stopReplacing(ctx, live, ReasonFeeCeiling)
		return fee{}, ReasonFeeCeiling
	}
	return f, ""
}

// replaceFee is replacement for a transaction of an invoice's sweep (or an
// outbound's send), whose replacements are capped by its attempts
// (capped: used up). When ok is false no replacement is made and o is the
// outcome: FAILED with the transaction's last error at the cap; retried
// (an attempt) with ReasonFeeCeiling, the sweep status becoming status, at
// the ceiling.
func (s *Sweeper) replaceFee(ctx context.Context, p *pass, capped bool, live *store.SweepTx, status string) (f fee, o outcome, ok bool) {
	f, stop := s.replacement(ctx, p, live, capped)
	switch stop {
	case ReasonReplacementCap:
		return fee{}, failWith(replaceReason(live)), false
	case ReasonFeeCeiling:
		return fee{}, retryWith(status, ReasonFeeCeiling), false
	}
	return f, outcome{}, true
}

// replaceStuck replaces an invoice's stuck transaction live with the same
// call at a bumped fee, signed by sign, if it may be (replaceFee).
func (s *Sweeper) replaceStuck(ctx context.Context, p *pass, capped bool, live *store.SweepTx, sign signFunc, g *invoiceGuard) (outcome, error) {
	f, o, ok := s.replaceFee(ctx, p, capped, live, g.status)
	if !ok {
		return o, nil
	}
	return s.resend(ctx, p, live, f, sign, g)
}

// resend signs, stores and broadcasts the replacement of an invoice's
// transaction live (resign). The invoice is retried (an attempt) with
// live's reason unless the node's answer fails it.
func (s *Sweeper) resend(ctx context.Context, p *pass, live *store.SweepTx, f fee, sign signFunc, g *invoiceGuard) (outcome, error) {
	rec, err := s.resign(ctx, p, live, f, sign, g)
	if err != nil {
		return outcome{}, err
	}
	o, err := s.afterFirstBroadcast(ctx, p, &rec, g.status)
	if err == nil && o.fail == "" {
		o = retryWith(g.status, replaceReason(live))
	}
	return o, err
}

// resign signs and stores the replacement of live: the same call
// (recipient, value, data, gas limit, nonce) at fee f, live becoming
// REPLACED in the same database transaction; g, when set, is the invoice
// check.
func (s *Sweeper) resign(ctx context.Context, p *pass, live *store.SweepTx, f fee, sign signFunc, g *invoiceGuard) (store.SweepTx, error) {
	var tx types.Transaction
	if err := tx.UnmarshalBinary(live.RawTx); err != nil {
		return store.SweepTx{}, fmt.Errorf("decode stored tx %s: %w", live.TxHash.Hex(), err)
	}
	rec, err := s.signAndStore(ctx, p, spec{
		kind: live.Kind, invoiceID: live.InvoiceID, outboundID: live.OutboundID, from: live.From, to: live.To, value: live.ValueWei.Big(),
		data: tx.Data(), gas: live.GasLimit, fee: f, nonce: live.Nonce, sign: s.retiredSigner(live.From, sign),
		replaces: live, invoice: g,
	})
	if err == nil {
		s.m.replaced.WithLabelValues(rec.Kind).Inc()
	}
	return rec, err
}

// exhausted reports whether the sweep used its MaxAttempts retries.
func (s *Sweeper) exhausted(inv store.Invoice) bool { return inv.SweepAttempts >= s.cfg.MaxAttempts }

// replacementCapped reports whether a nonce's transactions (an original
// and its replacements, every status) used the replacement cap: for
// transactions of no invoice (top-ups, drains), which have no attempt
// count of their own.
func (s *Sweeper) replacementCapped(txs []store.SweepTx) bool {
	return len(txs)-1 >= s.cfg.MaxAttempts
}

// replaceReason is the sweep_error recorded while a replacement is
// retried: the node's refusal, or "not mined" for a stuck transaction.
func replaceReason(live *store.SweepTx) string {
	if live.LastError != "" {
		return live.LastError
	}
	return ReasonNotMined
}

// stopReplacing raises the operator alert for a stuck transaction the
// sweeper no longer re-prices (reason: ReasonReplacementCap or
// ReasonFeeCeiling): an error log and a metric, once per transaction and
// reason in this process. WalletStatus derives the same alert from the
// store, so every replica shows it.
func (s *Sweeper) stopReplacing(ctx context.Context, t *store.SweepTx, reason string) {
	key := t.TxHash.Hex() + "/" + reason
	if _, seen := s.alerted.LoadOrStore(key, true); seen {
		return
	}
	s.m.stopped.WithLabelValues(t.Kind, reason).Inc()
	s.log.ErrorContext(ctx, "sweep: stuck transaction no longer re-priced; an operator must look (nonce gap? node dropping it?)",
		slog.String("reason", reason), slog.String("kind", t.Kind), slog.String("tx_hash", t.TxHash.Hex()),
		slog.String("from", t.From.Hex()), slog.Uint64("nonce", t.Nonce), slog.String("max_fee_wei", t.MaxFeeWei.String()),
		slog.Int("max_attempts", s.cfg.MaxAttempts), slog.String("max_fee_per_gas", s.cfg.MaxFeePerGas.String()))
}

// signFunc signs a transaction for one account.
type signFunc func(ctx context.Context, tx *types.Transaction) (*types.Transaction, error)

// retiredSigner is the signer of a replacement of a transaction sent from
// from: the retired key's own when from is a key rotated out while the
// transaction was in flight (the replacement must come from the same
// account and nonce), sign otherwise.
func (s *Sweeper) retiredSigner(from common.Address, sign signFunc) signFunc {
	for _, r := range s.keys.Retired {
		if r.Key != nil && r.Key.Address() == from {
			key := r.Key
			return func(ctx context.Context, tx *types.Transaction) (*types.Transaction, error) {
				return key.SignTx(ctx, tx, s.signer)
			}
		}
	}
	return sign
}
