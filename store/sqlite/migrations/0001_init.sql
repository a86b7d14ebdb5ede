-- evmpay schema, SQLite. Wei is decimal TEXT (SQLite has no exact 256-bit
-- numbers: amounts are compared and summed in Go, never in SQL); addresses
-- and hashes are BLOBs; times are integers of microseconds since the epoch
-- in TIMESTAMP columns (the driver converts them).

CREATE TABLE merchants (
    id                        INTEGER PRIMARY KEY AUTOINCREMENT,
    name                      TEXT        NOT NULL DEFAULT '',
    api_key_digest            BLOB        NOT NULL UNIQUE,
    api_key_hash              TEXT        NOT NULL,
    api_key_prefix            TEXT        NOT NULL,
    webhook_url               TEXT        NOT NULL DEFAULT '',
    webhook_secret_ciphertext BLOB        NOT NULL,
    settlement_address        BLOB        NOT NULL CHECK (length(settlement_address) = 20),
    created_at                TIMESTAMP   NOT NULL,
    updated_at                TIMESTAMP   NOT NULL,
    disabled_at               TIMESTAMP
);

-- One row per counter; derivation_index hands out deposit-address indexes
-- inside the invoice's transaction, so there is never a gap or a reuse.
CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES ('derivation_index', 0);

CREATE TABLE invoices (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    merchant_id           BIGINT        NOT NULL REFERENCES merchants (id),
    status                TEXT          NOT NULL CHECK (status IN ('PENDING', 'PAID', 'CONFIRMED', 'SETTLED', 'EXPIRED')),
    amount_wei            TEXT          NOT NULL,
    paid_wei              TEXT          NOT NULL DEFAULT '0',
    chain_id              BIGINT        NOT NULL,
    deposit_address       BLOB          NOT NULL UNIQUE CHECK (length(deposit_address) = 20),
    derivation_index      BIGINT        NOT NULL UNIQUE CHECK (derivation_index >= 0 AND derivation_index < 2147483648),
    payment_uri           TEXT          NOT NULL,
    order_id              TEXT          NOT NULL DEFAULT '',
    description           TEXT          NOT NULL DEFAULT '',
    metadata              TEXT,
    lookup_token_hash     BLOB          NOT NULL UNIQUE,
    underpaid             INTEGER       NOT NULL DEFAULT 0,
    overpaid              INTEGER       NOT NULL DEFAULT 0,
    paid_late             INTEGER       NOT NULL DEFAULT 0,
    needs_attention       INTEGER       NOT NULL DEFAULT 0,
    expires_at            TIMESTAMP     NOT NULL,
    paid_at               TIMESTAMP,
    confirmed_at          TIMESTAMP,
    settled_at            TIMESTAMP,
    created_at            TIMESTAMP     NOT NULL,
    updated_at            TIMESTAMP     NOT NULL,
    sweep_status          TEXT          NOT NULL DEFAULT 'NONE' CHECK (sweep_status IN ('NONE', 'QUEUED', 'FUNDING', 'SENT', 'SWEPT', 'FAILED')),
    sweep_tx_hash         BLOB,
    sweep_error           TEXT          NOT NULL DEFAULT '',
    swept_wei             TEXT,
    dust_wei              TEXT,
    sweep_attempts        INTEGER       NOT NULL DEFAULT 0,
    sweep_next_attempt_at TIMESTAMP,
    sweep_locked_until    TIMESTAMP,
    version               BIGINT        NOT NULL DEFAULT 1
);
CREATE INDEX invoices_merchant_id ON invoices (merchant_id, id);
CREATE INDEX invoices_merchant_created ON invoices (merchant_id, created_at);
CREATE INDEX invoices_status ON invoices (status);
CREATE INDEX invoices_expiring ON invoices (expires_at) WHERE status = 'PENDING';
CREATE INDEX invoices_sweep_due ON invoices (sweep_next_attempt_at)
    WHERE sweep_status IN ('QUEUED', 'FUNDING', 'SENT');
CREATE INDEX invoices_created ON invoices (created_at);

-- Archived invoices keep every column; their addresses and indexes stay
-- unique so that nothing is ever reused.
CREATE TABLE invoices_archive (
    id                    INTEGER PRIMARY KEY,
    merchant_id           BIGINT        NOT NULL,
    status                TEXT          NOT NULL CHECK (status IN ('PENDING', 'PAID', 'CONFIRMED', 'SETTLED', 'EXPIRED')),
    amount_wei            TEXT          NOT NULL,
    paid_wei              TEXT          NOT NULL DEFAULT '0',
    chain_id              BIGINT        NOT NULL,
    deposit_address       BLOB          NOT NULL UNIQUE CHECK (length(deposit_address) = 20),
    derivation_index      BIGINT        NOT NULL UNIQUE CHECK (derivation_index >= 0 AND derivation_index < 2147483648),
    payment_uri           TEXT          NOT NULL,
    order_id              TEXT          NOT NULL DEFAULT '',
    description           TEXT          NOT NULL DEFAULT '',
    metadata              TEXT,
    lookup_token_hash     BLOB          NOT NULL UNIQUE,
    underpaid             INTEGER       NOT NULL DEFAULT 0,
    overpaid              INTEGER       NOT NULL DEFAULT 0,
    paid_late             INTEGER       NOT NULL DEFAULT 0,
    needs_attention       INTEGER       NOT NULL DEFAULT 0,
    expires_at            TIMESTAMP     NOT NULL,
    paid_at               TIMESTAMP,
    confirmed_at          TIMESTAMP,
    settled_at            TIMESTAMP,
    created_at            TIMESTAMP     NOT NULL,
    updated_at            TIMESTAMP     NOT NULL,
    sweep_status          TEXT          NOT NULL DEFAULT 'NONE' CHECK (sweep_status IN ('NONE', 'QUEUED', 'FUNDING', 'SENT', 'SWEPT', 'FAILED')),
    sweep_tx_hash         BLOB,
    sweep_error           TEXT          NOT NULL DEFAULT '',
    swept_wei             TEXT,
    dust_wei              TEXT,
    sweep_attempts        INTEGER       NOT NULL DEFAULT 0,
    sweep_next_attempt_at TIMESTAMP,
    sweep_locked_until    TIMESTAMP,
    version               BIGINT        NOT NULL DEFAULT 1
);

CREATE TABLE idempotency_keys (
    merchant_id     BIGINT      NOT NULL REFERENCES merchants (id),
    key             TEXT        NOT NULL,
    request_hash    BLOB        NOT NULL,
    status          TEXT        NOT NULL,
    response_status INTEGER,
    response_body   BLOB,
    invoice_id      BIGINT,
    locked_until    TIMESTAMP   NOT NULL,
    created_at      TIMESTAMP   NOT NULL,
    expires_at      TIMESTAMP   NOT NULL,
    PRIMARY KEY (merchant_id, key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);

CREATE TABLE payments (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    invoice_id   BIGINT        NOT NULL,
    tx_hash      BLOB          NOT NULL,
    log_index    INTEGER       NOT NULL,
    block_number BIGINT        NOT NULL,
    block_hash   BLOB          NOT NULL,
    from_address BLOB          NOT NULL,
    amount_wei   TEXT          NOT NULL,
    late         INTEGER       NOT NULL DEFAULT 0,
    created_at   TIMESTAMP     NOT NULL,
    UNIQUE (tx_hash, log_index)
);
CREATE INDEX payments_invoice ON payments (invoice_id);
CREATE INDEX payments_block ON payments (block_number);

CREATE TABLE blocks (
    number       BIGINT PRIMARY KEY,
    hash         BLOB          NOT NULL UNIQUE,
    parent_hash  BLOB          NOT NULL,
    timestamp    BIGINT        NOT NULL,
    miner        BLOB          NOT NULL,
    gas_limit    BIGINT        NOT NULL,
    gas_used     BIGINT        NOT NULL,
    base_fee_wei TEXT,
    tx_count     INTEGER       NOT NULL,
    indexed_at   TIMESTAMP     NOT NULL
);

-- No foreign key to blocks: rows arrive by COPY in bulk and leave with their
-- block in one transaction (DeleteBlocksFrom).
CREATE TABLE transactions (
    hash                 BLOB          NOT NULL PRIMARY KEY,
    block_number         BIGINT        NOT NULL,
    block_hash           BLOB          NOT NULL,
    tx_index             INTEGER       NOT NULL,
    from_address         BLOB          NOT NULL,
    to_address           BLOB,
    value_wei            TEXT          NOT NULL,
    nonce                BIGINT        NOT NULL,
    gas                  BIGINT        NOT NULL,
    type                 INTEGER       NOT NULL,
    gas_price_wei        TEXT,
    max_fee_wei          TEXT,
    max_priority_fee_wei TEXT,
    input                BLOB          NOT NULL
);
CREATE INDEX transactions_block ON transactions (block_number, tx_index);
CREATE INDEX transactions_to ON transactions (to_address, block_number, tx_index);
CREATE INDEX transactions_from ON transactions (from_address, block_number, tx_index);

CREATE TABLE reorgs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    fork_block  BIGINT      NOT NULL,
    depth       INTEGER     NOT NULL,
    old_hashes  TEXT        NOT NULL,
    new_hashes  TEXT        NOT NULL,
    detected_at TIMESTAMP   NOT NULL
);

CREATE TABLE cursors (
    name         TEXT PRIMARY KEY,
    block_number BIGINT      NOT NULL,
    block_hash   BLOB        NOT NULL,
    updated_at   TIMESTAMP   NOT NULL
);

CREATE TABLE events (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    type          TEXT        NOT NULL,
    merchant_id   BIGINT      NOT NULL,
    invoice_id    BIGINT      NOT NULL,
    data          TEXT        NOT NULL,
    created_at    TIMESTAMP   NOT NULL,
    dispatched_at TIMESTAMP
);
CREATE INDEX events_invoice ON events (invoice_id, id);
CREATE INDEX events_undispatched ON events (id) WHERE dispatched_at IS NULL;

CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        BIGINT      NOT NULL UNIQUE REFERENCES events (id),
    merchant_id     BIGINT      NOT NULL,
    invoice_id      BIGINT      NOT NULL,
    event_type      TEXT        NOT NULL,
    status          TEXT        NOT NULL,
    delivered       INTEGER     NOT NULL DEFAULT 0,
    response_status INTEGER,
    attempt         INTEGER     NOT NULL DEFAULT 0,
    last_attempt_at TIMESTAMP,
    next_attempt_at TIMESTAMP,
    last_error      TEXT        NOT NULL DEFAULT '',
    locked_until    TIMESTAMP,
    created_at      TIMESTAMP   NOT NULL,
    updated_at      TIMESTAMP   NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX webhook_deliveries_merchant ON webhook_deliveries (merchant_id, status, id);

CREATE TABLE sweep_txs (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    invoice_id           BIGINT,
    kind                 TEXT          NOT NULL,
    from_address         BLOB          NOT NULL,
    to_address           BLOB          NOT NULL,
    nonce                BIGINT        NOT NULL,
    value_wei            TEXT          NOT NULL,
    gas_limit            BIGINT        NOT NULL,
    max_fee_wei          TEXT          NOT NULL,
    max_priority_fee_wei TEXT          NOT NULL,
    tx_hash              BLOB          NOT NULL UNIQUE,
    raw_tx               BLOB          NOT NULL,
    status               TEXT          NOT NULL,
    block_number         BIGINT,
    gas_used             BIGINT,
    fee_wei              TEXT,
    created_at           TIMESTAMP     NOT NULL,
    updated_at           TIMESTAMP     NOT NULL,
    sent_at              TIMESTAMP,
    mined_at             TIMESTAMP
);
CREATE INDEX sweep_txs_invoice ON sweep_txs (invoice_id, id);
CREATE INDEX sweep_txs_status ON sweep_txs (status, id);
CREATE INDEX sweep_txs_from_mined ON sweep_txs (from_address, mined_at);

CREATE TABLE wallet_nonces (
    address    BLOB  PRIMARY KEY,
    next_nonce BIGINT NOT NULL
);
