package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

// errChainGuard wraps the chain guard's refusal: nothing was sent.
var errChainGuard = errors.New("sweep: chain guard refused the node; nothing sent")

// ErrNodeBehind: the node's head is below one a pass of this sweeper
// already worked against. Such a node is lagging, resyncing or another
// chain: nothing is sent to it and nothing it lacks (a receipt, a
// balance) is acted on until it catches up.
var ErrNodeBehind = errors.New("sweep: the node is behind")

// checkChain asks Config.ChainGuard, if any, whether the node still serves
// the chain the stored transactions were signed for.
func (s *Sweeper) checkChain(ctx context.Context) error {
	g := s.cfg.ChainGuard
	if g == nil {
		return nil
	}
	if err := g.CheckChain(ctx); err != nil {
		s.m.chainGuard.Set(1)
		return fmt.Errorf("%w: %w", errChainGuard, err)
	}
	s.m.chainGuard.Set(0)
	return nil
}

// replacementCapped reports whether a nonce's transactions (an original
// and its replacements, every status) used the replacement cap.
func (s *Sweeper) replacementCapped(txs []store.SweepTx) bool {
	return len(txs)-1 >= s.cfg.MaxAttempts
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

// stuckAlerts lists the unmined transactions from addr that the sweeper
// stopped re-pricing: at the replacement cap, or at the fee ceiling and
// due for a replacement.
func (s *Sweeper) stuckAlerts(ctx context.Context, p *pass, addr common.Address) ([]string, error) {
	unmined, err := s.st.ListUnminedSweepTxs(ctx, addr)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range unmined {
		hist, err := s.st.ListSweepTxsByNonce(ctx, t.From, t.Kind, t.Nonce)
		if err != nil {
			return nil, err
		}
		due := t.SentBlock != nil && p.number >= *t.SentBlock && p.number-*t.SentBlock >= s.cfg.ReplaceAfterBlocks ||
			t.LastError == ReasonUnderpriced || t.LastError == ReasonReplacementUnderpriced
		switch {
		case s.replacementCapped(hist):
			out = append(out, fmt.Sprintf("%s %s (nonce %d from %s) not mined after %d replacements: %s, replacing stopped",
				t.Kind, t.TxHash.Hex(), t.Nonce, t.From.Hex(), len(hist)-1, ReasonReplacementCap))
		case due && !replaceable(feeOf(t), s.bumped(p, feeOf(t))):
			out = append(out, fmt.Sprintf("%s %s (nonce %d from %s) not mined at the fee ceiling %s wei: %s, replacing stopped",
				t.Kind, t.TxHash.Hex(), t.Nonce, t.From.Hex(), s.cfg.MaxFeePerGas.String(), ReasonFeeCeiling))
		}
	}
	return out, nil
}

// serviceAddress reports whether addr is one the service derives or holds:
// a deposit address (archived invoices included), the sweep wallet or the
// gas funder. Funds swept there would be credited to nothing.
func (s *Sweeper) serviceAddress(ctx context.Context, addr common.Address) (bool, error) {
	for _, k := range []AccountSigner{s.keys.Wallet, s.keys.Funder} {
		if k != nil && k.Address() == addr {
			return true, nil
		}
	}
	return s.st.IsDepositAddress(ctx, addr)
}
