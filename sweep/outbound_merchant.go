package sweep

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
)

// advanceMerchantPaid follows a refund or payout the merchant pays itself
// (its payment request: exactly the amount to the destination). Its
// payment is one transfer of exactly that asset and amount to the
// destination, in a block after the request was made, that the service
// did not send and that no other outbound has (the database enforces
// both), and that the merchant vouched for: sent from one of its paying
// wallets (payout settings), or the transaction it named
// (SubmittedTxHash): Outbound.PaidWith and Store.SentByService. A transfer from anyone else is not taken: another
// merchant's customer, or the payee, may send the same amount to the same
// address (docs/refunds.md, "Which transfer pays a merchant-paid
// request"). The outbound is confirmed with the configured confirmations
// (under finality "tag", at or below the recorded finalized block), and
// forgotten again if a reorg removes its transfer before.
func (s *Sweeper) advanceMerchantPaid(ctx context.Context, p *pass, o store.Outbound) (obOutcome, error) {
	head, err := s.st.LatestBlock(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return obOutcome{}, nil
	}
	if err != nil {
		return obOutcome{}, err
	}
	if o.Status == store.OutboundAwaitingPayment {
		return s.matchMerchantPayment(ctx, p, o, head.Number)
	}
	if o.TxHash == nil || o.BlockNumber == nil {
		return obOutcome{status: store.OutboundAwaitingPayment, clearTx: true}, nil
	}
	block, present, err := s.indexedAt(ctx, o)
	if err != nil {
		return obOutcome{}, err
	}
	if !present {
		s.log.WarnContext(ctx, "sweep: a merchant-paid transfer was reorged out; waiting for it again",
			slog.Int64("outbound_id", o.ID), slog.String("tx_hash", o.TxHash.Hex()))
		return obOutcome{status: store.OutboundAwaitingPayment, clearTx: true}, nil
	}
	if final, ok := s.finalIndexed(p, head.Number); !ok || block > final {
		if block != *o.BlockNumber {
			return obOutcome{block: &block}, nil
		}
		return obOutcome{}, nil
	}
	b, err := s.st.GetBlock(ctx, block)
	if err != nil {
		return obOutcome{}, err
	}
	kind := store.LedgerPayout
	if o.Kind == store.OutboundRefund {
		kind = store.LedgerRefund
	}
	now := p.now
	entry := store.LedgerEntry{Kind: kind, InvoiceID: o.InvoiceID, OutboundID: &o.ID, Token: o.TokenAddress,
		From: o.FromAddress, To: o.Destination, Amount: o.Amount, TxHash: o.TxHash, LogIndex: o.LogIndex,
		BlockNumber: &block, At: time.Unix(int64(b.Timestamp), 0).UTC(), RecordedAt: now}
	return obOutcome{status: store.OutboundConfirmed, block: &block, entries: []store.LedgerEntry{entry}}, nil
}

// matchMerchantPayment looks for the merchant's transfer: the named
// transaction when there is one, else the first transfer from one of the
// merchant's paying wallets that no other outbound has.
func (s *Sweeper) matchMerchantPayment(ctx context.Context, p *pass, o store.Outbound, head uint64) (obOutcome, error) {
	if o.SubmittedTxHash != nil {
		return s.matchSubmitted(ctx, p, o)
	}
	policy, err := s.st.GetPayoutPolicy(ctx, o.MerchantID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && len(policy.PayingWallets) == 0) {
		return obOutcome{}, nil // it waits for the merchant to name its transaction
	}
	if err != nil {
		return obOutcome{}, err
	}
	trs, err := s.st.ListInboundTransfers(ctx, []common.Address{*o.Destination}, o.CreatedBlock+1, head)
	if err != nil {
		return obOutcome{}, err
	}
	for _, tr := range trs {
		if o.PaidWith(tr) != nil || !policy.Pays(tr.From) {
			continue
		}
		if svc, err := s.st.SentByService(ctx, tr.TxHash, tr.From); err != nil || svc {
			if err != nil {
				return obOutcome{}, err
			}
			continue
		}
		taken, err := s.takeTransfer(ctx, p, o.ID, tr)
		if err != nil {
			return obOutcome{}, err
		}
		if taken {
			return obOutcome{}, nil
		}
	}
	return obOutcome{}, nil
}

// matchSubmitted checks the transaction the merchant named once it is
// indexed: it is taken when one of its transfers pays the request;
// otherwise the name is dropped, with the reason in Error, and the
// outbound waits for another.
func (s *Sweeper) matchSubmitted(ctx context.Context, p *pass, o store.Outbound) (obOutcome, error) {
	trs, indexed, err := store.TransfersOf(ctx, s.st, *o.SubmittedTxHash)
	if err != nil || !indexed {
		return obOutcome{}, err
	}
	why := store.ErrNotThisRequest
	for _, tr := range trs {
		if why = o.PaidWith(tr); why != nil {
			continue
		}
		svc, err := s.st.SentByService(ctx, tr.TxHash, tr.From)
		if err != nil {
			return obOutcome{}, err
		}
		if svc {
			why = store.ErrSentByService
			continue
		}
		taken, err := s.takeTransfer(ctx, p, o.ID, tr)
		if err != nil {
			return obOutcome{}, err
		}
		if taken {
			return obOutcome{}, nil
		}
		why = store.ErrTransferTaken
	}
	text := "the transaction " + o.SubmittedTxHash.Hex() + " named as its payment does not pay it: " + why.Error()
	s.log.WarnContext(ctx, "sweep: a merchant-paid outbound's named transaction does not pay it",
		slog.Int64("outbound_id", o.ID), slog.String("tx_hash", o.SubmittedTxHash.Hex()), slog.String("reason", why.Error()))
	return obOutcome{errText: &text, dropSubmitted: o.SubmittedTxHash}, nil
}

// takeTransfer records tr as the outbound's payment (BROADCAST, with its
// event); false when another outbound already has it.
func (s *Sweeper) takeTransfer(ctx context.Context, p *pass, id int64, tr store.InboundTransfer) (bool, error) {
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		o, err := tx.GetOutboundForUpdate(ctx, id)
		if err != nil || o.Status != store.OutboundAwaitingPayment {
			return err
		}
		h, from, block, now := tr.TxHash, tr.From, tr.BlockNumber, p.now
		o.TxHash, o.LogIndex, o.BlockNumber, o.FromAddress = &h, tr.LogIndex, &block, &from
		o.Status, o.BroadcastAt, o.UpdatedAt = store.OutboundBroadcast, &now, now
		if err := tx.UpdateOutbound(ctx, &o); err != nil {
			return err
		}
		ev, err := api.OutboundEvent(store.OutboundEventType(o.Kind, o.Status), o, now)
		if err != nil {
			return err
		}
		return tx.InsertEvent(ctx, &ev)
	})
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInvariant) {
		return false, nil // the transfer settles another outbound, or is the service's (the database refuses)
	}
	if err == nil {
		s.log.InfoContext(ctx, "sweep: merchant-paid outbound seen on chain", slog.Int64("outbound_id", id),
			slog.String("tx_hash", tr.TxHash.Hex()), slog.Uint64("block", tr.BlockNumber))
	}
	return err == nil, err
}

// indexedAt reports whether the outbound's transfer is still indexed, and
// in which block.
func (s *Sweeper) indexedAt(ctx context.Context, o store.Outbound) (uint64, bool, error) {
	if o.LogIndex == nil {
		tx, err := s.st.GetTx(ctx, *o.TxHash)
		if errors.Is(err, store.ErrNotFound) {
			return 0, false, nil
		}
		return tx.BlockNumber, err == nil, err
	}
	trs, err := s.st.ListTokenTransfersByTx(ctx, *o.TxHash)
	if err != nil {
		return 0, false, err
	}
	for _, tr := range trs {
		if tr.LogIndex == *o.LogIndex && tr.To == *o.Destination {
			return tr.BlockNumber, true, nil
		}
	}
	return 0, false, nil
}
