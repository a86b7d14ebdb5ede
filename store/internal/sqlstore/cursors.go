package sqlstore

import (
	"context"

	"github.com/evmpay/evmpay/store"
)

// GetCursor implements store.CursorStore.
func (s *Store) GetCursor(ctx context.Context, name string) (store.Cursor, error) {
	c, err := s.chainID()
	if err != nil {
		return store.Cursor{}, err
	}
	var cur store.Cursor
	err = s.getPrepared(ctx, &cur, `SELECT name, block_number, block_hash, updated_at FROM cursors
		WHERE chain_id = ? AND name = ?`, c, name)
	return cur, err
}

// SetCursor implements store.CursorStore.
func (s *Store) SetCursor(ctx context.Context, cur store.Cursor) error {
	c, err := s.chainID()
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, `INSERT INTO cursors (chain_id, name, block_number, block_hash, updated_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (chain_id, name) DO UPDATE SET block_number = excluded.block_number,
			block_hash = excluded.block_hash, updated_at = excluded.updated_at`,
		c, cur.Name, cur.BlockNumber, cur.BlockHash, cur.UpdatedAt)
	return err
}
