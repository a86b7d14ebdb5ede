-- The chain's finalized block under the "tag" finality mode
-- (docs/chains.md, "Finality"): one row (id = 1), written by the indexer
-- with the highest block the node reported as "finalized" that it found,
-- same hash, on the indexed chain; read by invoice, settlement and sweep.
-- It never moves back (the upsert is monotonic). No row: none recorded
-- yet (or another finality mode).
CREATE TABLE chain_finalized (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    block_number BIGINT NOT NULL CHECK (block_number >= 0)
);
