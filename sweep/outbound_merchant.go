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
// (its payment request: exactly the amount to the destination): the first
// indexed transfer of exactly that asset and amount to the destination,
// from any address, in a block after the request was made, and not
// already taken by another outbound (the database's unique index decides),
// is its payment; it is confirmed with the configured confirmations, and
// forgotten again if a reorg removes it before.
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
	if head.Number < block || head.Number-block < s.cfg.Confirmations {
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

// matchMerchantPayment looks for the merchant's transfer and takes the
// first one no other outbound has.
func (s *Sweeper) matchMerchantPayment(ctx context.Context, p *pass, o store.Outbound, head uint64) (obOutcome, error) {
	trs, err := s.st.ListInboundTransfers(ctx, []common.Address{*o.Destination}, o.CreatedBlock+1, head)
	if err != nil {
		return obOutcome{}, err
	}
	for _, tr := range trs {
		if !store.SameToken(tr.Token, o.TokenAddress) || tr.Amount.Cmp(o.Amount) != 0 {
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
	if errors.Is(err, store.ErrConflict) {
		return false, nil // the transfer settles another outbound
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
