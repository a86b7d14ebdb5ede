-- evmpay:no-transaction
-- A payment carries the chain it arrived on (issue #36, wrong-network
-- payments): a deposit address is the same on every chain, so money sent
-- to it on another chain than its invoice's is recorded there, as a
-- wrong-network payment (wrong_network), never counted toward the invoice.
-- The same transaction hash and log index on two chains are two payments.
--
-- Existing rows arrived on their invoice's chain (settlement credited only
-- its own chain's invoices until now). That chain differs per invoice in a
-- database several chains already share, so it is read from the invoice
-- (or, for an archived invoice, from invoices_archive; else from the
-- payment's own ledger entry, which has carried the invoice's chain since
-- 0191) rather than filled in as one {{…}} default. Without a long lock,
-- the pattern of 0190/0191: the columns are catalog changes; the one
-- UPDATE takes row locks only (readers and new payments go on; it rewrites
-- each existing row once); NOT NULL is proven by a CHECK validated under a
-- lock that lets writes through, so SET NOT NULL does not scan; the new
-- keys are built CONCURRENTLY before the old ones go. Every statement runs
-- under lock_timeout and is retried; a failed run starts again from the
-- top safely.

ALTER TABLE payments ADD COLUMN IF NOT EXISTS chain_id BIGINT;
ALTER TABLE payments ADD COLUMN IF NOT EXISTS wrong_network BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE payments p SET chain_id = COALESCE(
        (SELECT i.chain_id FROM invoices i WHERE i.id = p.invoice_id),
        (SELECT a.chain_id FROM invoices_archive a WHERE a.id = p.invoice_id),
        (SELECT e.chain_id FROM ledger_entries e WHERE e.payment_id = p.id AND e.reverses IS NULL ORDER BY e.id LIMIT 1))
    WHERE p.chain_id IS NULL;
ALTER TABLE payments DROP CONSTRAINT IF EXISTS payments_chain_id_set;
ALTER TABLE payments ADD CONSTRAINT payments_chain_id_set CHECK (chain_id IS NOT NULL) NOT VALID;
ALTER TABLE payments VALIDATE CONSTRAINT payments_chain_id_set;
ALTER TABLE payments ALTER COLUMN chain_id SET NOT NULL;
ALTER TABLE payments DROP CONSTRAINT IF EXISTS payments_chain_id_set;

-- Unique per (tx hash, log index, chain): led by the hash, so that a
-- lookup by transaction hash (the dashboard's search) still uses it.
DROP INDEX CONCURRENTLY IF EXISTS payments_tx_log_chain;
CREATE UNIQUE INDEX CONCURRENTLY payments_tx_log_chain ON payments (tx_hash, log_index, chain_id);
ALTER TABLE payments DROP CONSTRAINT IF EXISTS payments_tx_hash_log_index_key;
-- A chain's reorg deletes that chain's payments above a block; its
-- confirmation pass reads that chain's payments of a block range.
DROP INDEX CONCURRENTLY IF EXISTS payments_chain_block;
CREATE INDEX CONCURRENTLY payments_chain_block ON payments (chain_id, block_number);
DROP INDEX CONCURRENTLY IF EXISTS payments_block;

-- A payment's ledger entry is on the chain it arrived on, dated by that
-- chain's block: a wrong-network deposit is money at the deposit address
-- on that chain, which that chain's reconciliation sees. (The reversal
-- was already written on the entry's chain.)
CREATE OR REPLACE FUNCTION ledger_payment_credited() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_entries (chain_id, kind, merchant_id, invoice_id, payment_id, token_address, from_address,
        to_address, amount, tx_hash, log_index, block_number, at, recorded_at)
    SELECT NEW.chain_id, 'payment', i.merchant_id, NEW.invoice_id, NEW.id, NEW.token_address, NEW.from_address,
        i.deposit_address, NEW.amount_wei, NEW.tx_hash, NULLIF(NEW.log_index, -1), NEW.block_number,
        COALESCE((SELECT to_timestamp(b.timestamp) FROM blocks b WHERE b.chain_id = NEW.chain_id AND b.number = NEW.block_number),
            NEW.created_at),
        NEW.created_at
    FROM invoices i WHERE i.id = NEW.invoice_id; RETURN NULL; END $$;
