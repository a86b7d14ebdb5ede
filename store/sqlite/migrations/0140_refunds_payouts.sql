-- Refunds and payouts on one outbound engine, with a ledger of every
-- movement (issue 26, docs/refunds.md). See the PostgreSQL migration of the
-- same number for the reasons; this is the same schema in SQLite's types.

CREATE TABLE api_keys (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    merchant_id BIGINT    NOT NULL REFERENCES merchants (id),
    name        TEXT      NOT NULL DEFAULT '',
    digest      BLOB      NOT NULL UNIQUE,
    hash        TEXT      NOT NULL,
    prefix      TEXT      NOT NULL,
    scopes      TEXT      NOT NULL,
    created_at  TIMESTAMP NOT NULL,
    revoked_at  TIMESTAMP
);
CREATE INDEX api_keys_merchant ON api_keys (merchant_id, id);

CREATE TABLE payout_policies (
    merchant_id BIGINT    PRIMARY KEY REFERENCES merchants (id),
    policy      TEXT      NOT NULL,
    updated_at  TIMESTAMP NOT NULL
);

CREATE TABLE service_wallets (
    address     BLOB      PRIMARY KEY CHECK (length(address) = 20),
    role        TEXT      NOT NULL CHECK (role IN ('payout', 'sweep', 'funder')),
    merchant_id BIGINT    UNIQUE REFERENCES merchants (id),
    created_at  TIMESTAMP NOT NULL,
    -- The block of the wallet's opening balance in the ledger: it holds
    -- every movement of the blocks up to it; null before the ledger starts.
    ledger_from_block BIGINT CHECK (ledger_from_block >= 0),
    CHECK ((role = 'payout') = (merchant_id IS NOT NULL))
);

CREATE TABLE outbounds (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT      NOT NULL CHECK (kind IN ('REFUND', 'PAYOUT')),
    merchant_id      BIGINT    NOT NULL REFERENCES merchants (id),
    invoice_id       BIGINT,
    batch_id         TEXT      NOT NULL DEFAULT '',
    reason           TEXT      NOT NULL DEFAULT '',
    reference        TEXT      NOT NULL DEFAULT '',
    token_address    BLOB      CHECK (token_address IS NULL OR length(token_address) = 20),
    asset_symbol     TEXT      NOT NULL,
    asset_decimals   INTEGER   NOT NULL CHECK (asset_decimals BETWEEN 0 AND 77),
    amount           TEXT      NOT NULL CHECK (amount <> '0'),
    fiat_currency    TEXT      NOT NULL DEFAULT '',
    fiat_minor       TEXT,
    fiat_rate        TEXT      NOT NULL DEFAULT '',
    fiat_rate_kind   TEXT      NOT NULL DEFAULT '',
    destination      BLOB      CHECK (destination IS NULL OR length(destination) = 20),
    payment_uri      TEXT          NOT NULL DEFAULT '',
    paid_by          TEXT      NOT NULL CHECK (paid_by IN ('SERVICE', 'MERCHANT')),
    source           TEXT      NOT NULL DEFAULT '' CHECK (source IN ('', 'PAYOUT_WALLET', 'DEPOSIT')),
    from_address     BLOB,
    status           TEXT      NOT NULL CHECK (status IN ('AWAITING_DESTINATION', 'AWAITING_APPROVAL', 'QUEUED',
                                   'AWAITING_PAYMENT', 'BROADCAST', 'CONFIRMED', 'FAILED', 'CANCELLED')),
    error            TEXT      NOT NULL DEFAULT '',
    claim_token_hash BLOB      UNIQUE,
    created_by_key   BIGINT    NOT NULL DEFAULT 0,
    needs_approval   INTEGER   NOT NULL DEFAULT 0,
    approved_by_key  BIGINT,
    approved_at      TIMESTAMP,
    tx_hash          BLOB,
    log_index        INTEGER,
    block_number     BIGINT,
    created_block    BIGINT    NOT NULL DEFAULT 0,
    attempts         INTEGER   NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMP,
    locked_until     TIMESTAMP,
    created_at       TIMESTAMP NOT NULL,
    updated_at       TIMESTAMP NOT NULL,
    broadcast_at     TIMESTAMP,
    confirmed_at     TIMESTAMP,
    version          BIGINT    NOT NULL DEFAULT 1,
    CHECK ((kind = 'REFUND') = (invoice_id IS NOT NULL)),
    CHECK (destination IS NOT NULL OR status IN ('AWAITING_DESTINATION', 'CANCELLED', 'FAILED'))
);
CREATE INDEX outbounds_merchant ON outbounds (merchant_id, kind, id);
CREATE INDEX outbounds_merchant_created ON outbounds (merchant_id, created_at);
CREATE INDEX outbounds_invoice ON outbounds (invoice_id) WHERE invoice_id IS NOT NULL;
CREATE INDEX outbounds_due ON outbounds (next_attempt_at) WHERE status IN ('QUEUED', 'AWAITING_PAYMENT', 'BROADCAST');
CREATE UNIQUE INDEX outbounds_matched ON outbounds (tx_hash, COALESCE(log_index, -1))
    WHERE paid_by = 'MERCHANT' AND tx_hash IS NOT NULL;

ALTER TABLE sweep_txs ADD COLUMN outbound_id BIGINT;
CREATE INDEX sweep_txs_outbound ON sweep_txs (outbound_id) WHERE outbound_id IS NOT NULL;

CREATE TABLE ledger_entries (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    kind          TEXT      NOT NULL,
    merchant_id   BIGINT,
    invoice_id    BIGINT,
    outbound_id   BIGINT,
    payment_id    BIGINT,
    sweep_tx_id   BIGINT,
    token_address BLOB,
    from_address  BLOB,
    to_address    BLOB,
    amount        TEXT      NOT NULL,
    tx_hash       BLOB,
    log_index     INTEGER,
    block_number  BIGINT,
    at            TIMESTAMP NOT NULL,
    fiat_currency TEXT      NOT NULL DEFAULT '',
    fiat_minor    TEXT,
    reverses      BIGINT    UNIQUE REFERENCES ledger_entries (id),
    recorded_at   TIMESTAMP NOT NULL
);
CREATE INDEX ledger_entries_merchant_at ON ledger_entries (merchant_id, at, id);
CREATE INDEX ledger_entries_at ON ledger_entries (at, id);
CREATE INDEX ledger_entries_payment ON ledger_entries (payment_id) WHERE payment_id IS NOT NULL;
CREATE INDEX ledger_entries_sweep_tx ON ledger_entries (sweep_tx_id) WHERE sweep_tx_id IS NOT NULL;

CREATE TRIGGER ledger_entries_no_update BEFORE UPDATE ON ledger_entries
BEGIN
    SELECT RAISE(ABORT, 'ledger_entries is append-only: a movement undone gets a reversal entry');
END;
CREATE TRIGGER ledger_entries_no_delete BEFORE DELETE ON ledger_entries
BEGIN
    SELECT RAISE(ABORT, 'ledger_entries is append-only: a movement undone gets a reversal entry');
END;

-- Times are integer microseconds; a block's timestamp is in seconds.
CREATE TRIGGER ledger_payment_credited AFTER INSERT ON payments
BEGIN
    INSERT INTO ledger_entries (kind, merchant_id, invoice_id, payment_id, token_address, from_address,
        to_address, amount, tx_hash, log_index, block_number, at, recorded_at)
    SELECT 'payment', i.merchant_id, NEW.invoice_id, NEW.id, NEW.token_address, NEW.from_address,
        i.deposit_address, NEW.amount_wei, NEW.tx_hash, NULLIF(NEW.log_index, -1), NEW.block_number,
        COALESCE((SELECT b.timestamp * 1000000 FROM blocks b WHERE b.number = NEW.block_number), NEW.created_at),
        NEW.created_at
    FROM invoices i WHERE i.id = NEW.invoice_id;
END;

CREATE TRIGGER ledger_payment_reversed AFTER DELETE ON payments
BEGIN
    INSERT INTO ledger_entries (kind, merchant_id, invoice_id, outbound_id, payment_id, sweep_tx_id, token_address,
        from_address, to_address, amount, tx_hash, log_index, block_number, at, fiat_currency, fiat_minor,
        reverses, recorded_at)
    SELECT e.kind, e.merchant_id, e.invoice_id, e.outbound_id, e.payment_id, e.sweep_tx_id, e.token_address,
        e.to_address, e.from_address, e.amount, e.tx_hash, e.log_index, e.block_number,
        CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER),
        e.fiat_currency, e.fiat_minor, e.id,
        CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
    FROM ledger_entries e
    WHERE e.payment_id = OLD.id AND e.reverses IS NULL
      AND NOT EXISTS (SELECT 1 FROM ledger_entries r WHERE r.reverses = e.id);
END;
