-- Checkout branding: a merchant's accent colour and logo, uploaded through
-- the invoice API (PUT /v1/merchant/branding) and served by the service
-- itself to the hosted checkout page. The logo's type and size are checked
-- by the invoice package before it is stored (PNG or JPEG, at most
-- 32 KiB); the CHECKs here are the last line.
CREATE TABLE merchant_branding (
    merchant_id       BIGINT      PRIMARY KEY REFERENCES merchants (id),
    accent_color      TEXT        NOT NULL DEFAULT '' CHECK (accent_color = '' OR accent_color ~ '^#[0-9a-f]{6}$'),
    logo              BYTEA       CHECK (logo IS NULL OR length(logo) <= 65536),
    logo_content_type TEXT        NOT NULL DEFAULT '' CHECK (logo_content_type IN ('', 'image/png', 'image/jpeg')),
    updated_at        TIMESTAMPTZ NOT NULL
);
