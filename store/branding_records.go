package store

import (
	"context"
	"time"
)

// MerchantBranding is how the hosted checkout page presents a merchant:
// its accent colour and its logo, uploaded through the invoice API and
// served by the service itself. A merchant without a row has neither.
type MerchantBranding struct {
	MerchantID int64 `db:"merchant_id"`
	// AccentColor is "#rrggbb" (lower case), or "" for the page's own.
	AccentColor string `db:"accent_color"`
	// Logo is the image's bytes, nil for none; LogoContentType its media
	// type ("image/png" or "image/jpeg"), checked against
	// the bytes by the invoice package before it is stored.
	Logo            []byte    `db:"logo"`
	LogoContentType string    `db:"logo_content_type"`
	UpdatedAt       time.Time `db:"updated_at"`
}

// BrandingStore keeps merchants' branding.
type BrandingStore interface {
	// GetMerchantBranding returns the merchant's branding; ErrNotFound
	// when it has never set any.
	GetMerchantBranding(ctx context.Context, merchantID int64) (MerchantBranding, error)
	// PutMerchantBranding inserts or replaces the merchant's branding
	// (every field). ErrNotFound when no such merchant exists.
	PutMerchantBranding(ctx context.Context, b MerchantBranding) error
}
