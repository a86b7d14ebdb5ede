package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

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

// ChainStop implements store.StopStore.
func (s *Store) ChainStop(ctx context.Context) (string, time.Time, bool, error) {
	c, err := s.chainID()
	if err != nil {
		return "", time.Time{}, false, err
	}
	var row struct {
		Problem   string    `db:"problem"`
		StoppedAt time.Time `db:"stopped_at"`
	}
	err = s.get(ctx, &row, `SELECT problem, stopped_at FROM chain_stops WHERE chain_id = ?`, c)
	if errors.Is(err, store.ErrNotFound) {
		return "", time.Time{}, false, nil
	}
	if err != nil {
		return "", time.Time{}, false, err
	}
	return row.Problem, row.StoppedAt.UTC(), true, nil
}

// SetChainStop implements store.StopStore.
func (s *Store) SetChainStop(ctx context.Context, problem string, at time.Time) error {
	c, err := s.chainID()
	if err != nil {
		return err
	}
	if problem == "" {
		_, err = s.exec(ctx, `DELETE FROM chain_stops WHERE chain_id = ?`, c)
		return err
	}
	_, err = s.exec(ctx, `INSERT INTO chain_stops (chain_id, problem, stopped_at) VALUES (?, ?, ?)
		ON CONFLICT (chain_id) DO UPDATE SET problem = excluded.problem, stopped_at = excluded.stopped_at`, c, problem, at)
	return err
}
