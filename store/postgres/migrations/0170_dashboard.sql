-- The merchant dashboard (issue #35, docs/dashboard.md): people who sign in
-- for a merchant, their sessions and second factors, one-time links, the
-- audit log, payment links; and the person behind a refund's or payout's
-- creation and approval, so that a second *person* approves it.

CREATE TABLE dashboard_users (
    id              BIGSERIAL PRIMARY KEY,
    merchant_id     BIGINT      NOT NULL REFERENCES merchants (id),
    email           TEXT        NOT NULL UNIQUE CHECK (email = lower(email) AND email <> ''),
    name            TEXT        NOT NULL DEFAULT '',
    role            TEXT        NOT NULL CHECK (role IN ('owner', 'approver', 'accountant', 'developer', 'viewer')),
    password_hash   TEXT        NOT NULL DEFAULT '',
    -- Sealed (AES-256-GCM) like webhook secrets: never in the clear.
    totp_secret     BYTEA,
    totp_enabled_at TIMESTAMPTZ,
    totp_last_step  BIGINT      NOT NULL DEFAULT 0,
    failed_sign_ins INTEGER     NOT NULL DEFAULT 0,
    locked_until    TIMESTAMPTZ,
    webauthn_id     BYTEA       NOT NULL UNIQUE,
    disabled_at     TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX dashboard_users_merchant ON dashboard_users (merchant_id, id);

CREATE TABLE dashboard_sessions (
    id               BIGSERIAL PRIMARY KEY,
    token_hash       BYTEA       NOT NULL UNIQUE,
    user_id          BIGINT      NOT NULL REFERENCES dashboard_users (id),
    merchant_id      BIGINT      NOT NULL REFERENCES merchants (id),
    created_at       TIMESTAMPTZ NOT NULL,
    last_seen_at     TIMESTAMPTZ NOT NULL,
    expires_at       TIMESTAMPTZ NOT NULL,
    second_factor_at TIMESTAMPTZ,
    pending          BOOLEAN     NOT NULL DEFAULT FALSE,
    user_agent       TEXT        NOT NULL DEFAULT '',
    revoked_at       TIMESTAMPTZ
);
CREATE INDEX dashboard_sessions_user ON dashboard_sessions (user_id, id);

CREATE TABLE dashboard_passkeys (
    id            BIGSERIAL PRIMARY KEY,
    user_id       BIGINT      NOT NULL REFERENCES dashboard_users (id),
    credential_id BYTEA       NOT NULL UNIQUE,
    name          TEXT        NOT NULL DEFAULT '',
    credential    BYTEA       NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    last_used_at  TIMESTAMPTZ
);
CREATE INDEX dashboard_passkeys_user ON dashboard_passkeys (user_id, id);

CREATE TABLE dashboard_links (
    id          BIGSERIAL PRIMARY KEY,
    kind        TEXT        NOT NULL CHECK (kind IN ('invitation', 'reset', 'sign_in')),
    token_hash  BYTEA       NOT NULL UNIQUE,
    merchant_id BIGINT      NOT NULL REFERENCES merchants (id),
    user_id     BIGINT      REFERENCES dashboard_users (id),
    email       TEXT        NOT NULL DEFAULT '',
    role        TEXT        NOT NULL DEFAULT '',
    created_by  TEXT        NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    used_at     TIMESTAMPTZ,
    CHECK ((kind = 'invitation') = (user_id IS NULL))
);
CREATE INDEX dashboard_links_merchant ON dashboard_links (merchant_id, id);

-- Append-only: a trigger refuses UPDATE and DELETE.
CREATE TABLE audit_log (
    id          BIGSERIAL PRIMARY KEY,
    merchant_id BIGINT      NOT NULL REFERENCES merchants (id),
    user_id     BIGINT      REFERENCES dashboard_users (id),
    actor       TEXT        NOT NULL,
    action      TEXT        NOT NULL,
    subject     TEXT        NOT NULL DEFAULT '',
    detail      TEXT        NOT NULL DEFAULT '',
    at          TIMESTAMPTZ NOT NULL
);
CREATE INDEX audit_log_merchant ON audit_log (merchant_id, id);
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only' USING ERRCODE = 'check_violation';
END $$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

CREATE TABLE payment_links (
    id             BIGSERIAL PRIMARY KEY,
    merchant_id    BIGINT        NOT NULL REFERENCES merchants (id),
    slug           TEXT          NOT NULL UNIQUE,
    name           TEXT          NOT NULL,
    description    TEXT          NOT NULL DEFAULT '',
    asset          TEXT          NOT NULL DEFAULT '',
    amount         NUMERIC(78,0),
    min_amount     NUMERIC(78,0),
    max_amount     NUMERIC(78,0),
    price_amount   TEXT          NOT NULL DEFAULT '',
    price_currency TEXT          NOT NULL DEFAULT '',
    active         BOOLEAN       NOT NULL DEFAULT TRUE,
    created_at     TIMESTAMPTZ   NOT NULL,
    updated_at     TIMESTAMPTZ   NOT NULL,
    disabled_at    TIMESTAMPTZ
);
CREATE INDEX payment_links_merchant ON payment_links (merchant_id, id);

CREATE TABLE payment_link_invoices (
    link_id    BIGINT NOT NULL REFERENCES payment_links (id),
    invoice_id BIGINT NOT NULL UNIQUE,
    PRIMARY KEY (link_id, invoice_id)
);

-- The person behind an outbound: 0 / NULL for none (an API key alone).
ALTER TABLE outbounds ADD COLUMN created_by_user BIGINT NOT NULL DEFAULT 0;
ALTER TABLE outbounds ADD COLUMN approved_by_user BIGINT;

-- The dashboard's search by order id, within a merchant.
CREATE INDEX invoices_merchant_order ON invoices (merchant_id, order_id) WHERE order_id <> '';

-- The dashboard's overview: what each merchant's invoices took per day
-- (of creation, UTC) and asset, maintained by a trigger in the same
-- transaction as every invoice insert and paid_wei change (exact NUMERIC
-- arithmetic), so that the overview reads 30 rows, never scans invoices.
-- Archiving (a DELETE) keeps what the archived invoices took.
CREATE TABLE invoice_daily (
    merchant_id BIGINT        NOT NULL,
    day         DATE          NOT NULL,
    token       BYTEA         NOT NULL, -- '' for the native coin
    invoices    BIGINT        NOT NULL,
    paid        NUMERIC(78,0) NOT NULL,
    PRIMARY KEY (merchant_id, day, token)
);
CREATE FUNCTION invoice_daily_roll() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d_invoices BIGINT := 0;
    d_paid     NUMERIC(78,0);
BEGIN
    IF TG_OP = 'INSERT' THEN
        d_invoices := 1;
        d_paid := NEW.paid_wei;
    ELSE
        d_paid := NEW.paid_wei - OLD.paid_wei;
        IF d_paid = 0 THEN
            RETURN NULL;
        END IF;
    END IF;
    INSERT INTO invoice_daily AS r (merchant_id, day, token, invoices, paid)
    VALUES (NEW.merchant_id, (NEW.created_at AT TIME ZONE 'UTC')::date, COALESCE(NEW.token_address, '\x'::bytea), d_invoices, d_paid)
    ON CONFLICT (merchant_id, day, token) DO UPDATE SET invoices = r.invoices + EXCLUDED.invoices, paid = r.paid + EXCLUDED.paid;
    RETURN NULL;
END $$;
CREATE TRIGGER invoice_daily_roll AFTER INSERT OR UPDATE OF paid_wei ON invoices
    FOR EACH ROW EXECUTE FUNCTION invoice_daily_roll();
INSERT INTO invoice_daily (merchant_id, day, token, invoices, paid)
SELECT merchant_id, (created_at AT TIME ZONE 'UTC')::date, COALESCE(token_address, '\x'::bytea), count(*), sum(paid_wei)
FROM (SELECT merchant_id, created_at, token_address, paid_wei FROM invoices
      UNION ALL SELECT merchant_id, created_at, token_address, paid_wei FROM invoices_archive) a
GROUP BY 1, 2, 3;
