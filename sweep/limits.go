package sweep

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
)

// errChainGuard wraps the chain guard's refusal: nothing was sent.
var errChainGuard = errors.New("sweep: chain guard refused the node; nothing sent")

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
