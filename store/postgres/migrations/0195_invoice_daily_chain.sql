-- evmpay:no-transaction
-- The dashboard's daily roll-up (0170, 0194) per chain (issue #36): the
-- native coins of two chains are two assets (a dev chain's TEST and an
-- evmd chain's ETH were summed as one), and an invoice moved to another
-- chain it quoted (settlement's MoveInvoice) is filed under the asset it
-- is paid in, its count with it.
--
-- Without a long lock, and without a chain to guess for the rows already
-- summed (a database may hold several chains already):
-- 1. chain_id is a new column (catalog only); the rows summed so far keep
--    it NULL.
-- 2. The new key (merchant, day, chain, asset) is built CONCURRENTLY.
-- 3. One DO statement drops the old key and gives the triggers' functions
--    their new bodies, which write chain rows only: from its commit on,
--    every change of an invoice lands in chain rows, and the NULL rows
--    stop changing.
-- 4. One statement folds the NULL rows into chain rows. In its one
--    snapshot, the invoices (live and archived) summed per chain, minus
--    the chain rows already written, are what the NULL rows held per
--    chain; it adds that to the chain rows (adding commutes with the
--    triggers' concurrent additions) and deletes the NULL rows. Row locks
--    are taken only by its final upsert, after the long read. Run again,
--    it adds nothing: the invoices then sum to the chain rows.
-- 5. chain_id becomes NOT NULL (a small table) and the new key the
--    primary key.
-- A failed run starts again from the top and converges.

ALTER TABLE invoice_daily ADD COLUMN IF NOT EXISTS chain_id BIGINT;
DROP INDEX CONCURRENTLY IF EXISTS invoice_daily_chain_key;
CREATE UNIQUE INDEX CONCURRENTLY invoice_daily_chain_key ON invoice_daily (merchant_id, day, chain_id, token);

-- (No statement below may end a line with a semicolon inside it: the
-- migrator splits this file at ";" + newline.) An update takes the invoice
-- out of its row as it was (count and paid) and puts it into its row as it
-- is: only the change of paid_wei when the chain and asset stayed, a move
-- of both when they changed.
DO $$ BEGIN
    ALTER TABLE invoice_daily DROP CONSTRAINT IF EXISTS invoice_daily_pkey; CREATE OR REPLACE FUNCTION invoice_daily_inserted() RETURNS trigger LANGUAGE plpgsql AS $f$
    BEGIN
        INSERT INTO invoice_daily AS r (merchant_id, day, chain_id, token, invoices, paid)
        SELECT n.merchant_id, (n.created_at AT TIME ZONE 'UTC')::date, n.chain_id, COALESCE(n.token_address, '\x'::bytea),
            count(*), sum(n.paid_wei)
        FROM inserted n GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (merchant_id, day, chain_id, token) DO UPDATE SET invoices = r.invoices + EXCLUDED.invoices, paid = r.paid + EXCLUDED.paid; RETURN NULL; END $f$; CREATE OR REPLACE FUNCTION invoice_daily_paid() RETURNS trigger LANGUAGE plpgsql AS $f$
    BEGIN
        INSERT INTO invoice_daily AS r (merchant_id, day, chain_id, token, invoices, paid)
        SELECT merchant_id, day, chain_id, token, sum(invoices), sum(paid) FROM (
            SELECT n.merchant_id, (n.created_at AT TIME ZONE 'UTC')::date AS day, n.chain_id,
                COALESCE(n.token_address, '\x'::bytea) AS token, 1 AS invoices, n.paid_wei AS paid
            FROM updated n JOIN before_update o ON o.id = n.id
            WHERE n.paid_wei <> o.paid_wei OR n.chain_id <> o.chain_id OR n.token_address IS DISTINCT FROM o.token_address
            UNION ALL
            SELECT o.merchant_id, (o.created_at AT TIME ZONE 'UTC')::date, o.chain_id,
                COALESCE(o.token_address, '\x'::bytea), -1, -o.paid_wei
            FROM updated n JOIN before_update o ON o.id = n.id
            WHERE n.paid_wei <> o.paid_wei OR n.chain_id <> o.chain_id OR n.token_address IS DISTINCT FROM o.token_address
        ) d GROUP BY 1, 2, 3, 4 HAVING sum(invoices) <> 0 OR sum(paid) <> 0 ORDER BY 1, 2, 3, 4
        ON CONFLICT (merchant_id, day, chain_id, token) DO UPDATE SET invoices = r.invoices + EXCLUDED.invoices, paid = r.paid + EXCLUDED.paid; RETURN NULL; END $f$; END $$;

WITH split AS (
    SELECT merchant_id, day, chain_id, token, sum(invoices) AS invoices, sum(paid) AS paid FROM (
        SELECT merchant_id, (created_at AT TIME ZONE 'UTC')::date AS day, chain_id,
            COALESCE(token_address, '\x'::bytea) AS token, 1 AS invoices, paid_wei AS paid FROM invoices
        UNION ALL
        SELECT merchant_id, (created_at AT TIME ZONE 'UTC')::date, chain_id, COALESCE(token_address, '\x'::bytea),
            1, paid_wei FROM invoices_archive
        UNION ALL
        SELECT merchant_id, day, chain_id, token, -invoices, -paid FROM invoice_daily WHERE chain_id IS NOT NULL
    ) a GROUP BY 1, 2, 3, 4 HAVING sum(invoices) <> 0 OR sum(paid) <> 0
), folded AS (
    DELETE FROM invoice_daily WHERE chain_id IS NULL
)
INSERT INTO invoice_daily AS r (merchant_id, day, chain_id, token, invoices, paid)
SELECT merchant_id, day, chain_id, token, invoices, paid FROM split ORDER BY 1, 2, 3, 4
ON CONFLICT (merchant_id, day, chain_id, token) DO UPDATE SET invoices = r.invoices + EXCLUDED.invoices, paid = r.paid + EXCLUDED.paid;

ALTER TABLE invoice_daily ALTER COLUMN chain_id SET NOT NULL;
DO $$ BEGIN ALTER TABLE invoice_daily DROP CONSTRAINT IF EXISTS invoice_daily_pkey; ALTER TABLE invoice_daily ADD CONSTRAINT invoice_daily_pkey PRIMARY KEY USING INDEX invoice_daily_chain_key; END $$;
