package sweep

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

// recheckFailed looks once per Sweeper at the top-ups recorded FAILED
// whose nonce no MINED transaction holds, and records MINED the one the
// node has a receipt of at or below the pass's block, with its ledger
// entries (syncSlot).
//
// Releases before v0.3.0 marked FAILED a stuck top-up's replacement, and
// the original with it, when the original was mined before the
// replacement reached the node (CHANGELOG, "A replaced top-up whose
// original was mined"): the ledger lacked the top-up, and the wallets'
// reconciliation differed by it. A database that ran them keeps those
// records; this repairs them. It runs under the gas funder's lock, so
// that no funder works on those nonces meanwhile. A pass that cannot
// take the lock, or sees a receipt above its block, leaves it to the
// next pass.
func (s *Sweeper) recheckFailed(ctx context.Context, p *pass) error {
	senders := s.topUpSenders()
	if s.failedRechecked.Load() || len(senders) == 0 {
		return nil
	}
	lock, err := s.st.TryLock(ctx, funderLock)
	if errors.Is(err, store.ErrLocked) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = lock.Unlock() }()
	done := true
	for _, from := range senders {
		failed, err := s.st.ListFailedSweepTxs(ctx, from, store.SweepTxTopUp)
		if err != nil {
			return err
		}
		var nonces []uint64
		for _, t := range failed {
			nonces = append(nonces, t.Nonce)
		}
		for _, nonce := range slices.Compact(nonces) {
			later, err := s.recheckNonce(ctx, p, from, nonce)
			if err != nil {
				return err
			}
			done = done && !later
		}
	}
	s.failedRechecked.Store(done)
	return nil
}

// recheckNonce records MINED the transaction of from's top-up nonce that
// the node has a receipt of, unless one of them is MINED already. later:
// the receipt is above the pass's block (a pass after it decides).
func (s *Sweeper) recheckNonce(ctx context.Context, p *pass, from common.Address, nonce uint64) (later bool, err error) {
	all, err := s.st.ListSweepTxsByNonce(ctx, from, store.SweepTxTopUp, nonce)
	if err != nil {
		return false, err
	}
	if slices.ContainsFunc(all, func(t store.SweepTx) bool { return t.Status == store.SweepTxMined }) {
		return false, nil
	}
	sl := &slot{kind: store.SweepTxTopUp, from: from, nonce: nonce, txs: all}
	if err := s.findMined(ctx, p, sl, true); err != nil {
		return false, err
	}
	if sl.mined == nil {
		return sl.minedAbove, nil
	}
	if err := s.syncSlot(ctx, p, sl); err != nil {
		return false, err
	}
	s.log.WarnContext(ctx, "sweep: a top-up recorded FAILED was mined: recorded MINED, and the ledger now holds it",
		slog.String("from", from.Hex()), slog.Uint64("nonce", nonce), slog.String("tx_hash", sl.mined.TxHash.Hex()),
		slog.Uint64("block", sl.receipt.BlockNumber.Uint64()))
	return false, nil
}

// topUpSenders are the addresses that send top-ups: the gas funder and
// the retired keys being drained.
func (s *Sweeper) topUpSenders() []common.Address {
	var out []common.Address
	if s.keys.Funder != nil {
		out = append(out, s.keys.Funder.Address())
	}
	for _, r := range s.keys.Retired {
		out = append(out, r.Key.Address())
	}
	return out
}
