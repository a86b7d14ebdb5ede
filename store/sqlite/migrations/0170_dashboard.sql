-- The merchant dashboard (issue #35). See the PostgreSQL migration of the
-- same number for the reasons; this is the same schema in SQLite's types.

CREATE TABLE dashboard_users (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    merchant_id     BIGINT    NOT NULL REFERENCES merchants (id),
    email           TEXT      NOT NULL UNIQUE CHECK (email = lower(email) AND email <> ''),
    name            TEXT      NOT NULL DEFAULT '',
    role            TEXT      NOT NULL CHECK (role IN ('owner', 'approver', 'accountant', 'developer', 'viewer')),
    password_hash   TEXT      NOT NULL DEFAULT '',
    totp_secret     BLOB,
    totp_enabled_at TIMESTAMP,
    totp_last_step  BIGINT    NOT NULL DEFAULT 0,
    failed_sign_ins INTEGER   NOT NULL DEFAULT 0,
    locked_until    TIMESTAMP,
    webauthn_id     BLOB      NOT NULL UNIQUE,
    disabled_at     TIMESTAMP,
    created_at      TIMESTAMP NOT NULL,
    updated_at      TIMESTAMP NOT NULL
);
CREATE INDEX dashboard_users_merchant ON dashboard_users (merchant_id, id);

CREATE TABLE dashboard_sessions (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    token_hash       BLOB      NOT NULL UNIQUE,
    user_id          BIGINT    NOT NULL REFERENCES dashboard_users (id),
    merchant_id      BIGINT    NOT NULL REFERENCES merchants (id),
    created_at       TIMESTAMP NOT NULL,
    last_seen_at     TIMESTAMP NOT NULL,
    expires_at       TIMESTAMP NOT NULL,
    second_factor_at TIMESTAMP,
    pending          BOOLEAN   NOT NULL DEFAULT FALSE,
    user_agent       TEXT      NOT NULL DEFAULT '',
    revoked_at       TIMESTAMP
);
CREATE INDEX dashboard_sessions_user ON dashboard_sessions (user_id, id);

CREATE TABLE dashboard_passkeys (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id       BIGINT    NOT NULL REFERENCES dashboard_users (id),
    credential_id BLOB      NOT NULL UNIQUE,
    name          TEXT      NOT NULL DEFAULT '',
    credential    BLOB      NOT NULL,
    created_at    TIMESTAMP NOT NULL,
    last_used_at  TIMESTAMP
);
CREATE INDEX dashboard_passkeys_user ON dashboard_passkeys (user_id, id);

CREATE TABLE dashboard_links (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT      NOT NULL CHECK (kind IN ('invitation', 'reset', 'sign_in')),
    token_hash  BLOB      NOT NULL UNIQUE,
    merchant_id BIGINT    NOT NULL REFERENCES merchants (id),
    user_id     BIGINT    REFERENCES dashboard_users (id),
    email       TEXT      NOT NULL DEFAULT '',
    role        TEXT      NOT NULL DEFAULT '',
    created_by  TEXT      NOT NULL DEFAULT '',
    created_at  TIMESTAMP NOT NULL,
    expires_at  TIMESTAMP NOT NULL,
    used_at     TIMESTAMP,
    CHECK ((kind = 'invitation') = (user_id IS NULL))
);
CREATE INDEX dashboard_links_merchant ON dashboard_links (merchant_id, id);

CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    merchant_id BIGINT    NOT NULL REFERENCES merchants (id),
    user_id     BIGINT    REFERENCES dashboard_users (id),
    actor       TEXT      NOT NULL,
    action      TEXT      NOT NULL,
    subject     TEXT      NOT NULL DEFAULT '',
    detail      TEXT      NOT NULL DEFAULT '',
    at          TIMESTAMP NOT NULL
);
CREATE INDEX audit_log_merchant ON audit_log (merchant_id, id);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;

CREATE TABLE payment_links (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    merchant_id    BIGINT    NOT NULL REFERENCES merchants (id),
    slug           TEXT      NOT NULL UNIQUE,
    name           TEXT      NOT NULL,
    description    TEXT      NOT NULL DEFAULT '',
    asset          TEXT      NOT NULL DEFAULT '',
    amount         TEXT,
    min_amount     TEXT,
    max_amount     TEXT,
    price_amount   TEXT      NOT NULL DEFAULT '',
    price_currency TEXT      NOT NULL DEFAULT '',
    active         BOOLEAN   NOT NULL DEFAULT TRUE,
    created_at     TIMESTAMP NOT NULL,
    updated_at     TIMESTAMP NOT NULL,
    disabled_at    TIMESTAMP
);
CREATE INDEX payment_links_merchant ON payment_links (merchant_id, id);

CREATE TABLE payment_link_invoices (
    link_id    BIGINT NOT NULL REFERENCES payment_links (id),
    invoice_id BIGINT NOT NULL UNIQUE,
    PRIMARY KEY (link_id, invoice_id)
);

ALTER TABLE outbounds ADD COLUMN created_by_user BIGINT NOT NULL DEFAULT 0;
ALTER TABLE outbounds ADD COLUMN approved_by_user BIGINT;

-- The dashboard's search by order id, within a merchant.
CREATE INDEX invoices_merchant_order ON invoices (merchant_id, order_id) WHERE order_id <> '';
