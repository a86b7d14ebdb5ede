package evmpaytest

import (
	"context"
	"errors"
	"math/big"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// Reorg replaces the chain's last depth blocks by depth+1 new ones (the
// longer branch wins, as on a real chain) and returns the new head's
// number. The transactions of the replaced blocks go back into the pool
// and are mined again in the new blocks — except those named in drop:
// each is replaced at its nonce by a transfer of nothing from its sender
// to itself, so that it never happens (a payment a reorg took back). A
// dropped transaction must come from one of the chain's funded accounts
// (Accounts), whose key signs its replacement. What a test learns from
// go-ethereum's simulated backend is done here once: the fork, the pool
// moved to it (simchain), the replacement priced above the original.
func (c *Chain) Reorg(depth int, drop ...common.Hash) uint64 {
	c.tb.Helper()
	ctx := context.Background()
	head := c.Head()
	if depth < 1 || uint64(depth) > head {
		c.tb.Fatalf("evmpaytest: reorg of depth %d: the chain has %d blocks after genesis", depth, head)
	}
	ancestor, err := c.client.HeaderByNumber(ctx, new(big.Int).SetUint64(head-uint64(depth)))
	if err != nil {
		c.tb.Fatalf("evmpaytest: reorg: block %d: %v", head-uint64(depth), err)
	}
	type replacement struct {
		from    Account
		orig    *types.Transaction
		removed common.Hash
	}
	var replace []replacement
	for _, h := range drop {
		tx, pending, err := c.client.TransactionByHash(ctx, h)
		if err != nil || pending {
			c.tb.Fatalf("evmpaytest: reorg: transaction %s is not mined (%v)", h.Hex(), err)
		}
		r, err := c.client.TransactionReceipt(ctx, h)
		if err != nil || r.BlockNumber.Uint64() <= ancestor.Number.Uint64() {
			c.tb.Fatalf("evmpaytest: reorg: transaction %s is not in the last %d blocks", h.Hex(), depth)
		}
		sender, err := types.Sender(types.LatestSignerForChainID(c.id), tx)
		if err != nil {
			c.tb.Fatalf("evmpaytest: reorg: sender of %s: %v", h.Hex(), err)
		}
		from, ok := c.account(sender)
		if !ok {
			c.tb.Fatalf("evmpaytest: reorg: %s was sent by %s, not a funded account: its replacement cannot be signed", h.Hex(), sender.Hex())
		}
		replace = append(replace, replacement{from: from, orig: tx, removed: h})
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.backend.Fork(ancestor.Hash()); err != nil { // returns once the pool holds the orphaned transactions
		c.tb.Fatalf("evmpaytest: reorg: fork at block %d: %v", ancestor.Number, err)
	}
	for _, r := range replace {
		if err := c.replaceTx(ctx, r.from, r.orig); err != nil {
			c.tb.Fatalf("evmpaytest: reorg: replace %s: %v", r.removed.Hex(), err)
		}
	}
	for range depth + 1 {
		c.backend.Commit()
	}
	for _, r := range replace {
		if _, err := c.client.TransactionReceipt(ctx, r.removed); !errors.Is(err, ethereum.NotFound) {
			c.tb.Fatalf("evmpaytest: reorg: transaction %s is still on the chain (%v)", r.removed.Hex(), err)
		}
	}
	return c.headLocked(ctx)
}

// account is the funded account of addr.
func (c *Chain) account(addr common.Address) (Account, bool) {
	for _, a := range c.accounts {
		if a.Address == addr {
			return a, true
		}
	}
	return Account{}, false
}

// replaceTx sends, at orig's nonce, a transfer of nothing from `from` to
// itself priced above orig: the pool takes it in orig's place. Called with
// c.mu held.
func (c *Chain) replaceTx(ctx context.Context, from Account, orig *types.Transaction) error {
	bump := func(x *big.Int) *big.Int {
		return new(big.Int).Add(new(big.Int).Mul(x, big.NewInt(2)), big.NewInt(1_000_000_000))
	}
	tx, err := types.SignNewTx(from.Key, types.LatestSignerForChainID(c.id), &types.DynamicFeeTx{
		ChainID: c.id, Nonce: orig.Nonce(), GasTipCap: bump(orig.GasTipCap()), GasFeeCap: bump(orig.GasFeeCap()),
		Gas: 21000, To: &from.Address,
	})
	if err != nil {
		return err
	}
	return c.client.SendTransaction(ctx, tx)
}

// headLocked is Head for a caller holding c.mu.
func (c *Chain) headLocked(ctx context.Context) uint64 {
	n, err := c.client.BlockNumber(ctx)
	if err != nil {
		c.tb.Fatalf("evmpaytest: head: %v", err)
	}
	return n
}
