-- What settlement's invoice update costs, and what a schema without
-- `status` in the invoices' indexes would save (BENCHMARKS.md,
-- "settlement", 2026-11-29 "Where the invoice update goes"). Run against a
-- scratch database migrated by payd (it inserts a merchant and 20,000
-- invoices, and drops indexes of `invoices`):
--
--   createdb scratch
--   DATABASE_URL=postgres://…/scratch go run ./hosts/payd migrate
--   psql postgres://…/scratch -f scripts/measure-invoice-update.sql
--
-- Variant 4 is the whole "settlement state in a narrow table" lever: the
-- HOT update of variant 3 plus what keeping the status indexes elsewhere
-- costs.
--
-- Each figure is the median of 40 updates of 50 random PENDING invoices to
-- PAID (as a block's payments do), each rolled back.
\set ON_ERROR_STOP on
INSERT INTO merchants (name, api_key_digest, api_key_hash, api_key_prefix, webhook_secret_ciphertext,
    settlement_address, created_at, updated_at)
VALUES ('measure', '\x6d', 'h', 'p', '\x01', '\x0000000000000000000000000000000000000001', now(), now());
INSERT INTO invoices (merchant_id, status, amount_wei, paid_wei, chain_id, deposit_address, derivation_index,
    payment_uri, lookup_token_hash, expires_at, created_at, updated_at)
SELECT (SELECT max(id) FROM merchants), CASE WHEN i < 10000 THEN 'PENDING' ELSE 'SETTLED' END,
    1000000000000000000, CASE WHEN i < 10000 THEN 0 ELSE 1000000000000000000 END, 1337,
    decode(md5('d' || i) || left(md5('e' || i), 8), 'hex'), 5000000 + i, 'ethereum:x',
    decode(md5('measure' || i), 'hex'), now() + interval '1 day', now(), now()
FROM generate_series(0, 19999) AS i;
VACUUM ANALYZE invoices;

CREATE TEMP TABLE figures (variant text, ms numeric);
CREATE FUNCTION pg_temp.measure(variant text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
    t0 timestamptz;
    t1 timestamptz;
BEGIN
    FOR k IN 1..40 LOOP
        SELECT array_agg(id) INTO ids FROM (SELECT id FROM invoices WHERE status = 'PENDING' ORDER BY random() LIMIT 50) x;
        BEGIN -- a subtransaction, rolled back by the exception below
            t0 := clock_timestamp();
            UPDATE invoices SET status = 'PAID', paid_wei = amount_wei, paid_at = now(), updated_at = now(),
                version = version + 1 WHERE id = ANY(ids);
            t1 := clock_timestamp();
            RAISE EXCEPTION 'roll back' USING ERRCODE = 'P0001';
        EXCEPTION WHEN raise_exception THEN NULL;
        END;
        INSERT INTO figures VALUES (variant, extract(epoch FROM t1 - t0) * 1000);
    END LOOP;
END $$;

SELECT pg_temp.measure('1. as migrated (14 indexes, status in 5, fillfactor 100)');
DROP INDEX invoices_merchant_status, invoices_expiring, invoices_paid, invoices_confirmed;
SELECT pg_temp.measure('2. without the 4 indexes that name status');
ALTER TABLE invoices SET (fillfactor = 70);
VACUUM FULL invoices;
ANALYZE invoices;
SELECT pg_temp.measure('3. and fillfactor 70: the update can be HOT');
-- 4: what the queries that need those indexes would read instead: a
-- narrow table of each invoice's status (and its merchant, chain and
-- expiry), with the 4 indexes, kept by a statement trigger on invoices.
CREATE TABLE invoice_states (id bigint PRIMARY KEY, merchant_id bigint NOT NULL, chain_id bigint NOT NULL,
    status text NOT NULL, expires_at timestamptz NOT NULL, confirmed_at timestamptz);
INSERT INTO invoice_states SELECT id, merchant_id, chain_id, status, expires_at, confirmed_at FROM invoices;
CREATE INDEX ON invoice_states (merchant_id, status, id DESC);
CREATE INDEX ON invoice_states (expires_at) WHERE status = 'PENDING';
CREATE INDEX ON invoice_states (id) WHERE status = 'PAID';
CREATE INDEX ON invoice_states (confirmed_at, id) WHERE status = 'CONFIRMED';
VACUUM ANALYZE invoice_states;
CREATE FUNCTION pg_temp.invoice_states_kept() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    UPDATE invoice_states s SET status = n.status, confirmed_at = n.confirmed_at
    FROM updated n WHERE s.id = n.id AND (s.status, s.confirmed_at) IS DISTINCT FROM (n.status, n.confirmed_at);
    RETURN NULL;
END $f$;
CREATE TRIGGER invoice_states_kept AFTER UPDATE ON invoices REFERENCING NEW TABLE AS updated
    FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.invoice_states_kept();
SELECT pg_temp.measure('4. and the status indexes on a narrow table a trigger keeps');
SELECT variant, count(*) AS updates, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) AS median_ms,
    round(percentile_cont(0.9) WITHIN GROUP (ORDER BY ms)::numeric, 2) AS p90_ms
FROM figures GROUP BY variant ORDER BY variant;
