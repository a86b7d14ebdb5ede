-- evmpay schema, PostgreSQL. Wei is NUMERIC(78,0) (any uint256); addresses
-- and hashes are raw bytes; times are TIMESTAMPTZ.

CREATE TABLE merchants (
    id                        BIGSERIAL PRIMARY KEY,
    name                      TEXT        NOT NULL DEFAULT '',
    api_key_digest            BYTEA       NOT NULL UNIQUE,
    api_key_hash              TEXT        NOT NULL,
    api_key_prefix            TEXT        NOT NULL,
    webhook_url               TEXT        NOT NULL DEFAULT '',
    webhook_secret_ciphertext BYTEA       NOT NULL,
    settlement_address        BYTEA       NOT NULL CHECK (length(settlement_address) = 20),
    created_at                TIMESTAMPTZ NOT NULL,
    updated_at                TIMESTAMPTZ NOT NULL,
    disabled_at               TIMESTAMPTZ
);

-- One row per counter; derivation_index hands out deposit-address indexes
-- inside the invoice's transaction, so there is never a gap or a reuse.
CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES ('derivation_index', 0);

CREATE TABLE invoices (
    id                    BIGSERIAL PRIMARY KEY,
    merchant_id           BIGINT        NOT NULL REFERENCES merchants (id),
    status                TEXT          NOT NULL CHECK (status IN ('PENDING', 'PAID', 'CONFIRMED', 'SETTLED', 'EXPIRED')),
    amount_wei            NUMERIC(78,0) NOT NULL CHECK (amount_wei >= 0),
    paid_wei              NUMERIC(78,0) NOT NULL DEFAULT 0 CHECK (paid_wei >= 0),
    chain_id              BIGINT        NOT NULL,
    deposit_address       BYTEA         NOT NULL UNIQUE CHECK (length(deposit_address) = 20),
    derivation_index      BIGINT        NOT NULL UNIQUE CHECK (derivation_index >= 0 AND derivation_index < 2147483648),
    payment_uri           TEXT          NOT NULL,
    order_id              TEXT          NOT NULL DEFAULT '',
    description           TEXT          NOT NULL DEFAULT '',
    metadata              TEXT,
    lookup_token_hash     BYTEA         NOT NULL UNIQUE,
    underpaid             BOOLEAN       NOT NULL DEFAULT FALSE,
    overpaid              BOOLEAN       NOT NULL DEFAULT FALSE,
    paid_late             BOOLEAN       NOT NULL DEFAULT FALSE,
    needs_attention       BOOLEAN       NOT NULL DEFAULT FALSE,
    expires_at            TIMESTAMPTZ   NOT NULL,
    paid_at               TIMESTAMPTZ,
    confirmed_at          TIMESTAMPTZ,
    settled_at            TIMESTAMPTZ,
    created_at            TIMESTAMPTZ   NOT NULL,
    updated_at            TIMESTAMPTZ   NOT NULL,
    sweep_status          TEXT          NOT NULL DEFAULT 'NONE' CHECK (sweep_status IN ('NONE', 'QUEUED', 'FUNDING', 'SENT', 'SWEPT', 'FAILED')),
    sweep_tx_hash         BYTEA,
    sweep_error           TEXT          NOT NULL DEFAULT '',
    swept_wei             NUMERIC(78,0),
    dust_wei              NUMERIC(78,0),
    sweep_attempts        INTEGER       NOT NULL DEFAULT 0,
    sweep_next_attempt_at TIMESTAMPTZ,
    sweep_locked_until    TIMESTAMPTZ,
    version               BIGINT        NOT NULL DEFAULT 1
);
CREATE INDEX invoices_merchant_id ON invoices (merchant_id, id DESC);
CREATE INDEX invoices_merchant_created ON invoices (merchant_id, created_at);
CREATE INDEX invoices_status ON invoices (status);
CREATE INDEX invoices_expiring ON invoices (expires_at) WHERE status = 'PENDING';
CREATE INDEX invoices_sweep_due ON invoices (sweep_next_attempt_at)
    WHERE sweep_status IN ('QUEUED', 'FUNDING', 'SENT');
CREATE INDEX invoices_created ON invoices (created_at);

-- Archived invoices keep every column; their addresses and indexes stay
-- unique so that nothing is ever reused.
CREATE TABLE invoices_archive (LIKE invoices INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE invoices_archive ADD PRIMARY KEY (id);
CREATE UNIQUE INDEX invoices_archive_deposit_address ON invoices_archive (deposit_address);
CREATE UNIQUE INDEX invoices_archive_derivation_index ON invoices_archive (derivation_index);

CREATE TABLE idempotency_keys (
    merchant_id     BIGINT      NOT NULL REFERENCES merchants (id),
    key             TEXT        NOT NULL,
    request_hash    BYTEA       NOT NULL,
    status          TEXT        NOT NULL,
    response_status INTEGER,
    response_body   BYTEA,
    invoice_id      BIGINT,
    locked_until    TIMESTAMPTZ NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (merchant_id, key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);

CREATE TABLE payments (
    id           BIGSERIAL PRIMARY KEY,
    invoice_id   BIGINT        NOT NULL,
    tx_hash      BYTEA         NOT NULL,
    log_index    INTEGER       NOT NULL,
    block_number BIGINT        NOT NULL,
    block_hash   BYTEA         NOT NULL,
    from_address BYTEA         NOT NULL,
    amount_wei   NUMERIC(78,0) NOT NULL CHECK (amount_wei >= 0),
    late         BOOLEAN       NOT NULL DEFAULT FALSE,
    created_at   TIMESTAMPTZ   NOT NULL,
    UNIQUE (tx_hash, log_index)
);
CREATE INDEX payments_invoice ON payments (invoice_id);
CREATE INDEX payments_block ON payments (block_number);

CREATE TABLE blocks (
    number       BIGINT PRIMARY KEY,
    hash         BYTEA         NOT NULL UNIQUE,
    parent_hash  BYTEA         NOT NULL,
    timestamp    BIGINT        NOT NULL,
    miner        BYTEA         NOT NULL,
    gas_limit    BIGINT        NOT NULL,
    gas_used     BIGINT        NOT NULL,
    base_fee_wei NUMERIC(78,0),
    tx_count     INTEGER       NOT NULL,
    indexed_at   TIMESTAMPTZ   NOT NULL
);

-- No foreign key to blocks: rows arrive by COPY in bulk and leave with their
-- block in one transaction (DeleteBlocksFrom).
CREATE TABLE transactions (
    hash                 BYTEA         NOT NULL PRIMARY KEY,
    block_number         BIGINT        NOT NULL,
    block_hash           BYTEA         NOT NULL,
    tx_index             INTEGER       NOT NULL,
    from_address         BYTEA         NOT NULL,
    to_address           BYTEA,
    value_wei            NUMERIC(78,0) NOT NULL,
    nonce                BIGINT        NOT NULL,
    gas                  BIGINT        NOT NULL,
    type                 SMALLINT      NOT NULL,
    gas_price_wei        NUMERIC(78,0),
    max_fee_wei          NUMERIC(78,0),
    max_priority_fee_wei NUMERIC(78,0),
    input                BYTEA         NOT NULL
);
CREATE INDEX transactions_block ON transactions (block_number, tx_index);
CREATE INDEX transactions_to ON transactions (to_address, block_number, tx_index);
CREATE INDEX transactions_from ON transactions (from_address, block_number, tx_index);

CREATE TABLE reorgs (
    id          BIGSERIAL PRIMARY KEY,
    fork_block  BIGINT      NOT NULL,
    depth       INTEGER     NOT NULL,
    old_hashes  TEXT        NOT NULL,
    new_hashes  TEXT        NOT NULL,
    detected_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE cursors (
    name         TEXT PRIMARY KEY,
    block_number BIGINT      NOT NULL,
    block_hash   BYTEA       NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);

CREATE TABLE events (
    id            BIGSERIAL PRIMARY KEY,
    type          TEXT        NOT NULL,
    merchant_id   BIGINT      NOT NULL,
    invoice_id    BIGINT      NOT NULL,
    data          TEXT        NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    dispatched_at TIMESTAMPTZ
);
CREATE INDEX events_invoice ON events (invoice_id, id);
CREATE INDEX events_undispatched ON events (id) WHERE dispatched_at IS NULL;

CREATE TABLE webhook_deliveries (
    id              BIGSERIAL PRIMARY KEY,
    event_id        BIGINT      NOT NULL UNIQUE REFERENCES events (id),
    merchant_id     BIGINT      NOT NULL,
    invoice_id      BIGINT      NOT NULL,
    event_type      TEXT        NOT NULL,
    status          TEXT        NOT NULL,
    delivered       BOOLEAN     NOT NULL DEFAULT FALSE,
    response_status INTEGER,
    attempt         INTEGER     NOT NULL DEFAULT 0,
    last_attempt_at TIMESTAMPTZ,
    next_attempt_at TIMESTAMPTZ,
    last_error      TEXT        NOT NULL DEFAULT '',
    locked_until    TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX webhook_deliveries_merchant ON webhook_deliveries (merchant_id, status, id);

CREATE TABLE sweep_txs (
    id                   BIGSERIAL PRIMARY KEY,
    invoice_id           BIGINT,
    kind                 TEXT          NOT NULL,
    from_address         BYTEA         NOT NULL,
    to_address           BYTEA         NOT NULL,
    nonce                BIGINT        NOT NULL,
    value_wei            NUMERIC(78,0) NOT NULL,
    gas_limit            BIGINT        NOT NULL,
    max_fee_wei          NUMERIC(78,0) NOT NULL,
    max_priority_fee_wei NUMERIC(78,0) NOT NULL,
    tx_hash              BYTEA         NOT NULL UNIQUE,
    raw_tx               BYTEA         NOT NULL,
    status               TEXT          NOT NULL,
    block_number         BIGINT,
    gas_used             BIGINT,
    fee_wei              NUMERIC(78,0),
    created_at           TIMESTAMPTZ   NOT NULL,
    updated_at           TIMESTAMPTZ   NOT NULL,
    sent_at              TIMESTAMPTZ,
    mined_at             TIMESTAMPTZ
);
CREATE INDEX sweep_txs_invoice ON sweep_txs (invoice_id, id);
CREATE INDEX sweep_txs_status ON sweep_txs (status, id);
CREATE INDEX sweep_txs_from_mined ON sweep_txs (from_address, mined_at);

CREATE TABLE wallet_nonces (
    address    BYTEA PRIMARY KEY,
    next_nonce BIGINT NOT NULL
);
