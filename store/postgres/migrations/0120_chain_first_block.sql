-- The number of the chain's first block, whose hash genesis_hash holds: 0
-- on go-ethereum chains; 1 on CometBFT chains (Cosmos EVM), which have no
-- block 0 (evmd answers a request for block 0 with block 1, whose parent
-- hash is zero). See docs/chain-identity.md.
ALTER TABLE chain_identity ADD COLUMN genesis_number BIGINT NOT NULL DEFAULT 0;
