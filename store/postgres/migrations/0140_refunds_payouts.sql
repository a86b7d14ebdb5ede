-- Refunds and payouts on one outbound engine, with a ledger of every
-- movement (issue 26, docs/refunds.md).

-- Additional API keys of a merchant, each with its scopes (the merchant's
-- own key, on the merchant row, has every scope). Like the merchant's key,
-- stored as an HMAC lookup digest and an Argon2id hash.
CREATE TABLE api_keys (
    id          BIGSERIAL PRIMARY KEY,
    merchant_id BIGINT      NOT NULL REFERENCES merchants (id),
    name        TEXT        NOT NULL DEFAULT '',
    digest      BYTEA       NOT NULL UNIQUE,
    hash        TEXT        NOT NULL,
    prefix      TEXT        NOT NULL,
    scopes      TEXT        NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    revoked_at  TIMESTAMPTZ
);
CREATE INDEX api_keys_merchant ON api_keys (merchant_id, id);

-- A merchant's controls on what the service sends out for it: approval
-- thresholds, daily limits and payout-wallet reserves per asset, and a
-- payout destination allowlist. JSON: amounts are compared in Go.
CREATE TABLE payout_policies (
    merchant_id BIGINT      PRIMARY KEY REFERENCES merchants (id),
    policy      TEXT        NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);

-- The wallets the service holds keys for besides deposit addresses: every
-- process (the API's too, which holds no key) refuses them as a
-- destination, and the reconciliation compares their balances. A payout
-- wallet belongs to one merchant.
CREATE TABLE service_wallets (
    address     BYTEA       PRIMARY KEY CHECK (length(address) = 20),
    role        TEXT        NOT NULL CHECK (role IN ('payout', 'sweep', 'funder')),
    merchant_id BIGINT      UNIQUE REFERENCES merchants (id),
    created_at  TIMESTAMPTZ NOT NULL,
    -- The block of the wallet's opening balance in the ledger: it holds
    -- every movement of the blocks up to it; null before the ledger starts.
    ledger_from_block BIGINT CHECK (ledger_from_block >= 0),
    CHECK ((role = 'payout') = (merchant_id IS NOT NULL))
);

-- Refunds and payouts.
CREATE TABLE outbounds (
    id               BIGSERIAL PRIMARY KEY,
    kind             TEXT          NOT NULL CHECK (kind IN ('REFUND', 'PAYOUT')),
    merchant_id      BIGINT        NOT NULL REFERENCES merchants (id),
    invoice_id       BIGINT,
    batch_id         TEXT          NOT NULL DEFAULT '',
    reason           TEXT          NOT NULL DEFAULT '',
    reference        TEXT          NOT NULL DEFAULT '',
    token_address    BYTEA         CHECK (token_address IS NULL OR length(token_address) = 20),
    asset_symbol     TEXT          NOT NULL,
    asset_decimals   SMALLINT      NOT NULL CHECK (asset_decimals BETWEEN 0 AND 77),
    amount           NUMERIC(78,0) NOT NULL CHECK (amount > 0),
    fiat_currency    TEXT          NOT NULL DEFAULT '',
    fiat_minor       NUMERIC(78,0),
    fiat_rate        TEXT          NOT NULL DEFAULT '',
    fiat_rate_kind   TEXT          NOT NULL DEFAULT '',
    destination      BYTEA         CHECK (destination IS NULL OR length(destination) = 20),
    payment_uri      TEXT          NOT NULL DEFAULT '',
    paid_by          TEXT          NOT NULL CHECK (paid_by IN ('SERVICE', 'MERCHANT')),
    source           TEXT          NOT NULL DEFAULT '' CHECK (source IN ('', 'PAYOUT_WALLET', 'DEPOSIT')),
    from_address     BYTEA,
    status           TEXT          NOT NULL CHECK (status IN ('AWAITING_DESTINATION', 'AWAITING_APPROVAL', 'QUEUED',
                                       'AWAITING_PAYMENT', 'BROADCAST', 'CONFIRMED', 'FAILED', 'CANCELLED')),
    error            TEXT          NOT NULL DEFAULT '',
    claim_token_hash BYTEA         UNIQUE,
    created_by_key   BIGINT        NOT NULL DEFAULT 0,
    needs_approval   BOOLEAN       NOT NULL DEFAULT FALSE,
    approved_by_key  BIGINT,
    approved_at      TIMESTAMPTZ,
    tx_hash          BYTEA,
    log_index        INTEGER,
    block_number     BIGINT,
    created_block    BIGINT        NOT NULL DEFAULT 0,
    attempts         INTEGER       NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ,
    locked_until     TIMESTAMPTZ,
    created_at       TIMESTAMPTZ   NOT NULL,
    updated_at       TIMESTAMPTZ   NOT NULL,
    broadcast_at     TIMESTAMPTZ,
    confirmed_at     TIMESTAMPTZ,
    version          BIGINT        NOT NULL DEFAULT 1,
    -- A refund has its invoice, a payout none; a destination is known
    -- unless the payer is still to name it.
    CHECK ((kind = 'REFUND') = (invoice_id IS NOT NULL)),
    CHECK (destination IS NOT NULL OR status IN ('AWAITING_DESTINATION', 'CANCELLED', 'FAILED'))
);
CREATE INDEX outbounds_merchant ON outbounds (merchant_id, kind, id);
CREATE INDEX outbounds_merchant_created ON outbounds (merchant_id, created_at);
CREATE INDEX outbounds_invoice ON outbounds (invoice_id) WHERE invoice_id IS NOT NULL;
CREATE INDEX outbounds_due ON outbounds (next_attempt_at) WHERE status IN ('QUEUED', 'AWAITING_PAYMENT', 'BROADCAST');
-- A transfer on chain settles at most one merchant-paid outbound.
CREATE UNIQUE INDEX outbounds_matched ON outbounds (tx_hash, COALESCE(log_index, -1))
    WHERE paid_by = 'MERCHANT' AND tx_hash IS NOT NULL;

-- The sweep machinery signs and stores an outbound's transactions like
-- every other (sweep_txs): its send from the payout wallet or the deposit
-- address, and the gas fundings of a token send. (The index on this new
-- column of a big table is built concurrently: 0141.)
ALTER TABLE sweep_txs ADD COLUMN outbound_id BIGINT;

-- The ledger: every movement of money, append-only. An entry is never
-- changed or deleted; a movement undone (a reorg) gets a reversal entry,
-- at most one per entry (reverses is unique).
CREATE TABLE ledger_entries (
    id            BIGSERIAL     PRIMARY KEY,
    kind          TEXT          NOT NULL,
    merchant_id   BIGINT,
    invoice_id    BIGINT,
    outbound_id   BIGINT,
    payment_id    BIGINT,
    sweep_tx_id   BIGINT,
    token_address BYTEA,
    from_address  BYTEA,
    to_address    BYTEA,
    amount        NUMERIC(78,0) NOT NULL CHECK (amount >= 0),
    tx_hash       BYTEA,
    log_index     INTEGER,
    block_number  BIGINT,
    at            TIMESTAMPTZ   NOT NULL,
    fiat_currency TEXT          NOT NULL DEFAULT '',
    fiat_minor    NUMERIC(78,0),
    reverses      BIGINT        UNIQUE REFERENCES ledger_entries (id),
    recorded_at   TIMESTAMPTZ   NOT NULL
);
CREATE INDEX ledger_entries_merchant_at ON ledger_entries (merchant_id, at, id);
CREATE INDEX ledger_entries_at ON ledger_entries (at, id);
CREATE INDEX ledger_entries_payment ON ledger_entries (payment_id) WHERE payment_id IS NOT NULL;
CREATE INDEX ledger_entries_sweep_tx ON ledger_entries (sweep_tx_id) WHERE sweep_tx_id IS NOT NULL;

CREATE FUNCTION ledger_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger_entries is append-only: a movement undone gets a reversal entry';
END $$;
CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only();

-- A payment writes its ledger entry in the same statement that records it,
-- whatever path inserts it (one row, a bulk insert, COPY), and a reorg that
-- deletes it writes the reversal: no payment without its entry. The entry
-- is dated by its block's time; a reversal by the time of the reorg (the
-- one place the database's clock is read: a trigger has no caller's time).
CREATE FUNCTION ledger_payment_credited() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_entries (kind, merchant_id, invoice_id, payment_id, token_address, from_address,
        to_address, amount, tx_hash, log_index, block_number, at, recorded_at)
    SELECT 'payment', i.merchant_id, NEW.invoice_id, NEW.id, NEW.token_address, NEW.from_address,
        i.deposit_address, NEW.amount_wei, NEW.tx_hash, NULLIF(NEW.log_index, -1), NEW.block_number,
        COALESCE((SELECT to_timestamp(b.timestamp) FROM blocks b WHERE b.number = NEW.block_number), NEW.created_at),
        NEW.created_at
    FROM invoices i WHERE i.id = NEW.invoice_id;
    RETURN NULL;
END $$;
CREATE TRIGGER ledger_payment_credited AFTER INSERT ON payments
    FOR EACH ROW EXECUTE FUNCTION ledger_payment_credited();

CREATE FUNCTION ledger_payment_reversed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_entries (kind, merchant_id, invoice_id, outbound_id, payment_id, sweep_tx_id, token_address,
        from_address, to_address, amount, tx_hash, log_index, block_number, at, fiat_currency, fiat_minor,
        reverses, recorded_at)
    SELECT e.kind, e.merchant_id, e.invoice_id, e.outbound_id, e.payment_id, e.sweep_tx_id, e.token_address,
        e.to_address, e.from_address, e.amount, e.tx_hash, e.log_index, e.block_number, clock_timestamp(),
        e.fiat_currency, e.fiat_minor, e.id, clock_timestamp()
    FROM ledger_entries e
    WHERE e.payment_id = OLD.id AND e.reverses IS NULL
      AND NOT EXISTS (SELECT 1 FROM ledger_entries r WHERE r.reverses = e.id);
    RETURN NULL;
END $$;
CREATE TRIGGER ledger_payment_reversed AFTER DELETE ON payments
    FOR EACH ROW EXECUTE FUNCTION ledger_payment_reversed();
