package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
)

// The outbound engine: refunds and payouts the service pays are sent by the
// sweeper, with the sweep's machinery — transactions signed and stored
// before they are broadcast (a crash re-broadcasts, never signs twice), the
// chain guard before every broadcast, the fee ceiling and the one
// replacement rule, re-broadcast of the same bytes after a reorg, and the
// funded send: the sweep wallet funds exactly the gas of the send, which is
// signed once that funding's receipt is seen (funded.go). Merchant-paid ones
// are recognised on chain (outbound_merchant.go). docs/refunds.md.

// PayoutSigner signs for the merchants' payout wallets, one per merchant.
// *hdwallet.Wallet implements it (m/44'/60'/2'/0/<merchant id>); a table of
// HSM or KMS keys can too.
type PayoutSigner interface {
	PayoutAddress(merchantID int64) (common.Address, error)
	SignPayoutTx(ctx context.Context, merchantID int64, tx *types.Transaction, signer types.Signer) (*types.Transaction, error)
}

// Reasons an outbound waits or fails (its Error).
const (
	// ReasonSenderLow: the payout wallet (or deposit address) holds less
	// of the asset than the outbound sends, counting what its unmined
	// transactions commit. The outbound waits: fund the payout wallet.
	ReasonSenderLow = "payout wallet balance too low"
	// ReasonNoPayoutKey: no payout wallet key is configured for the
	// merchant; the outbound waits.
	ReasonNoPayoutKey = "no payout wallet key configured"
	// ReasonDestinationIsContract: the destination has code, and a native
	// transfer is a plain 21,000-gas send that a contract's receive logic
	// makes fail.
	ReasonDestinationIsContract = "destination is a contract"
	// ReasonDestinationIsService: the destination became an address of
	// this service.
	ReasonDestinationIsService = "destination belongs to this service"
	// ReasonPayoutKeyMismatch: the configured payout wallet key is not the
	// wallet recorded for the merchant (the one it was shown and funded);
	// the outbound waits for the configuration to be fixed.
	ReasonPayoutKeyMismatch = "payout wallet key mismatch"
)

// errDepositHeld: a refund is being sent from the invoice's deposit
// address; its sweep waits.
var errDepositHeld = errors.New("sweep: a refund is being sent from the deposit address")

// outboundLister finds an invoice's outbounds.
type outboundLister interface {
	ListOutbounds(ctx context.Context, f store.OutboundFilter) ([]store.Outbound, error)
}

// depositHeld returns errDepositHeld when a refund of the invoice leaves
// from its deposit address on this sweeper's chain and is not done: the
// sweep must not sign anything from (or for) that address meanwhile. (A
// refund leaving from the same address on another chain — a wrong-network
// refund — holds nothing here: each chain has its own nonces and funds.)
func (s *Sweeper) depositHeld(ctx context.Context, st outboundLister, invoiceID int64) error {
	os, err := st.ListOutbounds(ctx, store.OutboundFilter{InvoiceID: invoiceID, Kind: store.OutboundRefund,
		Statuses: []string{store.OutboundQueued, store.OutboundBroadcast}})
	if err != nil {
		return err
	}
	for _, o := range os {
		if s.chainID != nil && o.ChainID != s.chainID.Uint64() {
			continue
		}
		if o.Source == store.SourceDeposit {
			return errDepositHeld
		}
	}
	return nil
}

// depositBaseOf is the nonce an invoice's own sweep starts at: the number
// of refunds sent (mined) from its deposit address before it, 0 when none.
func depositBaseOf(txs []store.SweepTx, deposit common.Address) uint64 {
	var n uint64
	for _, t := range txs {
		if t.OutboundID != nil && t.Kind == store.SweepTxOutbound && t.From == deposit && t.Status == store.SweepTxMined {
			n++
		}
	}
	return n
}

// depositBase is depositBaseOf for an invoice, read from the store.
func (s *Sweeper) depositBase(ctx context.Context, inv store.Invoice) (uint64, error) {
	txs, err := s.st.ListSweepTxsByInvoice(ctx, inv.ID)
	if err != nil {
		return 0, err
	}
	return depositBaseOf(txs, inv.DepositAddress), nil
}

// outboundGuard is the check an outbound's transaction is signed under
// (signAndStore): the outbound's row is locked, its state must still be
// one the engine works on and its transactions those it saw; once the
// transaction is stored, a send makes the outbound BROADCAST (with its
// event) in the same database transaction.
type outboundGuard struct {
	id   int64
	seen fingerprint
	cur  store.Outbound
}

func (g *outboundGuard) check(ctx context.Context, tx store.Tx) error {
	o, err := tx.GetOutboundForUpdate(ctx, g.id)
	if err != nil {
		return err
	}
	if o.Status != store.OutboundQueued && o.Status != store.OutboundBroadcast {
		return fmt.Errorf("%w: outbound %d is %s", errRaced, o.ID, o.Status)
	}
	txs, err := tx.ListSweepTxsByOutbound(ctx, g.id)
	if err != nil {
		return err
	}
	if fingerprintOf(txs) != g.seen {
		return errRaced
	}
	g.cur = o
	return nil
}

func (g *outboundGuard) record(ctx context.Context, tx store.Tx, rec store.SweepTx, now time.Time) error {
	if rec.Kind != store.SweepTxOutbound {
		return nil // a funding of its gas: the outbound waits as it is
	}
	o := g.cur
	from, h := rec.From, rec.TxHash
	o.FromAddress, o.TxHash, o.UpdatedAt, o.Error = &from, &h, now, ""
	if o.Status == store.OutboundBroadcast {
		return tx.UpdateOutbound(ctx, &o) // a replacement: the new hash
	}
	o.Status, o.BroadcastAt = store.OutboundBroadcast, &now
	if err := tx.UpdateOutbound(ctx, &o); err != nil {
		return err
	}
	ev, err := api.OutboundEvent(store.OutboundEventType(o.Kind, o.Status), o, now)
	if err != nil {
		return err
	}
	return tx.InsertEvent(ctx, &ev)
}

// outboundsDue claims due outbounds in batches and advances each once, like
// sweepDue does invoices.
func (s *Sweeper) outboundsDue(ctx context.Context, p *pass, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		os, err := s.st.ClaimOutbounds(ctx, p.now, s.cfg.Lease, s.cfg.BatchSize)
		if err != nil {
			return fmt.Errorf("sweep: claim outbounds: %w", err)
		}
		if len(os) == 0 {
			return nil
		}
		sem := make(chan struct{}, s.cfg.Workers)
		var wg sync.WaitGroup
		for _, o := range os {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				s.processOutbound(ctx, p, o)
			}()
		}
		wg.Wait()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if len(os) < s.cfg.BatchSize {
			return nil
		}
	}
}

// obOutcome is what a pass decided for an outbound.
type obOutcome struct {
	// status is its new status; "" keeps it.
	status string
	// errText replaces Error when non-nil.
	errText *string
	// attempt counts one retry (a replacement).
	attempt bool
	// retryAt delays the next look; nil: the next pass.
	retryAt *time.Time
	// The transaction that carries it, its log and block, its sender: set
	// when non-nil. clearTx forgets them (a merchant's transfer reorged out).
	txHash   *common.Hash
	logIndex *int
	block    *uint64
	from     *common.Address
	clearTx  bool
	// dropSubmitted forgets the transaction the merchant named, if it is
	// still this one (it does not pay the request).
	dropSubmitted *common.Hash
	// entries are ledger entries written with the outcome (a merchant-paid
	// transfer, once confirmed).
	entries []store.LedgerEntry
}

func (s *Sweeper) processOutbound(ctx context.Context, p *pass, o store.Outbound) {
	out, err := s.advanceOutbound(ctx, p, o)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: the lease runs out and another pass takes it
		}
		if !errors.Is(err, errRaced) {
			s.log.WarnContext(ctx, "sweep: outbound: transient error", slog.Int64("outbound_id", o.ID),
				slog.String("error", err.Error()))
		}
		retry := p.now.Add(s.cfg.RetryBackoff)
		if errors.Is(err, errRaced) {
			retry = p.now.Add(time.Microsecond)
		}
		out = obOutcome{retryAt: &retry}
	}
	if err := s.settleOutbound(ctx, p, o, out); err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "sweep: outbound: record outcome", slog.Int64("outbound_id", o.ID), slog.String("error", err.Error()))
	}
}

// advanceOutbound moves one outbound as far as the chain allows in this
// pass.
func (s *Sweeper) advanceOutbound(ctx context.Context, p *pass, o store.Outbound) (obOutcome, error) {
	if o.PaidBy == store.PaidByMerchant {
		return s.advanceMerchantPaid(ctx, p, o)
	}
	return s.advanceServicePaid(ctx, p, o)
}

// settleOutbound writes an outcome under the outbound's row lock, with the
// event of a status change, and releases the lease. An outbound the API
// changed meanwhile (cancelled) only has its lease released.
func (s *Sweeper) settleOutbound(ctx context.Context, p *pass, claimed store.Outbound, out obOutcome) error {
	now := s.cfg.Now().UTC().Truncate(time.Microsecond)
	var event string
	var final store.Outbound
	err := inTx(ctx, s.st, func(tx store.Tx) error {
		o, err := tx.GetOutboundForUpdate(ctx, claimed.ID)
		if err != nil {
			return err
		}
		event = ""
		o.LockedUntil = nil
		if !slices.Contains([]string{store.OutboundQueued, store.OutboundAwaitingPayment, store.OutboundBroadcast}, o.Status) {
			return tx.UpdateOutbound(ctx, &o)
		}
		o.UpdatedAt = now
		if out.attempt {
			o.Attempts++
		}
		if out.errText != nil {
			o.Error = *out.errText
		}
		if out.clearTx {
			o.TxHash, o.LogIndex, o.BlockNumber, o.FromAddress, o.BroadcastAt = nil, nil, nil, nil, nil
		}
		if d := out.dropSubmitted; d != nil && o.SubmittedTxHash != nil && *o.SubmittedTxHash == *d {
			o.SubmittedTxHash = nil
		}
		if out.txHash != nil {
			o.TxHash = out.txHash
		}
		if out.logIndex != nil {
			o.LogIndex = out.logIndex
		}
		if out.block != nil {
			o.BlockNumber = out.block
		}
		if out.from != nil {
			o.FromAddress = out.from
		}
		if out.status != "" && out.status != o.Status {
			o.Status = out.status
			switch o.Status {
			case store.OutboundBroadcast:
				o.BroadcastAt = &now
			case store.OutboundConfirmed:
				o.ConfirmedAt, o.Error = &now, ""
			}
			event = store.OutboundEventType(o.Kind, o.Status)
		}
		next := p.now.Add(time.Microsecond)
		if out.retryAt != nil {
			next = *out.retryAt
		}
		o.NextAttemptAt = &next
		if err := tx.UpdateOutbound(ctx, &o); err != nil {
			return err
		}
		final = o
		if len(out.entries) > 0 {
			if err := tx.InsertLedgerEntries(ctx, out.entries); err != nil {
				return err
			}
		}
		if event == "" {
			return nil
		}
		ev, err := api.OutboundEvent(event, o, now)
		if err != nil {
			return err
		}
		return tx.InsertEvent(ctx, &ev)
	})
	if err != nil || event == "" {
		return err
	}
	attrs := []any{slog.Int64("outbound_id", final.ID), slog.String("kind", final.Kind), slog.String("status", final.Status),
		slog.String("asset", final.Asset().String()), slog.String("amount", final.Amount.String())}
	if final.TxHash != nil {
		attrs = append(attrs, slog.String("tx_hash", final.TxHash.Hex()))
	}
	if final.Status == store.OutboundFailed {
		s.m.outboundFailed.Inc()
		s.log.WarnContext(ctx, "sweep: outbound failed", append(attrs, slog.String("error", final.Error))...)
		return nil
	}
	if final.Status == store.OutboundConfirmed {
		s.m.outboundConfirmed.Inc()
	}
	s.log.InfoContext(ctx, "sweep: outbound", attrs...)
	return nil
}
