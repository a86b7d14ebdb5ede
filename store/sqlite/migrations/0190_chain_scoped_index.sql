-- Every row of the chain's index carries its chain (issue #36): one
-- database holds several chains' blocks, transactions, token transfers,
-- cursors, identities and finalized blocks side by side, each keyed by
-- (chain_id, …). Existing rows belong to the chain the database recorded:
-- the migrator fills in the default chain below from chain_identity, or
-- from the invoices' one chain. SQLite cannot change a primary key in
-- place: each keyed table is rebuilt in this one transaction (the embedded
-- store holds a development-sized index; PostgreSQL's migration changes
-- its keys without a long lock).

-- The payment ledger trigger reads blocks: dropped while blocks is
-- rebuilt (a rename checks the triggers that name the table), recreated
-- at the end reading the block of the invoice's chain.
DROP TRIGGER ledger_payment_credited;

CREATE TABLE blocks_0190 (
    chain_id     BIGINT        NOT NULL,
    number       BIGINT        NOT NULL,
    hash         BLOB          NOT NULL,
    parent_hash  BLOB          NOT NULL,
    timestamp    BIGINT        NOT NULL,
    miner        BLOB          NOT NULL,
    gas_limit    BIGINT        NOT NULL,
    gas_used     BIGINT        NOT NULL,
    base_fee_wei TEXT,
    tx_count     INTEGER       NOT NULL,
    indexed_at   TIMESTAMP     NOT NULL,
    PRIMARY KEY (chain_id, number),
    UNIQUE (chain_id, hash)
);
INSERT INTO blocks_0190 (chain_id, number, hash, parent_hash, timestamp, miner, gas_limit, gas_used, base_fee_wei, tx_count, indexed_at)
    SELECT {{DEFAULT_CHAIN_ID}}, number, hash, parent_hash, timestamp, miner, gas_limit, gas_used, base_fee_wei, tx_count, indexed_at FROM blocks;
DROP TABLE blocks;
ALTER TABLE blocks_0190 RENAME TO blocks;

CREATE TABLE transactions_0190 (
    chain_id             BIGINT        NOT NULL,
    hash                 BLOB          NOT NULL,
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
    input                BLOB          NOT NULL,
    PRIMARY KEY (chain_id, hash)
);
INSERT INTO transactions_0190 (chain_id, hash, block_number, block_hash, tx_index, from_address, to_address, value_wei,
        nonce, gas, type, gas_price_wei, max_fee_wei, max_priority_fee_wei, input)
    SELECT {{DEFAULT_CHAIN_ID}}, hash, block_number, block_hash, tx_index, from_address, to_address, value_wei,
        nonce, gas, type, gas_price_wei, max_fee_wei, max_priority_fee_wei, input FROM transactions;
DROP TABLE transactions;
ALTER TABLE transactions_0190 RENAME TO transactions;
CREATE INDEX transactions_chain_block ON transactions (chain_id, block_number, tx_index);
CREATE INDEX transactions_to ON transactions (to_address, block_number, tx_index);
CREATE INDEX transactions_from ON transactions (from_address, block_number, tx_index);

CREATE TABLE token_transfers_0190 (
    chain_id     BIGINT        NOT NULL,
    block_number BIGINT        NOT NULL,
    block_hash   BLOB          NOT NULL,
    tx_hash      BLOB          NOT NULL,
    tx_index     INTEGER       NOT NULL,
    log_index    INTEGER       NOT NULL,
    token        BLOB          NOT NULL,
    from_address BLOB          NOT NULL,
    to_address   BLOB          NOT NULL,
    value        TEXT          NOT NULL,
    PRIMARY KEY (chain_id, tx_hash, log_index)
);
INSERT INTO token_transfers_0190 (chain_id, block_number, block_hash, tx_hash, tx_index, log_index, token, from_address, to_address, value)
    SELECT {{DEFAULT_CHAIN_ID}}, block_number, block_hash, tx_hash, tx_index, log_index, token, from_address, to_address, value
    FROM token_transfers;
DROP TABLE token_transfers;
ALTER TABLE token_transfers_0190 RENAME TO token_transfers;
CREATE INDEX token_transfers_chain_block ON token_transfers (chain_id, block_number, log_index);
CREATE INDEX token_transfers_to ON token_transfers (to_address, block_number, log_index);
CREATE INDEX token_transfers_from ON token_transfers (from_address, block_number, log_index);

CREATE TABLE settlement_blocks_0190 (
    chain_id BIGINT NOT NULL,
    number   BIGINT NOT NULL,
    hash     BLOB   NOT NULL,
    PRIMARY KEY (chain_id, number)
);
INSERT INTO settlement_blocks_0190 (chain_id, number, hash) SELECT {{DEFAULT_CHAIN_ID}}, number, hash FROM settlement_blocks;
DROP TABLE settlement_blocks;
ALTER TABLE settlement_blocks_0190 RENAME TO settlement_blocks;

CREATE TABLE cursors_0190 (
    chain_id     BIGINT      NOT NULL,
    name         TEXT        NOT NULL,
    block_number BIGINT      NOT NULL,
    block_hash   BLOB        NOT NULL,
    updated_at   TIMESTAMP   NOT NULL,
    PRIMARY KEY (chain_id, name)
);
INSERT INTO cursors_0190 (chain_id, name, block_number, block_hash, updated_at)
    SELECT {{DEFAULT_CHAIN_ID}}, name, block_number, block_hash, updated_at FROM cursors;
DROP TABLE cursors;
ALTER TABLE cursors_0190 RENAME TO cursors;

CREATE TABLE chain_identity_0190 (
    chain_id       BIGINT      NOT NULL PRIMARY KEY,
    genesis_hash   BLOB        NOT NULL,
    recorded_at    TIMESTAMP   NOT NULL,
    genesis_number INTEGER     NOT NULL DEFAULT 0
);
INSERT INTO chain_identity_0190 (chain_id, genesis_hash, recorded_at, genesis_number)
    SELECT chain_id, genesis_hash, recorded_at, genesis_number FROM chain_identity;
DROP TABLE chain_identity;
ALTER TABLE chain_identity_0190 RENAME TO chain_identity;

CREATE TABLE chain_checkpoints_0190 (
    chain_id     BIGINT      NOT NULL,
    block_number BIGINT      NOT NULL,
    block_hash   BLOB        NOT NULL,
    permanent    BOOLEAN     NOT NULL DEFAULT FALSE,
    recorded_at  TIMESTAMP   NOT NULL,
    PRIMARY KEY (chain_id, block_number)
);
INSERT INTO chain_checkpoints_0190 (chain_id, block_number, block_hash, permanent, recorded_at)
    SELECT {{DEFAULT_CHAIN_ID}}, block_number, block_hash, permanent, recorded_at FROM chain_checkpoints;
DROP TABLE chain_checkpoints;
ALTER TABLE chain_checkpoints_0190 RENAME TO chain_checkpoints;

CREATE TABLE chain_finalized_0190 (
    chain_id     BIGINT NOT NULL PRIMARY KEY,
    block_number BIGINT NOT NULL CHECK (block_number >= 0)
);
INSERT INTO chain_finalized_0190 (chain_id, block_number) SELECT {{DEFAULT_CHAIN_ID}}, block_number FROM chain_finalized;
DROP TABLE chain_finalized;
ALTER TABLE chain_finalized_0190 RENAME TO chain_finalized;

-- reorgs keeps its rows and ids (AUTOINCREMENT): a new column, whose
-- default only the old rows use (every writer names the chain).
ALTER TABLE reorgs ADD COLUMN chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
CREATE INDEX reorgs_chain ON reorgs (chain_id, id);

CREATE TRIGGER ledger_payment_credited AFTER INSERT ON payments
BEGIN
    INSERT INTO ledger_entries (kind, merchant_id, invoice_id, payment_id, token_address, from_address,
        to_address, amount, tx_hash, log_index, block_number, at, recorded_at)
    SELECT 'payment', i.merchant_id, NEW.invoice_id, NEW.id, NEW.token_address, NEW.from_address,
        i.deposit_address, NEW.amount_wei, NEW.tx_hash, NULLIF(NEW.log_index, -1), NEW.block_number,
        COALESCE((SELECT b.timestamp * 1000000 FROM blocks b WHERE b.chain_id = i.chain_id AND b.number = NEW.block_number),
            NEW.created_at),
        NEW.created_at
    FROM invoices i WHERE i.id = NEW.invoice_id;
END;
