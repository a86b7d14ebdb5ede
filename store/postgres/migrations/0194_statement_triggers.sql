-- evmpay:no-transaction
-- The two triggers settlement fires on every block become statement-level
-- (issue #36, settlement per block): a row-level trigger runs its function
-- and its statement once per row, and a block's 50 payments and 50 paid
-- invoices paid for that 100 times — 2.2 ms of the payments' insert for
-- their ledger entries, and 50 updates of one invoice_daily row for the
-- invoices. Transition tables give each trigger every row of the
-- statement at once: one INSERT of the ledger entries, one upsert per
-- (merchant, day, asset) of the daily roll-up. What they write is what
-- the row triggers wrote.
--
-- Each swap is one DO block, so one statement of this no-transaction
-- migration: atomic (never both triggers, never neither) and, like every
-- statement here, run under lock_timeout and retried while a long
-- transaction holds the table. Function bodies keep each statement on one
-- line ending in "; " (the migrator splits the file at ";" + newline).

-- A payment's ledger entry: on the chain it arrived on, dated by that
-- chain's block (as 0193's row trigger), in the order the payments were
-- inserted.
CREATE OR REPLACE FUNCTION ledger_payments_credited() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_entries (chain_id, kind, merchant_id, invoice_id, payment_id, token_address, from_address,
        to_address, amount, tx_hash, log_index, block_number, at, recorded_at)
    SELECT n.chain_id, 'payment', i.merchant_id, n.invoice_id, n.id, n.token_address, n.from_address,
        i.deposit_address, n.amount_wei, n.tx_hash, NULLIF(n.log_index, -1), n.block_number,
        COALESCE((SELECT to_timestamp(b.timestamp) FROM blocks b WHERE b.chain_id = n.chain_id AND b.number = n.block_number),
            n.created_at),
        n.created_at
    FROM credited n JOIN invoices i ON i.id = n.invoice_id ORDER BY n.id; RETURN NULL; END $$;

DO $$ BEGIN DROP TRIGGER IF EXISTS ledger_payment_credited ON payments; DROP TRIGGER IF EXISTS ledger_payments_credited ON payments; CREATE TRIGGER ledger_payments_credited AFTER INSERT ON payments REFERENCING NEW TABLE AS credited FOR EACH STATEMENT EXECUTE FUNCTION ledger_payments_credited(); END $$;

DROP FUNCTION IF EXISTS ledger_payment_credited();

-- The dashboard's daily roll-up (0170): an insert adds its invoices and
-- what they were created paid; an update adds the change of paid_wei,
-- filed under the invoice's (merchant, day of creation, asset) after the
-- update. Rows of one key are summed first: one upsert per key, in key
-- order (two statements lock the same rows in the same order).
CREATE OR REPLACE FUNCTION invoice_daily_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO invoice_daily AS r (merchant_id, day, token, invoices, paid)
    SELECT n.merchant_id, (n.created_at AT TIME ZONE 'UTC')::date, COALESCE(n.token_address, '\x'::bytea), count(*), sum(n.paid_wei)
    FROM inserted n GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (merchant_id, day, token) DO UPDATE SET invoices = r.invoices + EXCLUDED.invoices, paid = r.paid + EXCLUDED.paid; RETURN NULL; END $$;

CREATE OR REPLACE FUNCTION invoice_daily_paid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO invoice_daily AS r (merchant_id, day, token, invoices, paid)
    SELECT n.merchant_id, (n.created_at AT TIME ZONE 'UTC')::date, COALESCE(n.token_address, '\x'::bytea), 0, sum(n.paid_wei - o.paid_wei)
    FROM updated n JOIN before_update o ON o.id = n.id WHERE n.paid_wei <> o.paid_wei GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (merchant_id, day, token) DO UPDATE SET invoices = r.invoices + EXCLUDED.invoices, paid = r.paid + EXCLUDED.paid; RETURN NULL; END $$;

DO $$ BEGIN DROP TRIGGER IF EXISTS invoice_daily_roll ON invoices; DROP TRIGGER IF EXISTS invoice_daily_inserted ON invoices; DROP TRIGGER IF EXISTS invoice_daily_paid ON invoices; CREATE TRIGGER invoice_daily_inserted AFTER INSERT ON invoices REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION invoice_daily_inserted(); CREATE TRIGGER invoice_daily_paid AFTER UPDATE ON invoices REFERENCING OLD TABLE AS before_update NEW TABLE AS updated FOR EACH STATEMENT EXECUTE FUNCTION invoice_daily_paid(); END $$;

DROP FUNCTION IF EXISTS invoice_daily_roll();
