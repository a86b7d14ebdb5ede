package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/evmpay/evmpay/store"
)

// FinalizedBlock implements store.FinalityStore.
func (s *Store) FinalizedBlock(ctx context.Context) (uint64, bool, error) {
	c, err := s.chainID()
	if err != nil {
		return 0, false, err
	}
	var n int64
	err = s.get(ctx, &n, `SELECT block_number FROM chain_finalized WHERE chain_id = ?`, c)
	if errors.Is(err, store.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return uint64(n), true, nil
}

// SetFinalizedBlock implements store.FinalityStore. The upsert's WHERE
// keeps it monotonic in SQL: a lower number changes nothing, whoever
// writes it.
func (s *Store) SetFinalizedBlock(ctx context.Context, number uint64) error {
	c, err := s.chainID()
	if err != nil {
		return err
	}
	if number > math.MaxInt64 {
		return fmt.Errorf("store: finalized block %d out of range", number)
	}
	_, err = s.exec(ctx, `INSERT INTO chain_finalized (chain_id, block_number) VALUES (?, ?)
		ON CONFLICT (chain_id) DO UPDATE SET block_number = excluded.block_number
		WHERE chain_finalized.block_number < excluded.block_number`, c, int64(number))
	return err
}
