-- ERC-20 tokens (issue 15). SQLite keeps amounts as decimal TEXT.
--
-- An invoice is for one asset: token_address NULL is the native coin (every
-- invoice before this migration), otherwise the token contract. Its symbol
-- and decimals are snapshotted at creation, so a later configuration change
-- never reformats an existing invoice. amount_wei and paid_wei hold base
-- units of the invoice's asset.
ALTER TABLE invoices ADD COLUMN token_address BLOB CHECK (token_address IS NULL OR length(token_address) = 20);
ALTER TABLE invoices ADD COLUMN asset_symbol TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN asset_decimals INTEGER NOT NULL DEFAULT 18 CHECK (asset_decimals BETWEEN 0 AND 77);
ALTER TABLE invoices_archive ADD COLUMN token_address BLOB CHECK (token_address IS NULL OR length(token_address) = 20);
ALTER TABLE invoices_archive ADD COLUMN asset_symbol TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices_archive ADD COLUMN asset_decimals INTEGER NOT NULL DEFAULT 18 CHECK (asset_decimals BETWEEN 0 AND 77);

-- A payment's asset (NULL: native coin), and whether it was in another
-- asset than its invoice's: such a payment is recorded but never counted.
ALTER TABLE payments ADD COLUMN token_address BLOB CHECK (token_address IS NULL OR length(token_address) = 20);
ALTER TABLE payments ADD COLUMN wrong_asset BOOLEAN NOT NULL DEFAULT 0;

-- Transfer(address,address,uint256) logs of the configured tokens, with the
-- block hash the node reported. Like transactions, no foreign key to blocks:
-- rows arrive in bulk and leave with their block (DeleteBlocksFrom).
CREATE TABLE token_transfers (
    block_number BIGINT        NOT NULL,
    block_hash   BLOB          NOT NULL,
    tx_hash      BLOB          NOT NULL,
    tx_index     INTEGER       NOT NULL,
    log_index    INTEGER       NOT NULL,
    token        BLOB          NOT NULL,
    from_address BLOB          NOT NULL,
    to_address   BLOB          NOT NULL,
    value        TEXT          NOT NULL,
    -- Unique like payments: some Cosmos EVM versions numbered logs per
    -- transaction rather than per block.
    PRIMARY KEY (tx_hash, log_index)
);
CREATE INDEX token_transfers_block ON token_transfers (block_number, log_index);
CREATE INDEX token_transfers_to ON token_transfers (to_address, block_number, log_index);
CREATE INDEX token_transfers_from ON token_transfers (from_address, block_number, log_index);
