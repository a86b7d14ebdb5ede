package sqlstore

import (
	"context"

	"github.com/evmpay/evmpay/store"
)

// GetCursor implements store.CursorStore.
func (s *Store) GetCursor(ctx context.Context, name string) (store.Cursor, error) {
	var c store.Cursor
	err := s.getPrepared(ctx, &c, `SELECT name, block_number, block_hash, updated_at FROM cursors WHERE name = ?`, name)
	return c, err
}

// SetCursor implements store.CursorStore.
func (s *Store) SetCursor(ctx context.Context, c store.Cursor) error {
	_, err := s.namedExec(ctx, `INSERT INTO cursors (name, block_number, block_hash, updated_at)
		VALUES (:name, :block_number, :block_hash, :updated_at)
		ON CONFLICT (name) DO UPDATE SET block_number = excluded.block_number,
			block_hash = excluded.block_hash, updated_at = excluded.updated_at`, c)
	return err
}
