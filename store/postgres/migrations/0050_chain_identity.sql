-- The chain this database holds, recorded at first start, and checkpoints
-- of indexed block hashes: a node that serves another chain (a reset dev
-- chain, a new network with the same chain id, a wrong node behind a load
-- balancer) is refused instead of mixed in. See docs/chain-identity.md.

-- One row (id = 1): the chain id and the genesis hash as the node reported
-- them (an all-zero hash when the node did not serve block 0).
CREATE TABLE chain_identity (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    chain_id     BIGINT      NOT NULL,
    genesis_hash BYTEA       NOT NULL,
    recorded_at  TIMESTAMPTZ NOT NULL
);

-- Hashes of indexed blocks, written by the indexer with the blocks. Recent
-- ones are pruned as the index advances; permanent ones (sparse heights)
-- are kept, so a node far behind can still be compared.
CREATE TABLE chain_checkpoints (
    block_number BIGINT PRIMARY KEY,
    block_hash   BYTEA       NOT NULL,
    permanent    BOOLEAN     NOT NULL DEFAULT FALSE,
    recorded_at  TIMESTAMPTZ NOT NULL
);
