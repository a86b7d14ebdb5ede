-- Where the ledger starts following a service wallet is a block of one
-- chain: a wallet has one address on every chain, and an opening block on
-- each chain whose ledger follows it (issue #36). The opening blocks move
-- from service_wallets to a table keyed by (chain, wallet); the existing
-- ones are the recorded chain's (filled in by the migrator, as for 0190).
-- A few rows: one transaction.
CREATE TABLE service_wallet_ledger (
    chain_id   BIGINT NOT NULL,
    address    BYTEA  NOT NULL REFERENCES service_wallets (address),
    from_block BIGINT NOT NULL CHECK (from_block >= 0),
    PRIMARY KEY (chain_id, address)
);
INSERT INTO service_wallet_ledger (chain_id, address, from_block)
    SELECT {{DEFAULT_CHAIN_ID}}, address, ledger_from_block FROM service_wallets WHERE ledger_from_block IS NOT NULL;
ALTER TABLE service_wallets DROP COLUMN ledger_from_block;
