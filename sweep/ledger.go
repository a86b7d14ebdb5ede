package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
)

// The ledger's entries of the service's own transactions are written here,
// in the database transaction that records a transaction mined (or undone
// by a reorg): syncSlot is the one place that does either. Payments write
// theirs in the database (migration 0140). Money arriving from outside at
// the service's wallets is followed here too, from the indexed chain
// (followInflows), so that the ledger's balance of every wallet is the
// chain's (reconcile.go).

// LedgerCursor is the named cursor of the ledger's follower: the block up
// to which money arriving from outside at the service's wallets is in the
// ledger. The reconciliation compares balances at it.
const LedgerCursor = "ledger.inflows"

// ledgerLock is the named lock under which one process at a time follows
// the wallets' inflows and registers wallets.
const ledgerLock = "evmpay.sweep.ledger"

// ledgerOfMined returns the ledger entries of a transaction mined with
// receipt r: its fee (from its sender to no one), and, when it succeeded,
// the value it sent and the token Transfer events the called token
// emitted, each its own entry with its log index.
func (s *Sweeper) ledgerOfMined(ctx context.Context, p *pass, t store.SweepTx, r *types.Receipt) ([]store.LedgerEntry, error) {
	h, err := s.chain.HeaderByNumber(ctx, r.BlockNumber)
	if err != nil {
		return nil, fmt.Errorf("block %s of %s: %w", r.BlockNumber, t.TxHash.Hex(), err)
	}
	block, hash, id := r.BlockNumber.Uint64(), t.TxHash, t.ID
	base := store.LedgerEntry{InvoiceID: t.InvoiceID, OutboundID: t.OutboundID, SweepTxID: &id, TxHash: &hash,
		BlockNumber: &block, At: time.Unix(int64(h.Time), 0).UTC(), RecordedAt: p.now}
	var out []store.LedgerEntry
	if t.FeeWei != nil && !t.FeeWei.IsZero() {
		e := base
		from := t.From
		e.Kind, e.From, e.Amount = store.LedgerGasFee, &from, *t.FeeWei
		e.FiatCurrency, e.FiatMinor = s.gasValue(ctx, t)
		out = append(out, e)
	}
	if r.Status != types.ReceiptStatusSuccessful {
		return out, nil
	}
	kind, err := s.ledgerKind(ctx, t)
	if err != nil {
		return nil, err
	}
	if !t.ValueWei.IsZero() {
		e := base
		from, to := t.From, t.To
		e.Kind, e.From, e.To, e.Amount = kind, &from, &to, t.ValueWei
		out = append(out, e)
	}
	for _, l := range r.Logs {
		if l.Address != t.To || len(l.Topics) != 3 || l.Topics[0] != transferTopic {
			continue
		}
		e := base
		token := l.Address
		from, to := common.BytesToAddress(l.Topics[1][:]), common.BytesToAddress(l.Topics[2][:])
		li := int(l.Index)
		e.Kind, e.Token, e.From, e.To, e.Amount, e.LogIndex = kind, &token, &from, &to, amountOf(new(big.Int).SetBytes(l.Data)), &li
		out = append(out, e)
	}
	return out, nil
}

// gasValue is the fee of a fiat-priced invoice's transaction in the
// invoice's currency at the Valuer's current rate ("" and nil without a
// Valuer, for other transactions, or when no rate can be had: the ledger
// then falls back to the invoice's locked quote of the native coin).
func (s *Sweeper) gasValue(ctx context.Context, t store.SweepTx) (string, *store.Amount) {
	if s.cfg.Valuer == nil || t.InvoiceID == nil || t.FeeWei == nil {
		return "", nil
	}
	inv, err := s.st.GetInvoice(ctx, *t.InvoiceID)
	if err != nil || inv.Pricing == nil {
		return "", nil
	}
	cur := inv.Pricing.Price.Currency.Code
	v, err := s.cfg.Valuer.CurrentValue(ctx, store.NativeAsset(s.cfg.NativeSymbol), *t.FeeWei, cur)
	if err != nil {
		s.log.DebugContext(ctx, "sweep: no current rate for a fee", slog.String("currency", cur), slog.Any("error", err))
		return "", nil
	}
	return v.Currency.Code, &v.Minor
}

// ledgerKind names the movement a transaction of the sweeper makes.
func (s *Sweeper) ledgerKind(ctx context.Context, t store.SweepTx) (string, error) {
	switch t.Kind {
	case store.SweepTxFunding:
		return store.LedgerGasFunding, nil
	case store.SweepTxTopUp:
		return store.LedgerTopUp, nil
	case store.SweepTxOutbound:
		if t.OutboundID == nil {
			return store.LedgerPayout, nil
		}
		o, err := s.st.GetOutbound(ctx, *t.OutboundID)
		if err != nil {
			return "", err
		}
		if o.Kind == store.OutboundRefund {
			return store.LedgerRefund, nil
		}
		return store.LedgerPayout, nil
	default: // SWEEP, PULL, NATIVE (a PERMIT moves nothing)
		return store.LedgerSweep, nil
	}
}

// ledgerPass runs under the ledger lock, once per pass: it records the
// service's wallets (the sweep wallet, the gas funder, a payout wallet for
// every merchant that has none yet) and follows the money arriving at them
// from outside up to the confirmed indexed head.
func (s *Sweeper) ledgerPass(ctx context.Context, p *pass) error {
	lock, err := s.st.TryLock(ctx, ledgerLock)
	if errors.Is(err, store.ErrLocked) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = lock.Unlock() }()
	if err := s.registerWallets(ctx, p); err != nil {
		return fmt.Errorf("register wallets: %w", err)
	}
	if err := s.followInflows(ctx, p); err != nil {
		return fmt.Errorf("follow inflows: %w", err)
	}
	return nil
}

// registerWallets records the wallets the sweeper holds keys for. A wallet
// recorded after the ledger's follower started gets its opening balance at
// the follower's block.
//
// A wallet's opening balance holds every movement up to its block,
// including the service's own transactions mined earlier whose entries
// syncSlot wrote (or writes later): the ledger may have started after the
// service moved money. The wallet's ledger balance is therefore its
// opening balance plus the entries of later blocks
// (ServiceWallet.LedgerFromBlock; the reconciliation counts so).
func (s *Sweeper) registerWallets(ctx context.Context, p *pass) error {
	var ws []store.ServiceWallet
	if !s.walletsRecorded.Load() {
		for _, k := range []struct {
			key  AccountSigner
			role string
		}{{s.keys.Wallet, store.WalletSweep}, {s.keys.Funder, store.WalletFunder}} {
			if k.key != nil {
				ws = append(ws, store.ServiceWallet{Address: k.key.Address(), Role: k.role, CreatedAt: p.now})
			}
		}
	}
	if s.keys.Payouts != nil {
		ids, err := s.st.ListMerchantsWithoutPayoutWallet(ctx, 100)
		if err != nil {
			return err
		}
		for _, id := range ids {
			addr, err := s.keys.Payouts.PayoutAddress(id)
			if err != nil {
				return fmt.Errorf("payout wallet of merchant %d: %w", id, err)
			}
			ws = append(ws, store.ServiceWallet{Address: addr, Role: store.WalletPayout, MerchantID: &id, CreatedAt: p.now})
		}
	}
	if len(ws) == 0 {
		return nil
	}
	cur, err := s.st.GetCursor(ctx, LedgerCursor)
	started := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	for _, w := range ws {
		// A wallet is new, or recorded (by this chain's sweep or
		// another's) and opened on this chain already, or recorded but
		// not opened here: opened below, with its opening balance here.
		have, err := s.st.GetServiceWallet(ctx, w.Address)
		switch {
		case err == nil && (!started || have.LedgerFromBlock != nil):
			if err := s.st.RegisterServiceWallet(ctx, w); err != nil {
				return err // recorded already: the same role, or a conflict to report
			}
			continue // opened on this chain, or the ledger's start opens it
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		}
		var opening []store.LedgerEntry
		if started {
			if opening, err = s.openingBalances(ctx, p, []store.ServiceWallet{w}, cur.BlockNumber); err != nil {
				return err
			}
			from := cur.BlockNumber
			w.LedgerFromBlock = &from
		}
		err = s.st.InTx(ctx, func(tx store.Tx) error {
			if err := tx.RegisterServiceWallet(ctx, w); err != nil {
				return err
			}
			return tx.InsertLedgerEntries(ctx, opening)
		})
		if err != nil {
			return err
		}
		attrs := []any{slog.String("role", w.Role), slog.String("address", w.Address.Hex())}
		if w.MerchantID != nil {
			attrs = append(attrs, slog.Int64("merchant_id", *w.MerchantID))
		}
		s.log.InfoContext(ctx, "sweep: wallet recorded", attrs...)
	}
	s.walletsRecorded.Store(true)
	return nil
}

// openingBalances are the entries of what the wallets held at block (the
// native coin and every configured token), for the ones holding anything.
func (s *Sweeper) openingBalances(ctx context.Context, p *pass, ws []store.ServiceWallet, block uint64) ([]store.LedgerEntry, error) {
	b, err := s.st.GetBlock(ctx, block)
	if err != nil {
		return nil, err
	}
	at, n := time.Unix(int64(b.Timestamp), 0).UTC(), new(big.Int).SetUint64(block)
	var out []store.LedgerEntry
	for _, w := range ws {
		bals, err := balancesAt(ctx, s.chain, w.Address, s.cfg.Tokens, n)
		if err != nil {
			return nil, err
		}
		for _, bal := range bals {
			if bal.amount.Sign() == 0 {
				continue
			}
			addr, num := w.Address, block
			out = append(out, store.LedgerEntry{Kind: store.LedgerOpeningBalance, MerchantID: w.MerchantID,
				Token: bal.token, To: &addr, Amount: amountOf(bal.amount), BlockNumber: &num, At: at, RecordedAt: p.now})
		}
	}
	return out, nil
}

type assetBalance struct {
	token  *common.Address
	amount *big.Int
}

// balancesAt reads addr's native balance and each token's at block.
func balancesAt(ctx context.Context, c ReconcileChain, addr common.Address, tokens []common.Address, block *big.Int) ([]assetBalance, error) {
	bal, err := c.BalanceAt(ctx, addr, block)
	if err != nil {
		return nil, err
	}
	out := []assetBalance{{amount: bal}}
	for _, t := range tokens {
		v, err := callUint(ctx, c, t, block, "balanceOf", addr)
		if err != nil {
			return nil, fmt.Errorf("balanceOf %s at %s: %w", addr.Hex(), t.Hex(), err)
		}
		token := t
		out = append(out, assetBalance{token: &token, amount: v})
	}
	return out, nil
}

// followInflows writes the money that arrived from outside at the
// service's wallets — the sweep wallet, the gas funder, the payout
// wallets — into the ledger, block by block up to the indexed head less
// the confirmations (under finality "tag", the recorded finalized block),
// under its own cursor: native transfers and token
// transfers of the configured tokens that are none of the service's own
// transactions (those are in the ledger already). The first time, it
// starts with every wallet's opening balance at that block instead.
func (s *Sweeper) followInflows(ctx context.Context, p *pass) error {
	head, err := s.st.LatestBlock(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	target, ok := s.finalIndexed(p, head.Number)
	if !ok || target > p.number {
		return nil
	}
	ws, err := s.st.ListServiceWallets(ctx)
	if err != nil {
		return err
	}
	cur, err := s.st.GetCursor(ctx, LedgerCursor)
	if errors.Is(err, store.ErrNotFound) {
		return s.startLedger(ctx, p, ws, target)
	}
	if err != nil || cur.BlockNumber >= target {
		return err
	}
	to := min(target, cur.BlockNumber+1000)
	addrs := make([]common.Address, len(ws))
	owner := map[common.Address]*int64{}
	for i, w := range ws {
		addrs[i], owner[w.Address] = w.Address, w.MerchantID
	}
	trs, err := s.st.ListInboundTransfers(ctx, addrs, cur.BlockNumber+1, to)
	if err != nil {
		return err
	}
	hashes := make([]common.Hash, len(trs))
	for i, tr := range trs {
		hashes[i] = tr.TxHash
	}
	ours, err := s.st.ListSweepTxsByHashes(ctx, hashes)
	if err != nil {
		return err
	}
	own := map[common.Hash]bool{}
	for _, t := range ours {
		own[t.TxHash] = true
	}
	var entries []store.LedgerEntry
	for _, tr := range trs {
		if own[tr.TxHash] {
			continue
		}
		from, to, h, block := tr.From, tr.To, tr.TxHash, tr.BlockNumber
		entries = append(entries, store.LedgerEntry{Kind: store.LedgerWalletFunding, MerchantID: owner[tr.To], Token: tr.Token,
			From: &from, To: &to, Amount: tr.Amount, TxHash: &h, LogIndex: tr.LogIndex, BlockNumber: &block,
			At: time.Unix(tr.BlockTime, 0).UTC(), RecordedAt: p.now})
	}
	b, err := s.st.GetBlock(ctx, to)
	if err != nil {
		return err
	}
	return s.st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.InsertLedgerEntries(ctx, entries); err != nil {
			return err
		}
		return tx.CompareAndSetCursor(ctx, LedgerCursor, &cur, store.Cursor{Name: LedgerCursor, BlockNumber: to,
			BlockHash: b.Hash, UpdatedAt: p.now})
	})
}

// startLedger records every wallet's opening balance at block and starts
// the follower's cursor there. A block not indexed — the indexer started
// above it, at the chain's head, and the confirmed head is still below
// its first block — is nothing to do yet: the ledger starts once the
// confirmed head reaches the indexed blocks.
func (s *Sweeper) startLedger(ctx context.Context, p *pass, ws []store.ServiceWallet, block uint64) error {
	b, err := s.st.GetBlock(ctx, block)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	opening, err := s.openingBalances(ctx, p, ws, block)
	if err != nil {
		return err
	}
	err = s.st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.InsertLedgerEntries(ctx, opening); err != nil {
			return err
		}
		if _, err := tx.OpenServiceWallets(ctx, block); err != nil {
			return err
		}
		return tx.CompareAndSetCursor(ctx, LedgerCursor, nil, store.Cursor{Name: LedgerCursor, BlockNumber: block,
			BlockHash: b.Hash, UpdatedAt: p.now})
	})
	if err == nil {
		s.log.InfoContext(ctx, "sweep: ledger started", slog.Uint64("block", block), slog.Int("wallets", len(ws)),
			slog.Int("opening_balances", len(opening)))
	}
	return err
}
