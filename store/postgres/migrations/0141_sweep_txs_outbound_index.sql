-- evmpay:no-transaction
-- An outbound's transactions are found by their outbound_id (0140): built
-- CONCURRENTLY because sweep_txs is a big table (docs/scale.md); safe to
-- run again from the top.
DROP INDEX CONCURRENTLY IF EXISTS sweep_txs_outbound;
CREATE INDEX CONCURRENTLY sweep_txs_outbound ON sweep_txs (outbound_id) WHERE outbound_id IS NOT NULL;
