package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
)

// funderLock is the named lock under which one process at a time runs the
// gas funder.
const funderLock = "evmpay.sweep.gas-funder"

// WalletStatus is the sweep wallet's state, for the operator status and
// metrics.
type WalletStatus struct {
	// Address of the sweep wallet.
	Address common.Address `json:"address"`
	// Block is the chain head the figures were read at.
	Block uint64 `json:"block"`
	// BalanceWei is the wallet's balance at Block.
	BalanceWei store.Amount `json:"balance_wei"`
	// GasSpend24hWei is what the wallet paid for gas in the last 24 hours:
	// the fees of its own transactions plus the gas money it sent deposit
	// addresses for their sweeps.
	GasSpend24hWei store.Amount `json:"gas_spend_24h_wei"`
	// ReserveWei is the balance below which the gas funder tops it up.
	ReserveWei store.Amount `json:"reserve_wei"`
	// Low is the alert: the balance is below half the last 24 hours' gas
	// spend.
	Low bool `json:"low"`
	// NeedsTopUp: the balance is below the reserve.
	NeedsTopUp bool `json:"needs_top_up"`
	// Funder is the gas funder's state; nil when none is configured.
	Funder *FunderStatus `json:"funder,omitempty"`
	// Alerts are conditions an operator must look at: the chain guard
	// refusing the node (nothing is broadcast), and sweep-wallet or
	// gas-funder transactions stuck at the replacement cap or the fee
	// ceiling (no longer re-priced). Empty when all is well.
	Alerts []string `json:"alerts,omitempty"`
}

// FunderStatus is the gas funder's state.
type FunderStatus struct {
	Address    common.Address `json:"address"`
	BalanceWei store.Amount   `json:"balance_wei"`
	// PendingTopUp is a top-up signed but not yet mined.
	PendingTopUp bool `json:"pending_top_up"`
}

// MarshalJSON shows the address in EIP-55 form, as every other address
// the service answers with.
func (w WalletStatus) MarshalJSON() ([]byte, error) {
	type plain WalletStatus
	return json.Marshal(struct {
		plain
		Address store.ChecksumAddress `json:"address"`
	}{plain(w), store.ChecksumAddress(w.Address)})
}

// MarshalJSON shows the address in EIP-55 form.
func (f FunderStatus) MarshalJSON() ([]byte, error) {
	type plain FunderStatus
	return json.Marshal(struct {
		plain
		Address store.ChecksumAddress `json:"address"`
	}{plain(f), store.ChecksumAddress(f.Address)})
}

// WalletStatus reads the sweep wallet's balance, 24-hour gas spend, reserve
// and alert flag (balance < 0.5 × 24-hour spend). Hosts show it in their
// operator status; the same figures are exported as metrics.
func (s *Sweeper) WalletStatus(ctx context.Context) (WalletStatus, error) {
	if s.keys.Wallet == nil {
		return WalletStatus{}, errors.New("sweep: no sweep wallet configured")
	}
	var guardAlert string
	if err := s.checkChain(ctx); err != nil {
		guardAlert = err.Error()
	}
	p, err := s.newPass(ctx)
	if err != nil {
		return WalletStatus{}, err
	}
	ws, err := s.walletStatus(ctx, p)
	if err != nil {
		return ws, err
	}
	if guardAlert != "" {
		ws.Alerts = append(ws.Alerts, guardAlert)
	}
	stuck := 0
	for _, k := range []AccountSigner{s.keys.Wallet, s.keys.Funder} {
		if k == nil {
			continue
		}
		alerts, err := s.stuckAlerts(ctx, p, k.Address())
		if err != nil {
			return ws, err
		}
		stuck += len(alerts)
		ws.Alerts = append(ws.Alerts, alerts...)
	}
	s.m.stuck.Set(float64(stuck))
	if s.keys.Funder == nil {
		return ws, nil
	}
	funder := s.keys.Funder.Address()
	bal, err := s.chain.BalanceAt(ctx, funder, p.headNumber())
	if err != nil {
		return ws, err
	}
	unmined, err := s.st.ListUnminedSweepTxs(ctx, funder)
	if err != nil {
		return ws, err
	}
	ws.Funder = &FunderStatus{Address: funder, BalanceWei: amountOf(bal), PendingTopUp: len(unmined) > 0}
	return ws, nil
}

func (s *Sweeper) walletStatus(ctx context.Context, p *pass) (WalletStatus, error) {
	wallet := s.keys.Wallet.Address()
	bal, err := s.chain.BalanceAt(ctx, wallet, p.headNumber())
	if err != nil {
		return WalletStatus{}, fmt.Errorf("sweep: wallet balance: %w", err)
	}
	mined, err := s.st.ListSweepTxsMinedSince(ctx, wallet, p.now.Add(-24*time.Hour))
	if err != nil {
		return WalletStatus{}, fmt.Errorf("sweep: wallet gas spend: %w", err)
	}
	spend := new(big.Int)
	for _, t := range mined {
		if t.Kind == store.SweepTxFunding {
			spend.Add(spend, t.ValueWei.Big())
		}
		if t.FeeWei != nil {
			spend.Add(spend, t.FeeWei.Big())
		}
	}
	reserve := s.cfg.GasReserve.Big()
	if s.cfg.GasReserve.IsZero() {
		reserve = bigMax(spend, s.cfg.GasReserveFloor.Big())
	}
	half := new(big.Int).Rsh(spend, 1)
	ws := WalletStatus{
		Address: wallet, Block: p.number,
		BalanceWei: amountOf(bal), GasSpend24hWei: amountOf(spend), ReserveWei: amountOf(reserve),
		Low:        bal.Cmp(half) < 0,
		NeedsTopUp: bal.Cmp(reserve) < 0,
	}
	s.m.observeWallet(ws)
	return ws, nil
}

// tendAccounts runs before the invoices of a pass: it re-broadcasts the
// sweep wallet's transaction that blocks the others (a nonce gap: stored
// but never accepted, for example its invoice FAILED on "insufficient gas"
// or its process died before broadcasting), and runs the gas funder.
func (s *Sweeper) tendAccounts(ctx context.Context, p *pass) error {
	if s.keys.Wallet == nil {
		return nil
	}
	var errs []error
	if err := s.unblock(ctx, p, s.keys.Wallet.Address()); err != nil {
		errs = append(errs, err)
	}
	if s.keys.Funder != nil {
		if err := s.topUp(ctx, p); err != nil {
			errs = append(errs, err)
		}
	} else if _, err := s.walletStatus(ctx, p); err != nil {
		errs = append(errs, err)
	}
	if err := s.drainRetired(ctx, p); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// unblock records the sweep wallet's transactions mined since they were
// last looked at (whatever their invoice's state) and re-broadcasts the
// stored transaction whose nonce is the next one the chain expects.
func (s *Sweeper) unblock(ctx context.Context, p *pass, addr common.Address) error {
	unmined, err := s.st.ListUnminedSweepTxs(ctx, addr)
	if err != nil || len(unmined) == 0 {
		return err
	}
	next, err := s.nonceAt(ctx, p, addr)
	if err != nil {
		return err
	}
	var head *store.SweepTx
	for i := range unmined {
		t := &unmined[i]
		switch {
		case t.Nonce < next:
			// Mined (or its nonce used): record a mined one, so that the
			// wallet's committed balance and gas spend stay true even when
			// its invoice is FAILED and not being worked on. The mined one
			// may be an original it replaced (nonceSlots).
			slots, err := s.nonceSlots(ctx, []store.SweepTx{*t}, t.Kind)
			if err != nil {
				return err
			}
			if err := s.refresh(ctx, p, slots[0]); err != nil {
				return err
			}
		case t.Nonce == next:
			head = t // the newest of the nonce's live transactions
		}
	}
	if head == nil {
		if unmined[len(unmined)-1].Nonce > next {
			s.log.ErrorContext(ctx, "sweep: nonce gap with no stored transaction", slog.String("from", addr.Hex()),
				slog.Uint64("nonce", next))
		}
		return nil
	}
	if head.Status == store.SweepTxSent && head.SentBlock != nil && *head.SentBlock == p.number && head.LastError == "" {
		return nil // accepted at this very head
	}
	_, err = s.broadcast(ctx, p, head)
	return err
}

// topUp is the gas funder: when the sweep wallet's balance is below its
// reserve, the funder sends it enough to reach twice the reserve. One
// top-up is in flight at a time, and only the holder of the funder lock
// sends one.
func (s *Sweeper) topUp(ctx context.Context, p *pass) error {
	lock, err := s.st.TryLock(ctx, funderLock)
	if errors.Is(err, store.ErrLocked) {
		_, err := s.walletStatus(ctx, p)
		return err
	}
	if err != nil {
		return err
	}
	defer func() { _ = lock.Unlock() }()

	funder := s.keys.Funder.Address()
	unmined, err := s.st.ListUnminedSweepTxs(ctx, funder)
	if err != nil {
		return err
	}
	slots, err := s.nonceSlots(ctx, unmined, store.SweepTxTopUp)
	if err != nil {
		return err
	}
	inFlight := false
	for _, sl := range slots {
		if err := s.refresh(ctx, p, sl); err != nil {
			return err
		}
		if sl.mined != nil {
			s.log.InfoContext(ctx, "sweep: gas top-up mined", slog.String("tx_hash", sl.mined.TxHash.Hex()),
				slog.String("value_wei", sl.mined.ValueWei.String()))
			continue
		}
		v, err := s.tend(ctx, p, sl)
		if err != nil {
			return err
		}
		if v.dead {
			continue
		}
		inFlight = true
		live := sl.live()
		switch {
		case v.class == classInsufficientFunds:
			s.m.funderEmpty.Set(1)
			s.log.ErrorContext(ctx, "sweep: the gas funder cannot pay the top-up", slog.String("funder", funder.Hex()),
				slog.String("value_wei", live.ValueWei.String()))
		case v.replace:
			f, stop := s.replacement(ctx, p, live, s.replacementCapped(sl.txs))
			if stop != "" {
				if err := s.keepSending(ctx, p, live); err != nil {
					return err
				}
				break
			}
			rec, err := s.resign(ctx, p, live, f, s.funderSigner, nil)
			if err != nil {
				return err
			}
			if _, err := s.broadcast(ctx, p, &rec); err != nil {
				return err
			}
		}
	}
	ws, err := s.walletStatus(ctx, p)
	if err != nil || inFlight || !ws.NeedsTopUp {
		return err
	}
	target := new(big.Int).Lsh(ws.ReserveWei.Big(), 1)
	amount := target.Sub(target, ws.BalanceWei.Big())
	pendingNonce, err := s.pendingNonce(ctx, p, funder)
	if err != nil {
		return err
	}
	rec, err := s.signAndStore(ctx, p, spec{
		kind: store.SweepTxTopUp, from: funder, to: ws.Address, value: amount, fee: s.freshFee(p),
		nonce: pendingNonce, reserve: true, sign: s.funderSigner,
	})
	if err != nil {
		return err
	}
	s.m.topUps.Inc()
	s.log.InfoContext(ctx, "sweep: topping up the sweep wallet", slog.String("tx_hash", rec.TxHash.Hex()),
		slog.String("value_wei", rec.ValueWei.String()), slog.String("balance_wei", ws.BalanceWei.String()),
		slog.String("reserve_wei", ws.ReserveWei.String()))
	c, err := s.broadcast(ctx, p, &rec)
	if err != nil {
		return err
	}
	if c == classInsufficientFunds {
		s.m.funderEmpty.Set(1)
		s.log.ErrorContext(ctx, "sweep: the gas funder cannot pay the top-up", slog.String("funder", funder.Hex()))
	} else if c.accepted() {
		s.m.funderEmpty.Set(0)
	}
	return nil
}

// keepSending re-broadcasts, once per block, the stored bytes of a
// transaction no longer re-priced, so that a node that dropped it has it
// again when whatever blocks it clears (never a new signature).
func (s *Sweeper) keepSending(ctx context.Context, p *pass, t *store.SweepTx) error {
	if t.SentBlock != nil && p.number <= *t.SentBlock {
		return nil
	}
	_, err := s.broadcast(ctx, p, t)
	return err
}

func (s *Sweeper) funderSigner(ctx context.Context, tx *types.Transaction) (*types.Transaction, error) {
	return s.keys.Funder.SignTx(ctx, tx, s.signer)
}
