package invoice

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/evmpay/evmpay/store"
)

// The merchant's checkout branding in the Go API (issue #35: the
// dashboard's branding page), validated by the HTTP API's parser.

// Branding is a merchant's checkout branding: AccentColor "#rrggbb" or "",
// the logo's bytes and type (nil: none). UpdatedAt is nil when never set.
type Branding struct {
	AccentColor     string
	Logo            []byte
	LogoContentType string
	UpdatedAt       *time.Time
}

// Branding returns merchant merchantID's branding.
func (s *Service) Branding(ctx context.Context, merchantID int64) (Branding, error) {
	b, err := s.st.GetMerchantBranding(ctx, merchantID)
	if errors.Is(err, store.ErrNotFound) {
		return Branding{}, nil
	}
	if err != nil {
		return Branding{}, err
	}
	out := Branding{AccentColor: b.AccentColor, Logo: b.Logo, LogoContentType: b.LogoContentType}
	if !b.UpdatedAt.IsZero() {
		t := b.UpdatedAt.UTC()
		out.UpdatedAt = &t
	}
	return out, nil
}

// PutBranding replaces p's merchant's branding, as PUT
// /v1/merchant/branding does: accentColor "#rrggbb" ("" for none) and
// logo a data: URL of a PNG or JPEG ("" for none), checked alike.
func (s *Service) PutBranding(ctx context.Context, p Principal, accentColor, logo string) (Branding, error) {
	body := map[string]any{"accent_color": nil, "logo": nil}
	if accentColor != "" {
		body["accent_color"] = accentColor
	}
	if logo != "" {
		body["logo"] = logo
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return Branding{}, err
	}
	b, perr := parseBranding(raw)
	if perr != nil {
		return Branding{}, perr
	}
	b.MerchantID, b.UpdatedAt = p.Merchant.ID, s.cfg.Now().UTC().Truncate(time.Microsecond)
	if err := s.st.PutMerchantBranding(ctx, b); err != nil {
		return Branding{}, err
	}
	return s.Branding(ctx, p.Merchant.ID)
}
