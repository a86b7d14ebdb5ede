package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
)

// drainLock is the named lock under which one process at a time drains
// retired keys.
const drainLock = "evmpay.sweep.drain"

// Retired is a key rotated out: the sweep wallet or gas funder it was
// no longer signs new work, and the sweeper drains its balance to To (the
// key that took over) once none of its transactions is in flight.
type Retired struct {
	// Key signs the drain. Required.
	Key AccountSigner
	// To receives the balance. Required.
	To common.Address
}

// RetiredStatus is a retired key's state, for the operator status.
type RetiredStatus struct {
	Address    common.Address `json:"address"`
	To         common.Address `json:"to"`
	BalanceWei store.Amount   `json:"balance_wei"`
	// Drained: what is left is less than a transfer's gas; the key can be
	// removed from the configuration.
	Drained bool `json:"drained"`
	// InFlight counts the key's stored transactions not yet mined (its
	// last fundings, or the drain itself).
	InFlight int `json:"in_flight"`
}

// drainRetired runs in every pass (tendAccounts), under a named lock: for
// each retired key, it tends its drain transaction if one is in flight,
// waits while any other of its transactions is (a funding still being
// mined), and otherwise sends its balance less the transfer's gas to the
// key that took over. A drain is stored as a TOPUP from the retired key,
// signed and stored before it is broadcast like every other transaction.
func (s *Sweeper) drainRetired(ctx context.Context, p *pass) error {
	if len(s.keys.Retired) == 0 {
		return nil
	}
	lock, err := s.st.TryLock(ctx, drainLock)
	if errors.Is(err, store.ErrLocked) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = lock.Unlock() }()
	var errs []error
	for _, r := range s.keys.Retired {
		if err := s.drain(ctx, p, r); err != nil {
			errs = append(errs, fmt.Errorf("drain retired key %s: %w", r.Key.Address().Hex(), err))
		}
	}
	return errors.Join(errs...)
}

func (s *Sweeper) drain(ctx context.Context, p *pass, r Retired) error {
	from := r.Key.Address()
	for _, k := range []AccountSigner{s.keys.Wallet, s.keys.Funder} {
		if k != nil && k.Address() == from {
			return errors.New("the retired key is still the sweep wallet or the gas funder")
		}
	}
	sign := func(ctx context.Context, tx *types.Transaction) (*types.Transaction, error) {
		return r.Key.SignTx(ctx, tx, s.signer)
	}
	unmined, err := s.st.ListUnminedSweepTxs(ctx, from)
	if err != nil {
		return err
	}
	slots, err := s.nonceSlots(ctx, unmined, store.SweepTxTopUp)
	if err != nil {
		return err
	}
	waiting := false
	for _, sl := range slots {
		if err := s.refresh(ctx, p, sl); err != nil {
			return err
		}
		if sl.mined != nil {
			s.log.InfoContext(ctx, "sweep: retired key drain mined", slog.String("from", from.Hex()),
				slog.String("tx_hash", sl.mined.TxHash.Hex()), slog.String("value_wei", sl.mined.ValueWei.String()))
			continue
		}
		v, err := s.tend(ctx, p, sl)
		if err != nil {
			return err
		}
		if v.dead {
			continue
		}
		waiting = true
		live := sl.live()
		if !v.replace {
			continue
		}
		f, stop := s.replacement(ctx, p, live, s.replacementCapped(sl.txs))
		if stop != "" {
			if err := s.keepSending(ctx, p, live); err != nil {
				return err
			}
			continue
		}
		rec, err := s.resign(ctx, p, live, f, sign, nil)
		if err != nil {
			return err
		}
		if _, err := s.broadcast(ctx, p, &rec); err != nil {
			return err
		}
	}
	for _, t := range unmined {
		if t.Kind != store.SweepTxTopUp {
			waiting = true // its last fundings are tended by their invoices' passes
		}
	}
	if waiting {
		return nil
	}
	mined, err := s.nonceAt(ctx, p, from)
	if err != nil {
		return err
	}
	pending, err := s.pendingNonce(ctx, p, from)
	if err != nil {
		return err
	}
	if pending > mined {
		return nil // something of the key's is in the node's pool: wait for it
	}
	bal, err := s.chain.BalanceAt(ctx, from, p.headNumber())
	if err != nil {
		return err
	}
	f := s.freshFee(p)
	gasCost := new(big.Int).Mul(big.NewInt(transferGas), f.cap)
	if bal.Cmp(gasCost) <= 0 {
		if _, seen := s.alerted.LoadOrStore("drained/"+from.Hex(), true); !seen {
			s.log.InfoContext(ctx, "sweep: retired key is drained; remove it from the configuration",
				slog.String("address", from.Hex()), slog.String("left_wei", bal.String()))
		}
		return nil
	}
	rec, err := s.signAndStore(ctx, p, spec{kind: store.SweepTxTopUp, from: from, to: r.To,
		value: new(big.Int).Sub(bal, gasCost), fee: f, nonce: pending, reserve: true, sign: sign})
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "sweep: draining retired key", slog.String("from", from.Hex()), slog.String("to", r.To.Hex()),
		slog.String("tx_hash", rec.TxHash.Hex()), slog.String("value_wei", rec.ValueWei.String()))
	_, err = s.broadcast(ctx, p, &rec)
	return err
}

// RetiredStatus reports each retired key's balance and whether it is
// drained.
func (s *Sweeper) RetiredStatus(ctx context.Context) ([]RetiredStatus, error) {
	if len(s.keys.Retired) == 0 {
		return nil, nil
	}
	p, err := s.newPass(ctx)
	if err != nil {
		return nil, err
	}
	f := s.freshFee(p)
	gasCost := new(big.Int).Mul(big.NewInt(transferGas), f.cap)
	out := make([]RetiredStatus, 0, len(s.keys.Retired))
	for _, r := range s.keys.Retired {
		addr := r.Key.Address()
		bal, err := s.chain.BalanceAt(ctx, addr, p.headNumber())
		if err != nil {
			return nil, err
		}
		unmined, err := s.st.ListUnminedSweepTxs(ctx, addr)
		if err != nil {
			return nil, err
		}
		out = append(out, RetiredStatus{Address: addr, To: r.To, BalanceWei: amountOf(bal),
			Drained: len(unmined) == 0 && bal.Cmp(gasCost) <= 0, InFlight: len(unmined)})
	}
	return out, nil
}

// MarshalJSON shows the addresses in EIP-55 form.
func (r RetiredStatus) MarshalJSON() ([]byte, error) {
	type plain RetiredStatus
	return json.Marshal(struct {
		plain
		Address store.ChecksumAddress `json:"address"`
		To      store.ChecksumAddress `json:"to"`
	}{plain(r), store.ChecksumAddress(r.Address), store.ChecksumAddress(r.To)})
}
