-- evmpay:no-transaction
-- What the sweep and the refund engine write carries its chain (issue
-- #36), as the index does since 0190: sweep transactions, the wallets'
-- nonces (one sequence per wallet per chain: the same address has a nonce
-- on every chain), refunds and payouts, and the ledger's entries (each
-- chain's ledger reconciles with that chain's balances). Existing rows
-- belong to the chain the database recorded (filled in by the migrator as
-- for 0190). The same pattern as 0190: catalog-only columns, no default
-- left, each statement under lock_timeout and retried.

ALTER TABLE sweep_txs ADD COLUMN IF NOT EXISTS chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE sweep_txs ALTER COLUMN chain_id DROP DEFAULT;
ALTER TABLE outbounds ADD COLUMN IF NOT EXISTS chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE outbounds ALTER COLUMN chain_id DROP DEFAULT;
ALTER TABLE ledger_entries ADD COLUMN IF NOT EXISTS chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE ledger_entries ALTER COLUMN chain_id DROP DEFAULT;
-- A wallet's live nonce and a deposit address's live sweep are unique per
-- chain (the same address sends on every chain): the unique indexes gain
-- the chain, built without blocking writes before the old ones go.
DROP INDEX CONCURRENTLY IF EXISTS sweep_txs_chain_live_nonce;
CREATE UNIQUE INDEX CONCURRENTLY sweep_txs_chain_live_nonce ON sweep_txs (chain_id, from_address, kind, nonce)
    WHERE status IN ('SIGNED', 'SENT', 'MINED');
DROP INDEX CONCURRENTLY IF EXISTS sweep_txs_live_nonce;
DROP INDEX CONCURRENTLY IF EXISTS sweep_txs_chain_live_sweep_asset;
CREATE UNIQUE INDEX CONCURRENTLY sweep_txs_chain_live_sweep_asset
    ON sweep_txs (chain_id, from_address, (COALESCE(wrong_token, '\x'::bytea)))
    WHERE kind = 'SWEEP' AND status IN ('SIGNED', 'SENT', 'MINED');
DROP INDEX CONCURRENTLY IF EXISTS sweep_txs_live_sweep_asset;

-- A few rows (one per service wallet): changed in place.
ALTER TABLE wallet_nonces ADD COLUMN IF NOT EXISTS chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE wallet_nonces ALTER COLUMN chain_id DROP DEFAULT,
    DROP CONSTRAINT IF EXISTS wallet_nonces_pkey, ADD CONSTRAINT wallet_nonces_pkey PRIMARY KEY (chain_id, address);

-- A payment's ledger entry is on its invoice's chain; a reversal on the
-- entry's.
CREATE OR REPLACE FUNCTION ledger_payment_credited() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_entries (chain_id, kind, merchant_id, invoice_id, payment_id, token_address, from_address,
        to_address, amount, tx_hash, log_index, block_number, at, recorded_at)
    SELECT i.chain_id, 'payment', i.merchant_id, NEW.invoice_id, NEW.id, NEW.token_address, NEW.from_address,
        i.deposit_address, NEW.amount_wei, NEW.tx_hash, NULLIF(NEW.log_index, -1), NEW.block_number,
        COALESCE((SELECT to_timestamp(b.timestamp) FROM blocks b WHERE b.chain_id = i.chain_id AND b.number = NEW.block_number),
            NEW.created_at),
        NEW.created_at
    FROM invoices i WHERE i.id = NEW.invoice_id; RETURN NULL; END $$;
CREATE OR REPLACE FUNCTION ledger_payment_reversed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_entries (chain_id, kind, merchant_id, invoice_id, outbound_id, payment_id, sweep_tx_id, token_address,
        from_address, to_address, amount, tx_hash, log_index, block_number, at, fiat_currency, fiat_minor,
        reverses, recorded_at)
    SELECT e.chain_id, e.kind, e.merchant_id, e.invoice_id, e.outbound_id, e.payment_id, e.sweep_tx_id, e.token_address,
        e.to_address, e.from_address, e.amount, e.tx_hash, e.log_index, e.block_number, clock_timestamp(),
        e.fiat_currency, e.fiat_minor, e.id, clock_timestamp()
    FROM ledger_entries e
    WHERE e.payment_id = OLD.id AND e.reverses IS NULL
      AND NOT EXISTS (SELECT 1 FROM ledger_entries r WHERE r.reverses = e.id); RETURN NULL; END $$;
