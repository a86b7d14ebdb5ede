-- What the chain-scoping migration of issue #36 would cost on a big table
-- (docs/chains.md, "Migration without a long lock"): 10 M rows shaped like
-- `transactions`, then the three steps, each timed. Run against a scratch
-- database (it creates and drops tx_exp):
--
--   psql "$URL" -f scripts/measure-chain-migration.sql
\timing on
DROP TABLE IF EXISTS tx_exp;
CREATE TABLE tx_exp (hash bytea PRIMARY KEY, block_number bigint NOT NULL, value numeric(78,0) NOT NULL, input bytea);
INSERT INTO tx_exp SELECT decode(md5(i::text) || md5((i+1)::text), 'hex'), i/1000, i, '\x' FROM generate_series(1, 10000000) i;
VACUUM ANALYZE tx_exp;
SELECT pg_size_pretty(pg_total_relation_size('tx_exp'));
SET lock_timeout = '1s';
ALTER TABLE tx_exp ADD COLUMN chain_id bigint NOT NULL DEFAULT 262144;
ALTER TABLE tx_exp ALTER COLUMN chain_id DROP DEFAULT;
SELECT count(*) FROM tx_exp WHERE chain_id = 262144;
RESET lock_timeout;
CREATE UNIQUE INDEX CONCURRENTLY tx_exp_chain_hash ON tx_exp (chain_id, hash);
SET lock_timeout = '1s';
BEGIN;
ALTER TABLE tx_exp DROP CONSTRAINT tx_exp_pkey;
ALTER TABLE tx_exp ADD CONSTRAINT tx_exp_pkey PRIMARY KEY USING INDEX tx_exp_chain_hash;
COMMIT;
\d tx_exp
DROP TABLE tx_exp;
