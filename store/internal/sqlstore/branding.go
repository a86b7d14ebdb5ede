package sqlstore

import (
	"context"

	"github.com/evmpay/evmpay/store"
)

// GetMerchantBranding implements store.BrandingStore.
func (s *Store) GetMerchantBranding(ctx context.Context, merchantID int64) (store.MerchantBranding, error) {
	var b store.MerchantBranding
	err := s.get(ctx, &b, `SELECT merchant_id, accent_color, logo, logo_content_type, updated_at
		FROM merchant_branding WHERE merchant_id = ?`, merchantID)
	return b, err
}

// PutMerchantBranding implements store.BrandingStore.
func (s *Store) PutMerchantBranding(ctx context.Context, b store.MerchantBranding) error {
	return s.withTx(ctx, func(s *Store) error {
		var id int64
		if err := s.get(ctx, &id, `SELECT id FROM merchants WHERE id = ?`, b.MerchantID); err != nil {
			return err
		}
		_, err := s.namedExec(ctx, `
			INSERT INTO merchant_branding (merchant_id, accent_color, logo, logo_content_type, updated_at)
			VALUES (:merchant_id, :accent_color, :logo, :logo_content_type, :updated_at)
			ON CONFLICT (merchant_id) DO UPDATE SET accent_color = excluded.accent_color, logo = excluded.logo,
				logo_content_type = excluded.logo_content_type, updated_at = excluded.updated_at`, b)
		return err
	})
}
