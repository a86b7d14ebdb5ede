-- evmpay:no-transaction
-- Every row of the chain's index carries its chain (issue #36): one
-- database holds several chains' blocks, transactions, token transfers,
-- cursors, identities and finalized blocks side by side, each keyed by
-- (chain_id, …). Existing rows belong to the chain the database recorded:
-- the migrator fills in the default chain below from chain_identity, or
-- from the invoices' one chain.
--
-- Without a long lock on a year of data (docs/chains.md, measured on 10 M
-- rows): ADD COLUMN with a constant default is a catalog change (no
-- rewrite), and DROP DEFAULT right after makes a writer that forgets the
-- chain fail instead of writing the first one; the new keys are built
-- CONCURRENTLY and swapped in. The migrator runs each statement on its own
-- under lock_timeout and retries one that timed out waiting for a lock, so
-- that no ALTER queues writers behind a long transaction. Re-running from
-- the top after a failure part-way is safe (IF EXISTS / IF NOT EXISTS, and
-- each new index dropped before it is built).

ALTER TABLE blocks ADD COLUMN IF NOT EXISTS chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE blocks ALTER COLUMN chain_id DROP DEFAULT;
ALTER TABLE transactions ADD COLUMN IF NOT EXISTS chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE transactions ALTER COLUMN chain_id DROP DEFAULT;
ALTER TABLE token_transfers ADD COLUMN IF NOT EXISTS chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE token_transfers ALTER COLUMN chain_id DROP DEFAULT;
ALTER TABLE reorgs ADD COLUMN IF NOT EXISTS chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE reorgs ALTER COLUMN chain_id DROP DEFAULT;

-- The big tables' keys: built without blocking writes, then swapped in one
-- short statement each.
DROP INDEX CONCURRENTLY IF EXISTS blocks_chain_number;
CREATE UNIQUE INDEX CONCURRENTLY blocks_chain_number ON blocks (chain_id, number);
ALTER TABLE blocks DROP CONSTRAINT IF EXISTS blocks_pkey, ADD CONSTRAINT blocks_pkey PRIMARY KEY USING INDEX blocks_chain_number;
DROP INDEX CONCURRENTLY IF EXISTS blocks_chain_hash;
CREATE UNIQUE INDEX CONCURRENTLY blocks_chain_hash ON blocks (chain_id, hash);
ALTER TABLE blocks DROP CONSTRAINT IF EXISTS blocks_hash_key;

DROP INDEX CONCURRENTLY IF EXISTS transactions_chain_hash;
CREATE UNIQUE INDEX CONCURRENTLY transactions_chain_hash ON transactions (chain_id, hash);
ALTER TABLE transactions DROP CONSTRAINT IF EXISTS transactions_pkey, ADD CONSTRAINT transactions_pkey PRIMARY KEY USING INDEX transactions_chain_hash;
DROP INDEX CONCURRENTLY IF EXISTS transactions_chain_block;
CREATE INDEX CONCURRENTLY transactions_chain_block ON transactions (chain_id, block_number, tx_index);
DROP INDEX CONCURRENTLY IF EXISTS transactions_block;

DROP INDEX CONCURRENTLY IF EXISTS token_transfers_chain_key;
CREATE UNIQUE INDEX CONCURRENTLY token_transfers_chain_key ON token_transfers (chain_id, tx_hash, log_index);
ALTER TABLE token_transfers DROP CONSTRAINT IF EXISTS token_transfers_pkey, ADD CONSTRAINT token_transfers_pkey PRIMARY KEY USING INDEX token_transfers_chain_key;
DROP INDEX CONCURRENTLY IF EXISTS token_transfers_chain_block;
CREATE INDEX CONCURRENTLY token_transfers_chain_block ON token_transfers (chain_id, block_number, log_index);
DROP INDEX CONCURRENTLY IF EXISTS token_transfers_block;

DROP INDEX CONCURRENTLY IF EXISTS reorgs_chain;
CREATE INDEX CONCURRENTLY reorgs_chain ON reorgs (chain_id, id);

-- Small tables (a few rows, or a pruned window): changed in place.
ALTER TABLE settlement_blocks ADD COLUMN IF NOT EXISTS chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE settlement_blocks ALTER COLUMN chain_id DROP DEFAULT,
    DROP CONSTRAINT IF EXISTS settlement_blocks_pkey, ADD CONSTRAINT settlement_blocks_pkey PRIMARY KEY (chain_id, number);
ALTER TABLE cursors ADD COLUMN IF NOT EXISTS chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE cursors ALTER COLUMN chain_id DROP DEFAULT,
    DROP CONSTRAINT IF EXISTS cursors_pkey, ADD CONSTRAINT cursors_pkey PRIMARY KEY (chain_id, name);
ALTER TABLE chain_checkpoints ADD COLUMN IF NOT EXISTS chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE chain_checkpoints ALTER COLUMN chain_id DROP DEFAULT,
    DROP CONSTRAINT IF EXISTS chain_checkpoints_pkey, ADD CONSTRAINT chain_checkpoints_pkey PRIMARY KEY (chain_id, block_number);
ALTER TABLE chain_finalized ADD COLUMN IF NOT EXISTS chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE chain_finalized ALTER COLUMN chain_id DROP DEFAULT,
    DROP CONSTRAINT IF EXISTS chain_finalized_pkey, DROP COLUMN IF EXISTS id, ADD CONSTRAINT chain_finalized_pkey PRIMARY KEY (chain_id);
-- chain_identity always had its chain; its one-row key gives way to it.
ALTER TABLE chain_identity DROP CONSTRAINT IF EXISTS chain_identity_pkey, DROP COLUMN IF EXISTS id,
    ADD CONSTRAINT chain_identity_pkey PRIMARY KEY (chain_id);

-- A payment's ledger entry is dated by the block of its invoice's chain.
CREATE OR REPLACE FUNCTION ledger_payment_credited() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_entries (kind, merchant_id, invoice_id, payment_id, token_address, from_address,
        to_address, amount, tx_hash, log_index, block_number, at, recorded_at)
    SELECT 'payment', i.merchant_id, NEW.invoice_id, NEW.id, NEW.token_address, NEW.from_address,
        i.deposit_address, NEW.amount_wei, NEW.tx_hash, NULLIF(NEW.log_index, -1), NEW.block_number,
        COALESCE((SELECT to_timestamp(b.timestamp) FROM blocks b WHERE b.chain_id = i.chain_id AND b.number = NEW.block_number),
            NEW.created_at),
        NEW.created_at
    FROM invoices i WHERE i.id = NEW.invoice_id; RETURN NULL; END $$;
