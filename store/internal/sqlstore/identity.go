package sqlstore

import (
	"context"
	"fmt"
	"math"

	"github.com/evmpay/evmpay/store"
)

// RecordChainIdentity implements store.IdentityStore: one record per
// chain, the bound one, which id must name.
func (s *Store) RecordChainIdentity(ctx context.Context, id store.ChainIdentity) (store.ChainIdentity, error) {
	c, err := s.chainID()
	if err != nil {
		return store.ChainIdentity{}, err
	}
	if id.ChainID != uint64(c) {
		return store.ChainIdentity{}, fmt.Errorf("%w: chain %d's identity offered to a store bound to chain %d", store.ErrOtherChain, id.ChainID, c)
	}
	var out store.ChainIdentity
	err = s.withTx(ctx, func(t *Store) error {
		if _, err := t.exec(ctx, `INSERT INTO chain_identity (chain_id, genesis_number, genesis_hash, recorded_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (chain_id) DO NOTHING`, c, id.GenesisNumber, id.GenesisHash, id.RecordedAt); err != nil {
			return err
		}
		var err error
		out, err = t.GetChainIdentity(ctx)
		return err
	})
	return out, err
}

// GetChainIdentity implements store.IdentityStore.
func (s *Store) GetChainIdentity(ctx context.Context) (store.ChainIdentity, error) {
	c, err := s.chainID()
	if err != nil {
		return store.ChainIdentity{}, err
	}
	var id store.ChainIdentity
	err = s.get(ctx, &id, `SELECT chain_id, genesis_number, genesis_hash, recorded_at FROM chain_identity WHERE chain_id = ?`, c)
	return id, err
}

// SaveCheckpoints implements store.IdentityStore.
func (s *Store) SaveCheckpoints(ctx context.Context, cps []store.Checkpoint) error {
	if len(cps) == 0 {
		return nil
	}
	c, err := s.chainID()
	if err != nil {
		return err
	}
	return s.withTx(ctx, func(t *Store) error {
		for _, cp := range cps {
			if _, err := t.exec(ctx, `INSERT INTO chain_checkpoints (chain_id, block_number, block_hash, permanent, recorded_at)
				VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (chain_id, block_number) DO UPDATE SET block_hash = excluded.block_hash,
					permanent = excluded.permanent, recorded_at = excluded.recorded_at`,
				c, cp.BlockNumber, cp.BlockHash, cp.Permanent, cp.RecordedAt); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListCheckpoints implements store.IdentityStore.
func (s *Store) ListCheckpoints(ctx context.Context, atOrBelow uint64, limit int) ([]store.Checkpoint, error) {
	cps := []store.Checkpoint{}
	if limit <= 0 {
		return cps, nil
	}
	c, err := s.chainID()
	if err != nil {
		return nil, err
	}
	err = s.sel(ctx, &cps, `SELECT block_number, block_hash, permanent, recorded_at FROM chain_checkpoints
		WHERE chain_id = ? AND block_number <= ? ORDER BY block_number DESC LIMIT ?`, c, min(atOrBelow, math.MaxInt64), limit)
	return cps, err
}

// DeleteCheckpointsFrom implements store.IdentityStore.
func (s *Store) DeleteCheckpointsFrom(ctx context.Context, number uint64) (int64, error) {
	c, err := s.chainID()
	if err != nil || number > math.MaxInt64 {
		return 0, err
	}
	res, err := s.exec(ctx, `DELETE FROM chain_checkpoints WHERE chain_id = ? AND block_number >= ?`, c, number)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// PruneCheckpoints implements store.IdentityStore.
func (s *Store) PruneCheckpoints(ctx context.Context, below uint64) (int64, error) {
	c, err := s.chainID()
	if err != nil {
		return 0, err
	}
	res, err := s.exec(ctx, `DELETE FROM chain_checkpoints WHERE chain_id = ? AND block_number < ? AND permanent = ?`,
		c, min(below, math.MaxInt64), false)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
