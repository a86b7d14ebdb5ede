package sqlstore

import (
	"context"
	"math"

	"github.com/evmpay/evmpay/store"
)

// RecordChainIdentity implements store.IdentityStore.
func (s *Store) RecordChainIdentity(ctx context.Context, id store.ChainIdentity) (store.ChainIdentity, error) {
	var out store.ChainIdentity
	err := s.withTx(ctx, func(t *Store) error {
		if _, err := t.namedExec(ctx, `INSERT INTO chain_identity (id, chain_id, genesis_number, genesis_hash, recorded_at)
			VALUES (1, :chain_id, :genesis_number, :genesis_hash, :recorded_at) ON CONFLICT (id) DO NOTHING`, id); err != nil {
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
	var id store.ChainIdentity
	err := s.get(ctx, &id, `SELECT chain_id, genesis_number, genesis_hash, recorded_at FROM chain_identity WHERE id = 1`)
	return id, err
}

// SaveCheckpoints implements store.IdentityStore.
func (s *Store) SaveCheckpoints(ctx context.Context, cps []store.Checkpoint) error {
	if len(cps) == 0 {
		return nil
	}
	return s.withTx(ctx, func(t *Store) error {
		for _, c := range cps {
			if _, err := t.namedExec(ctx, `INSERT INTO chain_checkpoints (block_number, block_hash, permanent, recorded_at)
				VALUES (:block_number, :block_hash, :permanent, :recorded_at)
				ON CONFLICT (block_number) DO UPDATE SET block_hash = excluded.block_hash,
					permanent = excluded.permanent, recorded_at = excluded.recorded_at`, c); err != nil {
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
	err := s.sel(ctx, &cps, `SELECT block_number, block_hash, permanent, recorded_at FROM chain_checkpoints
		WHERE block_number <= ? ORDER BY block_number DESC LIMIT ?`, min(atOrBelow, math.MaxInt64), limit)
	return cps, err
}

// DeleteCheckpointsFrom implements store.IdentityStore.
func (s *Store) DeleteCheckpointsFrom(ctx context.Context, number uint64) (int64, error) {
	if number > math.MaxInt64 {
		return 0, nil
	}
	res, err := s.exec(ctx, `DELETE FROM chain_checkpoints WHERE block_number >= ?`, number)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// PruneCheckpoints implements store.IdentityStore.
func (s *Store) PruneCheckpoints(ctx context.Context, below uint64) (int64, error) {
	res, err := s.exec(ctx, `DELETE FROM chain_checkpoints WHERE block_number < ? AND permanent = ?`,
		min(below, math.MaxInt64), false)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
